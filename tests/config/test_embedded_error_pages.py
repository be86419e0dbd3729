"""Product error pages on the embedded default (issue 24, item 2): debug is off unless WAYMARK_DEBUG=1 is set on
purpose; 400, 403, 404 and 500 are the styled pages with the navigation, or the API's Error body under /api/; nothing
of settings, paths or tracebacks reaches a browser. The last tests run `make run`'s settings through gunicorn."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.client import HTTPConnection
from pathlib import Path

import pytest
from django.core.exceptions import BadRequest, PermissionDenied
from django.test import Client, override_settings

from tests.config.urls_boom import SECRET_LOOKING
from trajectories import api as trajectories_api

ROOT = Path(__file__).resolve().parents[2]
NAV = 'aria-label="Main"'
# What Django's technical pages carry and a product page never does.
DEBUG_TEXT = ("Traceback", "URLconf", "DEBUG = True", "Request Method", "settings.py", "Django tried", SECRET_LOOKING)
BOOM = {"ROOT_URLCONF": "tests.config.urls_boom"}


def assert_styled(response, status: int, title: str) -> str:
    page = response.content.decode()
    assert response.status_code == status
    assert response["Content-Type"].startswith("text/html")
    assert NAV in page and "waymark.css" in page and title in page
    assert not [text for text in DEBUG_TEXT if text in page], page
    return page


def assert_error_body(response, status: int, code: str) -> dict:
    assert response.status_code == status
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"code", "message", "details"} and body["code"] == code
    assert not [text for text in DEBUG_TEXT if text in response.content.decode()]
    return body


def _settings_of(module: str, **env: str) -> str:
    clean = {key: os.environ[key] for key in ("PATH", "HOME", "LANG") if key in os.environ}
    clean.update(DJANGO_SETTINGS_MODULE=module, **env)
    code = "from django.conf import settings; print(settings.DEBUG, settings.WHITENOISE_AUTOREFRESH)"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=clean, capture_output=True, text=True, timeout=60, check=True
    )
    return result.stdout.strip()


def test_the_embedded_default_has_debug_off_unless_waymark_debug_is_set(tmp_path):
    var = str(tmp_path)
    assert _settings_of("config.settings.local", WAYMARK_VAR_DIR=var) == "False True"
    assert _settings_of("config.settings.local", WAYMARK_VAR_DIR=var, WAYMARK_DEBUG="1") == "True True"
    assert _settings_of("config.settings.local", WAYMARK_VAR_DIR=var, WAYMARK_DEBUG="0") == "False True"


# --- in this process (the test settings have debug off, as the embedded default now has) -------------------------
def test_a_missing_page_is_the_styled_404_with_the_navigation_for_a_visitor_too(client, db, django_assert_num_queries):
    with django_assert_num_queries(0):
        page = assert_styled(client.get("/no/such/page/"), 404, "Page not found")
    assert "/trajectories/" in page and "Sign in" in page  # the static navigation, and where to sign in


def test_a_missing_page_keeps_the_signed_in_users_navigation(client, viewer, django_assert_max_num_queries):
    client.force_login(viewer)
    with django_assert_max_num_queries(2):  # the session's user and its roles (the navigation), nothing else
        page = assert_styled(client.get("/no/such/page/"), 404, "Page not found")
    assert "Log out" in page and "Sign in" not in page


@override_settings(**BOOM)
def test_a_view_that_raises_is_the_styled_500_with_nothing_of_the_error(viewer):
    client = Client(raise_request_exception=False)
    client.force_login(viewer)
    assert_styled(client.get("/boom/"), 500, "Server error")


@override_settings(**BOOM)
def test_a_bad_request_is_the_styled_400_with_the_views_own_reason(viewer):
    client = Client()
    client.force_login(viewer)
    page = assert_styled(client.get("/bad/"), 400, "Bad request")
    assert "The run number must be a whole number." in page


@override_settings(**BOOM)
def test_a_suspicious_request_is_the_styled_400_saying_nothing_of_settings(client, db):
    page = assert_styled(client.get("/suspicious/"), 400, "Bad request")
    assert "ALLOWED_HOSTS" not in page and "could not read this request" in page


def test_a_host_not_allowed_is_the_styled_400(client, db):
    page = assert_styled(client.get("/", HTTP_HOST="evil.example"), 400, "Bad request")
    assert "ALLOWED_HOSTS" not in page and "evil.example" not in page


def test_an_api_host_not_allowed_is_the_json_400(client, db):
    assert_error_body(client.get("/api/v1/trajectories", HTTP_HOST="evil.example"), 400, "bad_request")


@pytest.fixture
def reader(make_token, viewer):
    return make_token(viewer, "trajectories:read")


def _raising(exception: BaseException):
    def fail(*args, **kwargs):
        raise exception

    return fail


def test_an_error_inside_an_api_operation_is_the_json_500(client, reader, monkeypatch):
    monkeypatch.setattr(trajectories_api.selectors, "run_with_steps", _raising(RuntimeError(SECRET_LOOKING)))
    response = client.get("/api/v1/trajectories/1", HTTP_AUTHORIZATION=f"Bearer {reader}")
    body = assert_error_body(response, 500, "internal_error")
    assert body["message"] == "an unexpected error occurred; it has been logged"


@pytest.mark.parametrize(
    ("exception", "status", "code"),
    [(PermissionDenied("not your run"), 403, "forbidden"), (BadRequest("bad run number"), 400, "bad_request")],
)
def test_djangos_own_refusals_inside_an_api_operation_keep_their_status(
    client, reader, monkeypatch, exception, status, code
):
    monkeypatch.setattr(trajectories_api.selectors, "run_with_steps", _raising(exception))
    response = client.get("/api/v1/trajectories/1", HTTP_AUTHORIZATION=f"Bearer {reader}")
    assert assert_error_body(response, status, code)["message"] == exception.args[0]


def test_an_error_outside_the_api_handlers_is_still_the_json_500_under_the_api(db, settings):
    settings.ROOT_URLCONF = BOOM["ROOT_URLCONF"]
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, "tests.config.urls_boom.BoomMiddleware"]
    client = Client(raise_request_exception=False)
    assert_error_body(client.get("/api/v1/trajectories/boom-in-middleware"), 500, "internal_error")
    assert_styled(client.get("/trajectories/boom-in-middleware"), 500, "Server error")


@pytest.mark.parametrize("path", ["/api/v1/nothing-here", "/api/v1/trajectories/987654"])
def test_api_404s_are_the_error_body(client, reader, path):
    assert_error_body(client.get(path, HTTP_AUTHORIZATION=f"Bearer {reader}"), 404, "not_found")


def test_an_api_403_is_the_error_body(client, make_token, viewer):
    token = make_token(viewer, "graphs:read")  # no trajectories:read
    assert_error_body(client.get("/api/v1/trajectories", HTTP_AUTHORIZATION=f"Bearer {token}"), 403, "missing_scope")


def test_a_page_403_is_styled_for_a_visitor_too(client, db):
    # The CSRF failure page is the 403 page: a visitor posting the login form without its token.
    page = assert_styled(Client(enforce_csrf_checks=True).post("/accounts/login/", {}), 403, "Not allowed")
    assert "Reload the page" in page


# --- through gunicorn, with `make run`'s settings -----------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def served(settings_module: str, var_dir: Path) -> Iterator[int]:
    """gunicorn as the Procfile starts it, with `settings_module` and only what `make run` sets in the environment:
    no WAYMARK_DEBUG, no DATABASE_URL or REDIS_URL (the embedded default), var/ in a temporary folder."""
    port = _free_port()
    env = {key: os.environ[key] for key in ("PATH", "HOME", "LANG") if key in os.environ}
    env.update(DJANGO_SETTINGS_MODULE=settings_module, WAYMARK_VAR_DIR=str(var_dir), PORT=str(port))
    server = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "gunicorn"),
            "config.wsgi:application",
            f"--bind=127.0.0.1:{port}",
            "--worker-class=config.gunicorn_worker.WaymarkThreadWorker",
            "--threads=2",
            "--limit-request-line=8190",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        for _ in range(150):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert server.poll() is None, server.stderr.read().decode()
                time.sleep(0.1)
        yield port
    finally:
        server.terminate()
        server.wait(timeout=15)


def fetch(port: int, path: str) -> tuple[int, str, str]:
    connection = HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", path)
    response = connection.getresponse()
    return response.status, response.getheader("Content-Type", ""), response.read().decode()


def test_make_runs_settings_serve_the_styled_404_and_the_static_files(tmp_path):
    with served("config.settings.local", tmp_path) as port:
        status, kind, page = fetch(port, "/no/such/page/")
        assert (status, kind.split(";")[0]) == (404, "text/html")
        assert NAV in page and "Page not found" in page and "/no/such/page/" in page
        assert not [text for text in DEBUG_TEXT if text in page]

        status, kind, css = fetch(port, "/static/css/waymark.css")
        assert (status, kind.split(";")[0]) == (200, "text/css")
        assert css == (ROOT / "static" / "css" / "waymark.css").read_text()
        status, kind, script = fetch(port, "/static/vendor/htmx/htmx.min.js")
        assert status == 200 and "javascript" in kind and script.startswith("var htmx=")

        status, kind, body = fetch(port, "/api/v1/no-such-operation")
        assert (status, kind) == (404, "application/json") and '"code": "not_found"' in body


def test_make_runs_settings_answer_an_error_with_the_styled_500_and_the_json_500(tmp_path):
    with served("tests.config.settings_local_boom", tmp_path) as port:
        status, kind, page = fetch(port, "/boom/")
        assert (status, kind.split(";")[0]) == (500, "text/html")
        assert NAV in page and "Server error" in page
        assert not [text for text in DEBUG_TEXT if text in page]

        status, kind, body = fetch(port, "/api/v1/trajectories/boom-in-middleware")
        assert (status, kind) == (500, "application/json") and '"code": "internal_error"' in body
        assert SECRET_LOOKING not in body
