"""The read-only role writes nothing anywhere (issue 24, "the read-only user writes scores"): a person without a role
may hold only the scopes that read, so every write operation of the API schema answers her token 403, and every
page that takes a POST writes nothing for her. The only rows she may write are her own session and her own tokens,
which can only read (accounts.roles: READ_SCOPES).

Both sweeps take their list from the product itself — the OpenAPI document and the URL conf — so a new write
operation or page is covered (or fails the test until it is) without editing this file's lists of operations."""

from __future__ import annotations

import io
import re
from contextlib import contextmanager

import pytest
from django.core.management import call_command
from django.db import connection
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from accounts.models import ApiToken, User
from accounts.roles import READ_SCOPES, SCOPES, scopes_allowed_for
from tests.conftest import logged_in

pytestmark = pytest.mark.django_db

WRITE_METHODS = ("post", "put", "patch", "delete")
# The one POST of the API that reads: guidance is computed from the active graph and stored nowhere.
API_READS_BY_POST = {"graphs_api_guidance"}
# Pages whose POST writes only the user's own account state: signing in and out, and her own read-only tokens.
OWN_ACCOUNT_PAGES = {"accounts:login", "accounts:logout", "accounts:settings", "accounts:token_revoke"}
# Pages that answer her POST with something other than 403 (or 405), with why; they write nothing all the same.
PAGE_REFUSALS = {
    "graphs:guidance": (200, 400),  # a read by POST: the raw guidance an agent would get, stored nowhere
    # The service decides who may act, so the form is read first: an empty form is 422 before the service's 403.
    "reviews:propose": (403, 422),
    "graphs:evolutions": (403, 422),
    "intents:list": (403, 422),
    "intents:windows": (403, 422),
    "intents:window_compare": (403, 422),
    "intents:window_alert_decide": (403, 422),
    "procedures:mine": (403, 422),
    # The demo holds no evolution run nor webhook endpoint: a 404, unless the role is checked first.
    "graphs:evolution": (403, 404, 405),
    "graphs:evolution_cancel": (403, 404),
    "graphs:evolution_round": (403, 404, 405),
    "reviews:webhook_toggle": (403, 404),
    "trajectories:columns": (302,),  # her choice of the explorer's columns, in a cookie of her own: nothing stored
}
WRITE = re.compile(r"^\s*(INSERT|UPDATE|DELETE)\b", re.IGNORECASE)
# Written by Django for any request (the session) and by the token cache (a token's last use): no product state.
BOOKKEEPING = ("django_session", "accounts_apitoken")


@contextmanager
def writes():
    """The INSERT / UPDATE / DELETE statements run inside the block, bookkeeping tables left out."""
    seen: list[str] = []

    def record(execute, sql, params, many, context):
        if WRITE.match(sql) and not any(f'"{table}"' in sql or f" {table} " in sql for table in BOOKKEEPING):
            seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        yield seen


@pytest.fixture
def demo(settings, tmp_path):
    """The demo data (`seed_demo`): every kind of object a page or an operation can act on, and vera (no role)."""
    settings.VAR_DIR = tmp_path
    call_command("seed_demo", stdout=io.StringIO())
    return User.objects.get(username="vera")


def test_a_person_without_a_role_may_hold_only_the_scopes_that_read(viewer):
    assert set(scopes_allowed_for(viewer)) == READ_SCOPES
    assert {"rubrics:write", "intents:write", "reviews:judge", "trajectories:write"}.isdisjoint(READ_SCOPES)
    assert {scope for scope in SCOPES if scope.endswith(":read")} | {"graphs:guide"} == READ_SCOPES


def test_every_write_operation_of_the_api_answers_her_token_403(demo, make_token, api_client):
    token = make_token(demo, *scopes_allowed_for(demo))
    schema = api_client.get("/api/v1/openapi.json").json()
    operations = [
        (method, path, operation["operationId"])
        for path, methods in schema["paths"].items()
        for method, operation in methods.items()
        if method in WRITE_METHODS
    ]
    assert len(operations) >= 15  # the sweep sees the API's writes (ingest, judgments, assessments, …)
    answered = {}
    with writes() as written:
        for method, path, operation_id in operations:
            url = re.sub(r"\{[^}]+\}", "1", path)
            response = getattr(api_client, method)(url, {}, token=token)
            answered[operation_id] = response.status_code
            if operation_id not in API_READS_BY_POST:
                assert response.status_code == 403, (operation_id, response.content)
                assert response.json()["code"] in ("missing_scope", "forbidden", "not_a_reviewer"), operation_id
    assert not written, written
    assert set(answered) >= API_READS_BY_POST


def _routes(patterns, prefix: str = ""):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            namespace = f"{pattern.namespace}:" if pattern.namespace else prefix
            yield from _routes(pattern.url_patterns, namespace)
        elif isinstance(pattern, URLPattern) and pattern.name:
            yield f"{prefix}{pattern.name}", pattern


def _kwargs(route: str, pattern: URLPattern) -> dict[str, object]:
    """Real objects of the demo for a route's parameters (an id that matches nothing still gets a 404, no write)."""
    from graphs.models import Workspace
    from intents.models import IntentCandidateRecord, IntentProposalRun
    from intents.windows.models import DriftReport, NoveltyAlert, WindowAnalysis
    from procedures.models import ProcedureVersion
    from reviews.models import PromotionRequest
    from rubrics.models import Rubric
    from trajectories.models import Run

    def first(model, field="pk"):
        return model.objects.values_list(field, flat=True).order_by("pk").first() or 1

    by_route = {
        "intents:run": {"run_id": first(IntentProposalRun)},
        "intents:cancel": {"run_id": first(IntentProposalRun)},
        "intents:taxonomy_judge": {"pk": first(IntentCandidateRecord)},
        "intents:window": {"analysis_id": first(WindowAnalysis)},
        "intents:drift": {"report_id": first(DriftReport)},
        "intents:window_alert_decide": {"alert_id": first(NoveltyAlert)},
        "reviews:history": {"kind": "procedure_version", "parent_key": "1"},
        "rubrics:detail": {"pk": first(Rubric)},
        "rubrics:agreement": {"pk": first(Rubric)},
        "procedures:run_vs": {"run_id": first(Run)},
        "accounts:token_revoke": {"token_id": first(ApiToken)},
    }
    if route in by_route:
        return by_route[route]
    if route.startswith("reviews:") and "pk" in pattern.pattern.converters:
        return {"pk": first(PromotionRequest)}
    if route.startswith("procedures:") and "pk" in pattern.pattern.converters:
        return {"pk": first(ProcedureVersion)}
    values = {"pk": first(Run), "run_id": first(Run), "slug": first(Workspace, "slug"), "iteration": 1}
    return {name: values.get(name, 1) for name in pattern.pattern.converters}


def test_no_page_writes_anything_for_her(demo):
    client = logged_in(demo)
    client.get(reverse("dashboard"))
    csrf = client.cookies["csrftoken"].value
    checked = []
    for route, pattern in _routes(get_resolver().url_patterns):
        if route in OWN_ACCOUNT_PAGES or route.startswith(("admin:", "api:")):  # the API: the sweep above
            continue
        try:
            url = reverse(route, kwargs=_kwargs(route, pattern) or None)
        except Exception:  # a pattern with a regular expression of its own (the API's catch-all)
            continue
        with writes() as written:
            response = client.post(url, {"csrfmiddlewaretoken": csrf, "verdict": "valid", "decision": "dismiss"})
        assert not written, (route, written)
        assert response.status_code < 500, route
        if response.status_code == 200:  # a page that ignores the method answered: it showed, it wrote nothing
            continue
        expected = PAGE_REFUSALS.get(route, (403, 405))
        assert response.status_code in expected, (route, response.status_code)
        checked.append(route)
    writes_forms = {
        "procedures:mine",
        "intents:list",
        "intents:taxonomy_draft",
        "intents:taxonomy_judge",
        "intents:window_alert_decide",
        "reviews:propose",
        "reviews:judge",
        "rubrics:list",
        "rubrics:assess",
        "rubrics:judge",
    }
    assert writes_forms <= set(checked)


def test_her_token_form_offers_and_makes_read_scopes_only(demo):
    client = logged_in(demo)
    page = client.get(reverse("accounts:settings")).content.decode()
    csrf = client.cookies["csrftoken"].value
    for scope in READ_SCOPES:
        assert f'value="{scope}"' in page
    response = client.post(
        reverse("accounts:settings"),
        {"csrfmiddlewaretoken": csrf, "name": "scores", "scopes": ["rubrics:read", "rubrics:write"]},
    )
    assert response.status_code == 400
    assert not ApiToken.objects.filter(user=demo, name="scores").exists()
    client.post(
        reverse("accounts:settings"), {"csrfmiddlewaretoken": csrf, "name": "reads", "scopes": ["rubrics:read"]}
    )
    assert ApiToken.objects.get(user=demo, name="reads").scopes == ["rubrics:read"]


def test_pages_with_no_role_check_of_their_own_refuse_a_valid_form_through_their_service(demo):
    """The views check no role (issue 28, item 5): a well-formed request reaches the service, whose RoleRequired is
    answered 403 — with the page itself and the service's reason where the page shows its refusals
    (accounts.roles.refusal_shown), else the 403 page — and nothing is written."""
    from graphs.models import Workspace
    from intents.windows.models import NoveltyAlert, WindowAnalysis

    slug = Workspace.objects.order_by("pk").values_list("slug", flat=True).first()
    before, after = WindowAnalysis.objects.order_by("pk").values_list("pk", flat=True)[:2]
    alert = NoveltyAlert.objects.filter(status="open").order_by("pk").values_list("pk", flat=True).first()
    window = {"start": "2025-03-01T00:00", "end": "2025-03-02T00:00", "threshold": 0.82, "margin": 0.03}
    posts = [  # (route, its arguments, a well-formed form, what the refusing page shows besides the reason)
        ("graphs:evolutions", [slug], {"rounds": 2, "evaluator": "two-hop", "gate": "tie"}, "<h1>Evolution runs"),
        ("graphs:certify", [slug], {"revision": "0"}, f"<code>{slug}</code></small></h1>"),
        ("intents:list", [], {"batch_size": 5}, "<h1>Intent proposals"),
        ("intents:windows", [], {**window, "novelty_threshold": 0.75}, "<h1>Intent windows"),
        (
            "intents:window_compare",
            [],
            {"before": before, "after": after, "matching": "identity"},
            "<h1>Intent windows",
        ),
        ("intents:window_alert_decide", [alert], {"decision": "dismissed"}, "<h1>Novelty alerts"),
        (
            "reviews:webhooks",
            [],
            {"url": "https://hooks.example.test/w", "events": ["promotion.activated"]},
            "Not allowed",
        ),
    ]
    client = logged_in(demo)
    client.get(reverse("dashboard"))
    csrf = client.cookies["csrftoken"].value
    for route, args, form, shown in posts:
        with writes() as written:
            response = client.post(reverse(route, args=args), {"csrfmiddlewaretoken": csrf, **form})
        page = response.content.decode()
        assert response.status_code == 403, (route, response.status_code)
        assert re.search(r"needs the (\w+ or )?\w+ role\.", page) and shown in page, route
        assert not written, (route, written)
