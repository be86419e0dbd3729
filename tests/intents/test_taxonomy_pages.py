# ruff: noqa: F811 (pytest fixtures imported from tests.intents.taxonomy_fixtures are test arguments)
"""Taxonomy pages with three actors (reviewers and an operator, a read-only teammate, an outsider), their query
counts, and procedure mining grouped by the reviewed intent."""

import pytest
from django.urls import reverse

from accounts.roles import Role
from intents.models import IntentJudgment, TaxonomyVersion
from intents.taxonomy.selectors import runs_of_intent
from procedures.mining.services import procedure_mine
from reviews.models import PromotionRequest
from tests.conftest import logged_in
from tests.factories import user_with
from tests.intents.taxonomy_fixtures import (  # noqa: F401 (fixtures)
    act,
    activate_draft,
    judge,
    make_candidate,
    make_run,
    oscar,
    otto,
    rita,
    rob,
    ruth,
    vera,
)
from trajectories.models import Step

pytestmark = pytest.mark.django_db


def post(client, url, data):
    client.get(reverse("intents:taxonomy"))
    return client.post(url, {**data, "csrfmiddlewaretoken": client.cookies["csrftoken"].value})


@pytest.fixture
def runs(db):
    return [make_run(n, intent="reset_password") for n in range(1, 7)]


def candidates(runs, size):
    return [make_candidate(f"Intent number {n}", [runs[n % len(runs)]]) for n in range(size)]


def test_outsiders_are_sent_to_the_login_page(runs, oscar):
    candidate = make_candidate("Reset password", runs[:1])
    for url in (reverse("intents:taxonomy"), reverse("intents:taxonomy_queue")):
        assert logged_in(oscar).get(url).status_code == 302
    response = logged_in(oscar).post(reverse("intents:taxonomy_judge", args=[candidate.pk]), {"verdict": "valid"})
    assert response.status_code in (302, 403) and not IntentJudgment.objects.exists()


def test_a_read_only_teammate_reads_but_cannot_judge_or_draft(runs, vera, rita, rob):
    candidate = make_candidate("Reset password", runs[:1])
    client = logged_in(vera)
    page = client.get(reverse("intents:taxonomy_queue"))
    assert page.status_code == 200 and b"needs the reviewer role" in page.content and b"data-valid" not in page.content
    assert client.get(reverse("intents:taxonomy")).status_code == 200
    assert post(client, reverse("intents:taxonomy_judge", args=[candidate.pk]), {"verdict": "valid"}).status_code == 403
    judge(candidate, "valid", rita, rob)
    assert post(client, reverse("intents:taxonomy_draft"), {}).status_code == 403
    assert not TaxonomyVersion.objects.exists()


def test_a_reviewer_judges_from_the_queue_and_then_sees_the_others(runs, rita, rob):
    candidate = make_candidate("Reset password", runs[:1])
    judge(candidate, "invalid", rob)
    client = logged_in(rita)
    page = client.get(reverse("intents:taxonomy_queue"))
    assert b"Reset password" in page.content and b"rob: invalid" not in page.content
    assert reverse("trajectories:detail", args=[runs[0].pk]).encode() in page.content
    assert b"the password was reset" in page.content and b"one run only" in page.content
    response = post(client, reverse("intents:taxonomy_judge", args=[candidate.pk]), {"verdict": "valid"})
    assert response.status_code == 302
    page = client.get(reverse("intents:taxonomy_queue"))
    assert b"rob: invalid" in page.content and b"rita: valid" in page.content
    assert b"No intent candidate waits for your judgment" in page.content


def test_a_refused_judgment_re_renders_the_queue_with_its_status(runs, rita):
    candidate = make_candidate("Reset password", runs[:1])
    client = logged_in(rita)
    response = post(client, reverse("intents:taxonomy_judge", args=[candidate.pk]), {"verdict": "merge"})
    assert response.status_code == 422 and b"choose the intent to merge into" in response.content
    post(client, reverse("intents:taxonomy_judge", args=[candidate.pk]), {"verdict": "valid"})
    response = post(client, reverse("intents:taxonomy_judge", args=[candidate.pk]), {"verdict": "invalid"})
    assert response.status_code == 409


@pytest.mark.parametrize("size", [2, 12])
def test_the_queue_runs_a_bounded_number_of_queries(runs, rita, rob, size, django_assert_max_num_queries):
    for candidate in candidates(runs, size):
        judge(candidate, "valid", rob)
    client = logged_in(rita)
    with django_assert_max_num_queries(10):
        response = client.get(reverse("intents:taxonomy_queue"))
    assert response.content.count(b"data-intent-row") == size


def test_the_review_queue_page_counts_the_candidates_waiting(runs, rita, vera):
    candidates(runs, 3)
    assert b"3</strong> intent candidates await judgment" in logged_in(rita).get(reverse("reviews:queue")).content
    assert b"intent candidates await" not in logged_in(vera).get(reverse("reviews:queue")).content


def test_drafting_from_the_page_proposes_the_version(runs, rita, rob, otto):
    candidate = make_candidate("Reset password", runs[:2])
    judge(candidate, "valid", rita, rob)
    only_operator = logged_in(user_with(Role.OPERATOR)).get(reverse("intents:taxonomy")).content
    assert b"1 change ready" in only_operator and b"data-draft-sealed" not in only_operator
    client = logged_in(otto)
    page = client.get(reverse("intents:taxonomy"))  # otto is a reviewer too and has not judged it: sealed (issue 24)
    assert b"0 changes ready" in page.content and b"data-draft-sealed" in page.content
    assert b"Reset password" not in page.content
    response = post(client, reverse("intents:taxonomy_draft"), {"rationale": "first"})
    request = PromotionRequest.objects.get(kind="intent_taxonomy")
    assert response.status_code == 302 and response["Location"] == reverse("reviews:item", args=[request.pk])
    item = client.get(reverse("reviews:item", args=[request.pk]))
    assert b"Intents added (1)" in item.content and b"Reset password" in item.content
    response = post(client, reverse("intents:taxonomy_draft"), {})
    assert response.status_code == 409  # the same draft: already has an open request


def test_a_label_edit_from_the_page(runs, rita, rob, ruth, otto):
    candidate = make_candidate("Reset pw", runs[:2])
    judge(candidate, "valid", rita, rob)
    v1, _ = activate_draft(otto, [rita, rob])
    intent_id = v1.intents[0]["intent_id"]
    client = logged_in(otto)
    post(client, reverse("intents:taxonomy_draft"), {"relabel_intent": intent_id, "relabel_label": "Reset password"})
    version = TaxonomyVersion.objects.get(number=2)
    assert version.intents[0]["intent_id"] == intent_id and version.intents[0]["label"] == "Reset password"
    response = post(client, reverse("intents:taxonomy_draft"), {"relabel_intent": intent_id, "relabel_label": "__"})
    assert response.status_code == 422 and b"a new label is required" in response.content


@pytest.mark.parametrize("size", [2, 10])
def test_the_taxonomy_page_runs_a_bounded_number_of_queries(
    runs, rita, rob, ruth, otto, vera, size, django_assert_max_num_queries
):
    for n in range(size):
        candidate = make_candidate(f"Intent {n}", [runs[n % len(runs)]])
        judge(candidate, "valid", rita, rob)
        if n % 3 == 0:
            activate_draft(otto, [rita, rob])
    for user in (vera, otto):
        client = logged_in(user)
        with django_assert_max_num_queries(16):
            response = client.get(reverse("intents:taxonomy"))
        assert response.status_code == 200 and b"data-active-version" in response.content
    assert logged_in(vera).get(reverse("intents:taxonomy") + "?version=99").status_code == 404
    assert b"Version 1 " in logged_in(vera).get(reverse("intents:taxonomy") + "?version=1").content


# --- procedure mining ------------------------------------------------------------------------------------------------
def steps(run, tools=("lookup", "reset")):
    for ordinal, tool in enumerate(tools):
        Step.objects.create(run=run, ordinal=ordinal, tool=tool, action_family="act", ok=True)


def test_mining_groups_runs_by_their_reviewed_intent(rita, rob, otto):
    declared = [make_run(n, intent="reset_password") for n in range(1, 4)]
    other = [make_run(n, intent="unlock") for n in range(4, 7)]
    for run in declared + other:
        steps(run)
    assert runs_of_intent("reset password").reviewed is None
    assert set(runs_of_intent("reset password").runs.values_list("pk", flat=True)) == {r.pk for r in declared}
    # Reviewers accept "Reset password" for two declared runs and merge the unlock runs into it.
    reset = make_candidate("Reset password", declared[:2])
    judge(reset, "valid", rita, rob)
    version, _ = activate_draft(otto, [rita, rob])
    intent_id = version.intents[0]["intent_id"]
    unlock = make_candidate("Unlock account", other)
    judge(unlock, "merge", rita, rob, target=intent_id)
    activate_draft(otto, [rita, rob])
    group = runs_of_intent("reset_password")
    assert group.reviewed.intent_id == intent_id and group.key == "reset password"
    assert group.grouping == f"reviewed intent Reset password ({intent_id})"
    # The reviewed runs, the unlock runs merged into it, and declared runs without a reviewed intent.
    assert set(group.runs.values_list("pk", flat=True)) == {r.pk for r in declared + other}
    assert not runs_of_intent("unlock").runs.exists()  # its runs now belong to the reviewed intent
    assert runs_of_intent(intent_id).reviewed.intent_id == intent_id
    result = procedure_mine(actor=act(otto), intent="Unlock account", held_out_share=0.3)
    procedure = result.version.procedure
    assert procedure.intent == "reset password" and procedure.title == "Reset password"
    assert len(result.version.training_run_ids) + len(result.version.held_out_run_ids) == 6
    page = logged_in(otto).get(reverse("procedures:list"))
    assert f"grouped by reviewed intent Reset password (<code>{intent_id}</code>)".encode() in page.content


def test_without_a_taxonomy_mining_groups_by_normalized_label(otto):
    runs = [make_run(n, intent="Reset_Password") for n in range(1, 4)]
    for run in runs:
        steps(run)
    result = procedure_mine(actor=act(otto), intent="reset password")
    assert result.version.procedure.intent == "reset password"
    page = logged_in(otto).get(reverse("procedures:list"))
    assert b"grouped by normalized label" in page.content
