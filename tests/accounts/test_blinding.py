"""Blinding everywhere audit events are shown: a judgment of something still open is left out, with its verdict,
comment, reviewer and time, for anyone who has not judged it, on the audit page (every filter, the htmx fragment) and
the dashboard, until it closes. (No API lists audit events; webhooks announce only applied promotions.)"""

import pytest

from accounts.roles import Role
from intents.taxonomy.services import intent_judgment_submit
from reviews import services
from reviews.registry import register_kind, unregister_kind
from tests.conftest import logged_in
from tests.factories import user_with
from tests.intents.taxonomy_fixtures import act, make_candidate, make_run
from tests.reviews.conftest import FAKE, FakeKind

pytestmark = pytest.mark.django_db

AUDIT = "/accounts/audit/"
SECRET = "SEKRIT-verdict-reason"


@pytest.fixture
def kind(db):
    kind = register_kind(FakeKind())
    yield kind
    unregister_kind(FAKE)


@pytest.fixture
def people(db):
    return {
        "otto": user_with(Role.OPERATOR, Role.REVIEWER, username="otto"),
        "rita": user_with(Role.REVIEWER, username="rita"),
        "ada": user_with(Role.ADMIN, Role.REVIEWER, username="ada"),
        "alan": user_with(Role.ADMIN, Role.REVIEWER, username="alan"),
        "vera": user_with(username="vera"),
    }


@pytest.fixture
def open_request(kind, people):
    kind.add("v1")
    request = services.promotion_propose(actor=act(people["otto"]), kind=FAKE, candidate_id="v1", rationale="better")
    services.judgment_submit(actor=act(people["rita"]), request=request, verdict="approve", comment=SECRET)
    request.refresh_from_db()
    assert request.is_pending
    return request


QUERIES = [
    "",
    "?verb=judgment.submit",
    "?verb=judgment.",
    "?target_type=reviews.promotionrequest",
    "?actor=rita",
    "?actor=rita&verb=judgment.submit",
]


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("htmx", [False, True])
def test_an_admin_who_has_not_judged_sees_no_trace_of_the_judgment(people, open_request, query, htmx):
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    page = logged_in(people["ada"]).get(AUDIT + query, **headers).content.decode()
    assert SECRET not in page
    assert "&quot;verdict&quot;" not in page
    assert "<code>judgment.submit</code>" not in page and "a reviewer" not in page and "sealed until" not in page
    assert "<td>rita</td>" not in page


def test_the_target_id_filter_leaves_it_out_too(people, open_request):
    page = logged_in(people["ada"]).get(f"{AUDIT}?target_id={open_request.pk}").content.decode()
    assert "<code>promotion.propose</code>" in page
    assert "<code>judgment.submit</code>" not in page and SECRET not in page and "&quot;verdict&quot;" not in page


def test_an_admin_who_has_judged_sees_the_others(people, open_request):
    services.judgment_submit(actor=act(people["alan"]), request=open_request, verdict="approve", comment="fine")
    page = logged_in(people["alan"]).get(AUDIT + "?verb=judgment.submit").content.decode()
    assert SECRET in page and "<td>rita</td>" in page


def test_everyone_sees_the_judgments_once_the_request_closes(people, open_request):
    services.promotion_withdraw(actor=act(people["otto"]), request=open_request)
    page = logged_in(people["ada"]).get(AUDIT + "?verb=judgment.submit").content.decode()
    assert SECRET in page and "<td>rita</td>" in page and "sealed until" not in page


def test_the_dashboard_lists_no_judgment_of_an_open_request(people, open_request):
    for who in ("vera", "ada", "otto"):
        page = logged_in(people[who]).get("/").content.decode()
        assert "<code>promotion.propose</code>" in page
        assert "judgment.submit" not in page and "a reviewer" not in page
        assert "<strong>rita</strong>" not in page and SECRET not in page


def test_the_dashboard_names_the_judges_for_one_who_has_judged_and_after_closing(people, open_request):
    services.judgment_submit(actor=act(people["alan"]), request=open_request, verdict="approve", comment="fine")
    assert "<strong>rita</strong>" in logged_in(people["alan"]).get("/").content.decode()
    open_request.refresh_from_db()
    assert not open_request.is_pending  # two approvals and a passing gate: applied
    assert "<strong>rita</strong>" in logged_in(people["vera"]).get("/").content.decode()


def test_intent_judgments_are_left_out_until_judged_or_placed(people):
    candidate = make_candidate("reset a password", [make_run(1), make_run(2)])
    intent_judgment_submit(actor=act(people["rita"]), candidate=candidate, verdict="invalid", comment=SECRET)
    page = logged_in(people["ada"]).get(AUDIT + "?verb=intent_judgment.").content.decode()
    assert "<code>intent_judgment.submit</code>" not in page and SECRET not in page and "sealed until" not in page
    dashboard = logged_in(people["vera"]).get("/").content.decode()
    assert "<strong>rita</strong>" not in dashboard and "intent_judgment.submit" not in dashboard
    intent_judgment_submit(actor=act(people["ada"]), candidate=candidate, verdict="valid")
    page = logged_in(people["ada"]).get(AUDIT + "?verb=intent_judgment.").content.decode()
    assert SECRET in page and "<td>rita</td>" in page


def test_other_events_are_untouched(people, open_request):
    page = logged_in(people["ada"]).get(AUDIT + "?verb=promotion.propose").content.decode()
    assert "<td>otto</td>" in page and "&quot;" in page
