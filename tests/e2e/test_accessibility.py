"""In Chromium: axe-core (vendored in tests/e2e/vendor/axe-core, never served by the app) checks every page a user can
reach on the demo data; no violation of impact "serious" or "critical" is allowed.

The pages come from the URL conf: every route is either visited below, a POST-only action (a GET of it redirects to its
form's page, with an Allow header without GET), or left out in `NOT_VISITED` with the reason, so a new page fails
`test_every_page_of_the_url_conf_is_checked` until it is added to `visits()`. One browser context (CSP bypassed, so the
axe script can be injected; the pages' own scripts still run), the user switched by its session cookie, the pages
visited one after the other.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, resolve
from playwright.sync_api import BrowserContext

from accounts.models import ApiToken, User
from accounts.services import Actor, api_token_create
from graphs.models import EvolutionRound, EvolutionRun, Workspace
from intents.models import IntentProposalRun
from intents.windows.models import DriftReport, WindowAnalysis
from procedures.models import ProcedureVersion
from reviews.models import PromotionRequest
from rubrics.models import RubricScoreRow, RubricVersion
from tests.graphs.evolution_helpers import run_to_end, start
from tests.helpers.browser import blocking_violations, report
from trajectories.models import Run
from uplift.models import Certificate, Watch

pytestmark = pytest.mark.e2e


# Routes of the URL conf that are not pages, each with the reason; everything else must be visited.
NOT_VISITED = {
    "healthz": "JSON for load balancers",
    "trajectories:export": "a JSONL download",
    "rubrics:run_panel": "an htmx fragment of the run page, checked there",
    "trajectories:totals": "an htmx fragment of the explorer (a filter's totals), checked there",
}
NOT_VISITED_PREFIXES = {
    "api/v1": "the JSON API",
    "admin/": "Django's own admin: its index and the users list (linked from the navigation) are visited, the rest "
    "are the same templates",
}
ADMIN_VISITED = {"admin:index", "admin:accounts_user_changelist"}

# For the self-test: the login form's username input taken out of its label.
UNLABEL = "() => { const input = document.getElementById('id_username'); input.closest('label').replaceWith(input); }"


@dataclass(frozen=True)
class Visit:
    path: str
    user: str | None = "admin"  # a demo username, or None for a visitor who is not logged in
    status: int = 200


# --- the routes -------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Route:
    name: str  # "namespace:name", or the route itself when it has no name
    route: str


def routes(resolver: URLResolver | None = None, prefix: str = "", namespace: str = "") -> Iterator[Route]:
    """Every route of config.urls, with its namespaced name and its whole path pattern."""
    resolver = resolver or get_resolver()
    for entry in resolver.url_patterns:
        route = prefix + str(entry.pattern).removeprefix("^")  # a regex route (re_path) reads like the others
        if isinstance(entry, URLResolver):
            inner = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
            yield from routes(entry, route, inner)
        elif isinstance(entry, URLPattern):
            yield Route(f"{namespace}{entry.name}" if entry.name else route, route)


def dummy_path(route: str) -> str:
    """The route with a placeholder for each parameter (enough to learn whether GET is allowed at all)."""
    return "/" + re.sub(r"<(?:(\w+):)?\w+>", lambda m: "1" if m.group(1) == "int" else "x", route)


def post_only(response) -> bool:
    """A POST-only action, not a page: a GET of it redirects to the page of its form, saying what it takes
    (config.middleware.PageMethodMiddleware), or is a 405."""
    allowed = response.get("Allow", "")
    return response.status_code == 405 or (response.status_code == 302 and allowed and "GET" not in allowed)


def left_out(route: Route) -> str:
    if route.name in NOT_VISITED:
        return NOT_VISITED[route.name]
    for prefix, reason in NOT_VISITED_PREFIXES.items():
        if route.route.startswith(prefix) and route.name not in ADMIN_VISITED:
            return reason
    return ""


# --- the demo data and the pages over it ------------------------------------------------------------------------------
@pytest.fixture
def demo(live_server, settings, tmp_path):
    """The demo seed, plus a finished 4-round evolution run (accepted, failed, rejected, duplicate rounds) and a token
    of the admin's own (for its revoke page)."""
    settings.VAR_DIR = tmp_path
    call_command("seed_demo", stdout=io.StringIO())
    run_to_end(start(Workspace.objects.get(slug="two-hop-lab"), rounds=4))
    admin = User.objects.get(username="admin")
    api_token_create(actor=Actor(user=admin), user=admin, name="a11y", scopes=["trajectories:read"])
    return live_server


def visits() -> list[Visit]:
    """Every page, as the admin (who sees every control) unless the page is about someone else."""
    runs = list(Run.objects.production().order_by("pk").values_list("pk", flat=True))
    scored = RubricScoreRow.objects.order_by("pk").values_list("run_id", flat=True).first()
    failed = Run.objects.production().filter(outcome="failure").order_by("pk").values_list("pk", flat=True).first()
    evolution = EvolutionRun.objects.filter(workspace__slug="two-hop-lab").order_by("-pk").first()
    token = ApiToken.objects.get(name="a11y")
    rubric = RubricVersion.objects.order_by("pk").first().rubric_id  # its rubric (their ids need not match)
    pages = [
        Visit("/accounts/login/", user=None),
        Visit("/"),
        Visit("/accounts/settings/"),
        Visit(f"/accounts/settings/tokens/{token.pk}/revoke/"),
        Visit("/accounts/settings/agents/"),
        Visit("/accounts/audit/"),
        Visit("/accounts/audit/", user="vera", status=403),
        Visit("/no/such/page/", status=404),
        Visit("/no/such/page/", user=None, status=404),  # a visitor's error page: the static navigation
        Visit("/trajectories/?search=" + "x" * django_settings.WAYMARK_MAX_URL_LENGTH, status=414),
        Visit("/trajectories/"),
        Visit("/trajectories/?search=refund&outcome=failure&sort=score"),
        Visit("/trajectories/?q=refund&steps_min=1"),  # totals loaded after the rows (trajectories:totals)
        Visit(f"/trajectories/{scored}/"),
        Visit(f"/trajectories/{failed}/"),
        Visit(f"/trajectories/compare?a={runs[0]}&b={runs[1]}"),
        Visit("/models/"),
        Visit("/graphs/"),
        Visit("/graphs/two-hop-qa/"),
        Visit("/graphs/two-hop-lab/"),
        Visit("/graphs/two-hop-qa/diff/"),
        Visit("/graphs/two-hop-lab/evolutions/"),
        Visit(f"/graphs/two-hop-lab/evolutions/{evolution.pk}/"),
        *[
            Visit(f"/graphs/two-hop-lab/evolutions/{evolution.pk}/rounds/{iteration}/")
            for iteration in EvolutionRound.objects.filter(run=evolution).values_list("iteration", flat=True)
        ],
        Visit("/graphs/two-hop-lab/rejections/"),
        Visit("/procedures/"),
        *[Visit(f"/procedures/versions/{pk}/") for pk in ProcedureVersion.objects.values_list("pk", flat=True)],
        Visit(f"/procedures/runs/{runs[0]}/"),
        Visit("/intents/"),
        Visit(f"/intents/runs/{IntentProposalRun.objects.order_by('pk').first().pk}/"),
        Visit("/intents/candidates/"),
        Visit("/intents/taxonomy/"),
        Visit("/intents/taxonomy/review/"),
        Visit("/intents/windows/"),
        Visit(f"/intents/windows/{WindowAnalysis.objects.order_by('pk').first().pk}/"),
        Visit(f"/intents/windows/drift/{DriftReport.objects.order_by('pk').first().pk}/"),
        Visit("/intents/windows/alerts/"),
        Visit("/reviews/"),
        Visit("/reviews/propose/"),
        Visit("/reviews/webhooks/"),
        Visit("/reviews/webhooks/deliveries/"),
        Visit("/reviews/rubrics/"),
        Visit(f"/reviews/rubrics/{rubric}/"),
        Visit(f"/reviews/rubrics/{rubric}/agreement/"),
        Visit("/certification/"),
        *[Visit(f"/certification/certificates/{pk}/") for pk in Certificate.objects.values_list("pk", flat=True)[:4]],
        Visit("/certification/watches/"),
        *[Visit(f"/certification/watches/{pk}/") for pk in Watch.objects.values_list("pk", flat=True)],
        Visit("/admin/"),
        Visit("/admin/accounts/user/"),
    ]
    for item in PromotionRequest.objects.order_by("pk"):
        pages.append(Visit(f"/reviews/{item.pk}/"))
        pages.append(Visit(f"/reviews/history/{item.kind}/{item.parent_key}/"))
    return list(dict.fromkeys(pages))


def log_in(context: BrowserContext, live_server, username: str | None) -> None:
    context.clear_cookies()
    if username is None:
        return
    client = Client()
    client.force_login(User.objects.get(username=username))
    session = client.cookies[django_settings.SESSION_COOKIE_NAME].value
    context.add_cookies([{"name": django_settings.SESSION_COOKIE_NAME, "value": session, "url": live_server.url}])


@pytest.fixture
def context(browser, browser_context_args, demo):
    context = browser.new_context(**{**browser_context_args, "base_url": demo.url, "bypass_csp": True})
    yield context
    context.close()


# --- the tests --------------------------------------------------------------------------------------------------------
def test_every_page_of_the_url_conf_is_checked(demo):
    visited = {resolve(visit.path.split("?")[0]).view_name for visit in visits() if visit.status == 200}
    client = Client()
    client.force_login(User.objects.get(username="admin"))
    forgotten = []
    for route in routes():
        if route.name in visited or left_out(route):
            continue
        if not post_only(client.get(dummy_path(route.route))):
            forgotten.append(f"{route.name} (/{route.route})")
    assert not forgotten, "pages missing from visits() (or from NOT_VISITED, with the reason): " + ", ".join(forgotten)


def test_no_page_has_a_serious_or_critical_accessibility_violation(demo, context):
    page = context.new_page()
    found: dict[str, list[dict]] = {}
    wrong_status = []
    user = ""
    for visit in visits():
        if visit.user != user:
            log_in(context, demo, visit.user)
            user = visit.user
        response = page.goto(visit.path)
        if response is None or response.status != visit.status:
            wrong_status.append(f"{visit.path} as {visit.user}: {response and response.status}, not {visit.status}")
            continue
        violations = blocking_violations(page)
        if violations:
            where = visit.path if len(visit.path) <= 120 else visit.path[:100] + f"… ({len(visit.path)} characters)"
            found[f"{where} (as {visit.user or 'a visitor'})"] = violations
    assert not wrong_status, "pages not checked: " + "; ".join(wrong_status)
    assert not found, "serious or critical accessibility violations (axe-core):\n" + report(found)


def test_the_check_catches_a_violation(demo, context):
    """The check is not vacuous: an input stripped of its label is reported, with its target."""
    page = context.new_page()
    page.goto("/accounts/login/")
    page.evaluate(UNLABEL)
    found = {violation["id"]: violation for violation in blocking_violations(page)}
    assert "label" in found, found
    assert found["label"]["impact"] == "critical" and found["label"]["targets"] == ['["#id_username"]']
