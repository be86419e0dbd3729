# ruff: noqa: F811 (pytest fixtures imported from tests.intents.taxonomy_fixtures are test arguments)
"""Intent candidates reviewed inline (issue 24, "intent review is a round trip per candidate"): the queue shows the
candidate with its run's task and the evidence steps highlighted, next / skip and previous, and after a judgment the
next candidate (auto-advance), by plain forms and by htmx; nothing of others' judgments shows before one's own, not
even how many (issue 24, "the intent review queue shows a judgment count")."""

import pytest
from django.urls import reverse

from intents.models import IntentJudgment
from tests.conftest import logged_in
from tests.intents.taxonomy_fixtures import judge, make_candidate, rita, rob, ruth  # noqa: F401 (fixtures)
from trajectories.models import Run, Step

pytestmark = pytest.mark.django_db

QUEUE = reverse("intents:taxonomy_queue")
HTMX = {"HX-Request": "true"}


def run_with_steps(number: int, tools: list[str]) -> Run:
    run = Run.objects.create(
        source="t", external_id=str(number), task=f"Reset the password of customer {number}", step_count=len(tools)
    )
    for ordinal, tool in enumerate(tools):
        Step.objects.create(
            run=run, ordinal=ordinal, tool=tool, action_family="act", ok=tool != "fail", observation=f"did {tool}"
        )
    return run


def candidate_on(run: Run, label: str, start: int, end: int):
    record = make_candidate(label, [run])
    record.evidence = [{"run_id": run.pk, "trajectory_id": f"t:{run.external_id}", "start": start, "end": end}]
    record.save(update_fields=["evidence"])
    return record


@pytest.fixture
def three(db):
    tools = ["greet", "lookup", "verify", "reset", "notify", "close", "survey", "bye"]
    runs = [run_with_steps(n, tools) for n in (1, 2, 3)]
    return [candidate_on(run, f"Reset password {n}", 3, 4) for n, run in enumerate(runs, start=1)]


def post(client, url, data, **extra):
    client.get(QUEUE)
    return client.post(url, {**data, "csrfmiddlewaretoken": client.cookies["csrftoken"].value}, **extra)


def test_the_queue_shows_the_first_candidate_inline_with_its_task_and_evidence_steps(three, rita):
    html = logged_in(rita).get(QUEUE).content.decode()
    assert f'data-intent-focus="{three[0].pk}"' in html
    assert "Reset the password of customer 1" in html  # the run's task, on the page
    focus = html.split('id="intent-focus"')[1].split("</section>")[0]
    highlighted = [
        part.split('data-step="')[1].split('"')[0] for part in focus.split("<li")[1:] if "data-evidence-step" in part
    ]
    assert highlighted == ["3", "4"]  # the evidence span, marked
    assert 'data-step="1"' in focus and 'data-step="6"' in focus  # two steps of context each side
    assert 'data-step="0"' not in focus and 'data-step="7"' not in focus
    assert "1 step before" in focus and "1 more step" in focus
    assert f'?candidate={three[1].pk}" hx-get' in focus and "data-skip" in focus  # next / skip
    assert f'?candidate={three[2].pk}" hx-get' in focus and "data-previous" in focus  # previous wraps round


def test_no_count_of_others_judgments_shows_before_ones_own(three, rita, rob, ruth):
    judge(three[0], "valid", rob, ruth)
    html = logged_in(rita).get(QUEUE).content.decode()
    assert ">Judgments<" not in html and "rob" not in html and "ruth" not in html
    page = logged_in(rita).get(f"{QUEUE}?candidate={three[0].pk}", headers=HTMX).content.decode()
    assert "rob" not in page and "judgment_count" not in page


def test_a_judgment_by_plain_form_goes_on_to_the_next_candidate(three, rita):
    client = logged_in(rita)
    url = reverse("intents:taxonomy_judge", args=[three[0].pk])
    response = post(client, url, {"verdict": "valid", "next": three[1].pk, "comment": "clear from step 3"})
    assert response.status_code == 302 and response["Location"] == f"{QUEUE}?candidate={three[1].pk}"
    assert IntentJudgment.objects.get().comment == "clear from step 3"
    page = client.get(response["Location"]).content.decode()
    assert f'data-intent-focus="{three[1].pk}"' in page and "Reset password 1”: valid" in page


def test_a_judgment_over_htmx_answers_the_next_candidate_in_place(three, rita, django_assert_max_num_queries):
    client = logged_in(rita)
    url = reverse("intents:taxonomy_judge", args=[three[1].pk])
    client.get(QUEUE)
    with django_assert_max_num_queries(16):
        response = client.post(
            url,
            {"verdict": "invalid", "next": three[2].pk, "csrfmiddlewaretoken": client.cookies["csrftoken"].value},
            headers=HTMX,
        )
    html = response.content.decode()
    assert response.status_code == 200 and not html.lstrip().startswith("<!doctype")  # the review part only
    assert f'data-intent-focus="{three[2].pk}"' in html and "data-judged" in html
    assert response["HX-Push-Url"] == f"{QUEUE}?candidate={three[2].pk}"
    assert f"intent-candidate-{three[1].pk}" not in html  # judged: off the list
    assert "Your recent judgments" in html


def test_skipping_moves_on_without_judging(three, rita):
    html = logged_in(rita).get(f"{QUEUE}?candidate={three[1].pk}", headers=HTMX).content.decode()
    assert f'data-intent-focus="{three[1].pk}"' in html
    assert not IntentJudgment.objects.exists()


def test_a_refused_judgment_over_htmx_keeps_the_candidate_with_the_message(three, rita):
    response = post(
        logged_in(rita),
        reverse("intents:taxonomy_judge", args=[three[0].pk]),
        {"verdict": "merge", "next": three[1].pk, "comment": "kept"},
        headers=HTMX,
    )
    html = response.content.decode()
    assert response.status_code == 422 and "choose the intent to merge into" in html
    assert f'data-intent-focus="{three[0].pk}"' in html and 'value="kept"' in html


def test_the_last_judgment_empties_the_queue(three, rita):
    client = logged_in(rita)
    for record in three:
        post(client, reverse("intents:taxonomy_judge", args=[record.pk]), {"verdict": "valid"})
    assert "data-queue-empty" in client.get(QUEUE).content.decode()


@pytest.mark.parametrize("size", [2, 12])
def test_the_inline_queue_runs_a_bounded_number_of_queries(rita, rob, size, django_assert_max_num_queries):
    tools = ["a", "b", "c", "d"]
    for n in range(size):
        judge(candidate_on(run_with_steps(n, tools), f"Intent {n}", 1, 2), "valid", rob)
    client = logged_in(rita)
    with django_assert_max_num_queries(8):
        response = client.get(QUEUE)
    assert response.content.count(b"data-intent-row") == size
    with django_assert_max_num_queries(8):
        assert client.get(QUEUE, headers=HTMX).status_code == 200
