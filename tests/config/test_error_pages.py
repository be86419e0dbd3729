"""Error pages (issue 11): 403, 404, 414 and 500 are styled pages with the navigation that say why; API paths keep
their JSON Error body."""

import socket
import subprocess
import sys
import time
from http.client import HTTPConnection
from pathlib import Path

import pytest
from django.template import loader
from django.test import Client, override_settings
from django.urls import reverse

from config import error_views
from config.middleware import DEFAULT_MAX_URL_LENGTH
from tests.conftest import logged_in

ROOT = Path(__file__).resolve().parents[2]
NAV = 'aria-label="Main"'


def test_a_403_is_styled_keeps_the_navigation_and_says_which_role_is_needed(client, viewer):
    client.force_login(viewer)
    response = client.post(reverse("procedures:mine"), {"intent": "refund_request", "held_out_share": 0.3, "seed": 17})
    page = response.content.decode()
    assert response.status_code == 403
    assert NAV in page and "waymark.css" in page
    assert "Mining procedures needs the operator role" in page
    assert "vera" in page or viewer.username in page  # who is signed in, and with which roles
    assert "no role" in page


def test_a_failed_csrf_check_answers_the_styled_403_saying_to_reload(operator):
    response = logged_in(operator).post(reverse("procedures:mine"), {"intent": "refund_request"})
    page = response.content.decode()
    assert response.status_code == 403
    assert NAV in page and "Reload the page and send it again" in page


def test_a_403_without_a_message_still_says_why(operator):
    # The agents page raises a bare PermissionDenied for people without the operator role: explain generically.
    response = logged_in(operator).get(reverse("accounts:audit"))
    assert response.status_code == 403
    page = response.content.decode()
    assert NAV in page and "You do not have the role this page needs" in page


def test_a_404_names_the_page_that_was_not_found(viewer):
    response = logged_in(viewer).get("/procedures/versions/987654/")
    page = response.content.decode()
    assert response.status_code == 404
    assert NAV in page and "waymark.css" in page
    assert "/procedures/versions/987654/" in page
    assert "Page not found" in page


def test_a_404_of_an_unknown_path_escapes_the_path(viewer):
    response = logged_in(viewer).get("/no-such-page/<script>x</script>")
    page = response.content.decode()
    assert response.status_code == 404
    assert "<script>x</script>" not in page and "&lt;script&gt;" in page


@pytest.mark.parametrize("path", ["/api/v1/procedures/versions/987654", "/api/v1/no-such-operation"])
def test_api_paths_keep_their_json_404(client, db, make_token, viewer, path):
    token = make_token(viewer, "procedures:read")
    response = client.get(path, HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["code"] == "not_found"


def test_the_handlers_answer_json_under_the_api(rf):
    from django.core.exceptions import PermissionDenied
    from django.http import Http404

    request = rf.get("/api/v1/anything")
    assert error_views.permission_denied(request, PermissionDenied("nope")).status_code == 403
    assert error_views.permission_denied(request, PermissionDenied("nope"))["Content-Type"] == "application/json"
    assert error_views.page_not_found(request, Http404("gone")).status_code == 404
    assert error_views.server_error(request).status_code == 500
    assert b'"code": "internal_error"' in error_views.server_error(request).content


def test_the_500_page_renders_without_a_request_or_a_database():
    # No db fixture: any database access while rendering fails this test.
    html = loader.get_template("500.html").render({})
    assert "Server error" in html and NAV in html and "waymark.css" in html
    assert reverse("trajectories:list") in html  # the navigation, static: no user needed


def test_a_view_that_raises_answers_the_styled_500(viewer):
    client = Client(raise_request_exception=False)
    client.force_login(viewer)
    with override_settings(ROOT_URLCONF="tests.config.urls_boom"):
        response = client.get("/boom/")
    assert response.status_code == 500
    page = response.content.decode()
    assert "Server error" in page and NAV in page


def test_a_100k_character_url_answers_a_styled_414_through_the_middleware(viewer):
    response = logged_in(viewer).get("/trajectories/", {"q": "x" * 100_000})
    page = response.content.decode()
    assert response.status_code == 414
    assert NAV in page and "waymark.css" in page
    assert "too long" in page and f"at most {DEFAULT_MAX_URL_LENGTH} are accepted" in page


def test_a_url_just_under_the_limit_passes(viewer):
    response = logged_in(viewer).get("/trajectories/", {"q": "x" * (DEFAULT_MAX_URL_LENGTH - 100)})
    assert response.status_code == 200


def test_an_overlong_api_url_answers_the_json_414(client, db):
    response = client.get("/api/v1/trajectories", {"q": "x" * 100_000})
    assert response.status_code == 414
    assert response.json()["code"] == "uri_too_long"


@override_settings(WAYMARK_MAX_URL_LENGTH=50)
def test_the_limit_is_a_setting(viewer):
    assert logged_in(viewer).get("/trajectories/", {"q": "x" * 60}).status_code == 414


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_100k_character_url_through_gunicorn_gets_the_styled_414():
    """Beyond gunicorn's own request-line limit, the Procfile's worker class answers with the same styled page."""
    port = _free_port()
    procfile = (ROOT / "Procfile").read_text()
    assert "config.gunicorn_worker.WaymarkThreadWorker" in procfile and "--limit-request-line" in procfile
    server = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "gunicorn"),
            "config.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--worker-class",
            "config.gunicorn_worker.WaymarkThreadWorker",
            "--threads",
            "2",
            "--limit-request-line",
            "8190",
        ],
        cwd=ROOT,
        env={**_env(), "DJANGO_SETTINGS_MODULE": "config.settings.test"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        status, body = None, ""
        for _ in range(100):
            try:
                connection = HTTPConnection("127.0.0.1", port, timeout=5)
                connection.request("GET", "/trajectories/?q=" + "x" * 100_000)
                response = connection.getresponse()
                status, body = response.status, response.read().decode()
                break
            except OSError:
                time.sleep(0.1)
        assert status == 414, server.stderr and server.poll()
        assert "waymark.css" in body and NAV in body and "too long" in body
    finally:
        server.terminate()
        server.wait(timeout=10)


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)
