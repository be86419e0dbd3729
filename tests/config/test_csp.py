"""Headers and front end of item 7: a Content-Security-Policy without inline scripts on every page, no inline script
in any template (JSON islands are data), Mermaid started with securityLevel "strict", and `make run` printing where
the demo token is saved rather than the token."""

import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import logged_in

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = sorted((ROOT / "templates").rglob("*.html"))


def directives(header: str) -> dict[str, list[str]]:
    parts = [p.strip().split() for p in header.split(";") if p.strip()]
    return {p[0]: p[1:] for p in parts}


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/", "/accounts/audit/", "/graphs/", "/reviews/"])
def test_pages_carry_a_policy_that_allows_no_inline_script(admin_user, path):
    response = logged_in(admin_user).get(path, follow=True)
    policy = directives(response["Content-Security-Policy"])
    assert policy["script-src"] == ["'self'"]
    assert policy["default-src"] == ["'self'"]
    assert policy["object-src"] == ["'none'"] and policy["frame-ancestors"] == ["'none'"]
    assert "'unsafe-inline'" not in policy["script-src"] and "'unsafe-eval'" not in policy["script-src"]


@pytest.mark.django_db
def test_the_login_page_and_the_api_carry_it_too(client):
    assert "script-src 'self'" in client.get("/accounts/login/")["Content-Security-Policy"]
    assert "Content-Security-Policy" in client.get("/api/v1/openapi.json")


@pytest.mark.django_db
def test_the_api_docs_page_loads_its_scripts_from_our_static_files(client):
    page = client.get("/api/v1/docs").content.decode()
    assert "cdn." not in page
    assert inline_scripts(page) == []


def inline_scripts(html: str) -> list[str]:
    """Script elements that run code written in the page: no src, and not a JSON data island."""
    found = []
    for match in re.finditer(r"<script\b([^>]*)>", html, re.I):
        attributes = match.group(1)
        if re.search(r"\bsrc=", attributes) or re.search(r'type=["\']application/(ld\+)?json["\']', attributes):
            continue
        found.append(match.group(0))
    return found


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_template_has_inline_script_or_event_handlers(template):
    text = template.read_text()
    assert inline_scripts(text) == []
    assert not re.search(r"\son[a-z]+\s*=", text), "inline event handler"
    assert "javascript:" not in text.lower()
    assert "hx-on" not in text


def test_mermaid_is_initialized_strict_after_it_loads():
    init = (ROOT / "static/js/mermaid_init.js").read_text()
    assert re.search(r'securityLevel:\s*"strict"', init)
    vendor = "{% static 'vendor/mermaid/mermaid.min.js' %}"
    users = [t for t in TEMPLATES if vendor in t.read_text()]
    assert users
    for template in users:
        text = template.read_text()
        assert text.index(vendor) < text.index("{% static 'js/mermaid_init.js' %}"), template


def test_make_run_prints_where_the_demo_token_is_not_the_token(tmp_path):
    script = (ROOT / "scripts/run.sh").read_text()
    message = script[script.index("cat <<MSG") : script.index("\nMSG\n") + 5]
    (tmp_path / "demo-agent-token").write_text("wm_secret_plaintext\n")
    shown = subprocess.run(
        ["bash", "-c", f"port=8000\n{message}"],
        env={"WAYMARK_VAR_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "wm_secret_plaintext" not in shown
    assert str(tmp_path / "demo-agent-token") in shown
