from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from llm.core import Usage
from llm.models import ModelCall
from llm.selectors import PAGE_SIZE
from llm.services import model_call_totals_roll
from tests.conftest import logged_in

from .factories import recorded_call

pytestmark = pytest.mark.django_db
URL = reverse("llm:calls")


def make_calls(count: int) -> None:
    now = timezone.now()
    outcomes = ["succeeded", "failed", "running"]
    for i in range(count):
        recorded_call(
            role=["refiner", "guidance", "intents"][i % 3],
            model_id=["claude-sonnet-4-6", "scripted-demo", "mystery-model"][i % 3],
            provider=["anthropic", "scripted", "anthropic"][i % 3],
            outcome=outcomes[(i // 3) % 3],
            usage=Usage(100, 10, 5),
            started_at=now - timedelta(minutes=i),
        )


class TestAccess:
    def test_an_anonymous_visitor_is_sent_to_log_in(self, client):
        response = client.get(URL)
        assert response.status_code == 302
        assert reverse("accounts:login") in response["Location"]

    def test_an_inactive_account_is_sent_to_log_in(self, outsider):
        response = logged_in(outsider).get(URL)
        assert response.status_code == 302

    @pytest.mark.parametrize("actor", ["operator", "viewer", "admin_user"])
    def test_every_logged_in_user_may_read_the_ledger(self, actor, request):
        recorded_call(role="refiner")
        response = logged_in(request.getfixturevalue(actor)).get(URL)
        assert response.status_code == 200
        assert b"refiner" in response.content

    def test_the_page_does_not_accept_posts(self, viewer):
        client = logged_in(viewer)
        client.get(URL)
        response = client.post(URL, {"csrfmiddlewaretoken": client.cookies["csrftoken"].value})
        assert response.status_code == 405


def test_it_lists_calls_newest_first_with_their_details(viewer):
    now = timezone.now()
    recorded_call(role="older-role", started_at=now - timedelta(hours=2))
    recorded_call(role="newer-role", model_id="claude-haiku-4-5", usage=Usage(2000, 300, 50), started_at=now)
    html = logged_in(viewer).get(URL).content.decode()
    assert html.index("newer-role") < html.index("older-role")
    assert "claude-haiku-4-5" in html
    assert "2,000 / 50 / 300" in html
    assert "1,234 ms" in html
    assert 'class="badge badge-succeeded"' in html
    assert "{&quot;add_nodes&quot;: []}" in html


def test_a_long_reply_shows_only_its_head(viewer):
    call = recorded_call()
    ModelCall.objects.filter(pk=call.pk).update(response_text="y" * 500 + "TAIL")  # test set-up: a long reply
    html = logged_in(viewer).get(URL).content.decode()
    assert "y" * 299 + "…" in html
    assert "TAIL" not in html


def test_it_says_when_the_scripted_model_answers(viewer, settings):
    settings.ANTHROPIC_API_KEY = ""
    assert b"scripted demo model answers" in logged_in(viewer).get(URL).content
    settings.ANTHROPIC_API_KEY = "sk-test"
    assert b"scripted demo model answers" not in logged_in(viewer).get(URL).content


def test_totals_cover_the_filtered_calls_and_count_unpriced_ones(viewer):
    recorded_call(model_id="claude-sonnet-4-6", usage=Usage(1_000_000, 0, 0))  # $3
    recorded_call(model_id="claude-sonnet-4-6", usage=Usage(0, 100_000, 0))  # $1.50
    recorded_call(model_id="mystery-model", usage=Usage(7, 7, 0))
    recorded_call(role="guidance", model_id="claude-sonnet-4-6", usage=Usage(1_000_000, 0, 0))
    response = logged_in(viewer).get(URL, {"role": "refiner"})
    totals = response.context["page"].totals
    assert (totals.calls, totals.tokens, str(totals.cost), totals.unpriced) == (3, 1_100_014, "4.500000", 1)
    html = response.content.decode()
    assert "$4.5000" in html
    assert "plus 1 call of a model without a known price" in html


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"role": "guidance"}, 3),
        ({"model": "scripted-demo"}, 3),
        ({"status": "failed"}, 3),
        ({"role": "refiner", "status": "succeeded"}, 1),
        ({"role": "nobody"}, 0),
        ({"status": "not-a-status"}, 9),  # an unknown status is ignored, never an error
    ],
)
def test_filters_narrow_the_list(viewer, query, expected):
    make_calls(9)
    response = logged_in(viewer).get(URL, query)
    assert response.status_code == 200
    assert response.context["page"].totals.calls == expected
    assert len(response.context["page"].calls) == expected


def test_an_empty_filter_result_says_so(viewer):
    make_calls(3)
    assert b"No model calls match these filters." in logged_in(viewer).get(URL, {"role": "nobody"}).content


def test_an_empty_ledger_says_so(viewer):
    assert b"No model calls yet." in logged_in(viewer).get(URL).content


def test_pages_hold_fifty_calls_and_keep_the_filters(viewer):
    make_calls(PAGE_SIZE + 5)
    client = logged_in(viewer)
    first = client.get(URL)
    assert len(first.context["page"].calls) == PAGE_SIZE
    assert (first.context["page"].number, first.context["page"].pages) == (1, 2)
    assert b"Older" in first.content
    second = client.get(URL, {"page": "2"})
    assert len(second.context["page"].calls) == 5
    assert {c.pk for c in second.context["page"].calls}.isdisjoint({c.pk for c in first.context["page"].calls})
    filtered = client.get(URL, {"model": "claude-sonnet-4-6", "page": "1"})
    assert filtered.context["page"].pages == 1
    assert b"page=2" not in filtered.content


def test_the_next_page_link_keeps_the_filters(viewer):
    for _ in range(PAGE_SIZE + 1):
        recorded_call(role="guidance")
    recorded_call(role="refiner")
    html = logged_in(viewer).get(URL, {"role": "guidance"}).content.decode()
    assert 'href="?role=guidance&amp;page=2"' in html


@pytest.mark.parametrize("number", ["0", "-3", "99", "abc", ""])
def test_an_out_of_range_page_falls_back_to_a_real_page(viewer, number):
    make_calls(3)
    response = logged_in(viewer).get(URL, {"page": number})
    assert response.status_code == 200
    assert len(response.context["page"].calls) == 3


def test_an_htmx_request_gets_only_the_results(viewer):
    make_calls(3)
    response = logged_in(viewer).get(URL, {"role": "refiner"}, headers={"HX-Request": "true"})
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="results"')
    assert "<html" not in html
    assert "refiner" in html


@pytest.mark.parametrize(("rows", "rolled_up"), [(3, False), (30, False), (30, True)])
def test_the_page_keeps_a_fixed_query_count(viewer, rows, rolled_up, django_assert_num_queries):
    make_calls(rows)
    if rolled_up:
        model_call_totals_roll(now=timezone.now() + timedelta(days=2))
    client = logged_in(viewer)
    client.get(URL)  # the session's first request
    # The totals, the menus and the page's rows, one query each (the session and its user come from the cache).
    with django_assert_num_queries(3):
        response = client.get(URL, {"status": "succeeded"})
    assert response.status_code == 200
    with django_assert_num_queries(3):
        assert client.get(URL).status_code == 200


def test_the_admin_shows_the_ledger_read_only(admin_user):
    admin_user.is_staff = admin_user.is_superuser = True
    admin_user.save()
    call = recorded_call()
    client = logged_in(admin_user)
    assert client.get(reverse("admin:llm_modelcall_changelist")).status_code == 200
    assert client.get(reverse("admin:llm_modelcall_change", args=[call.pk])).status_code == 200
    assert client.get(reverse("admin:llm_modelcall_add")).status_code == 403


def test_every_value_a_call_carries_is_escaped_in_its_row(viewer):
    evil = '<script>alert("x")</script>'
    call = recorded_call(role=evil, model_id=evil, subject=("type" + evil, "id" + evil))
    ModelCall.objects.filter(pk=call.pk).update(  # test set-up: hostile text in every text column
        response_text=evil,
        request_preview=evil,
        error=evil,
        stop_reason=evil,
        diagnostics={evil: evil},
    )
    html = logged_in(viewer).get(URL).content.decode()
    assert "<script>alert" not in html
    assert html.count("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;") >= 9
