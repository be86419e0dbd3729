"""Live state of the procedure pages (issue 11): the version page's polled fragment carries the status and the
buttons, statuses say what review decided, mining again honours "Also replay live", and a replay is re-run with
another seed or held-out share."""

import re

import pytest
from django.urls import reverse

from accounts.models import AuditEvent
from accounts.roles import Role
from accounts.services import Actor
from procedures import errors
from procedures.mining import services as mining_services
from procedures.mining import split_ids
from procedures.models import ProcedureVersion, ReplayMode, ReplayRun, ReplayStatus, VersionStatus
from procedures.replay.services import offline as offline_replay_services
from procedures.versions import services as version_services
from reviews import services as review_services
from tests.conftest import logged_in
from tests.factories import user_with
from tests.promote import promote_procedure_version

from .factories import REFUND, queued_replay, refund_runs, stored_version

pytestmark = pytest.mark.django_db
LIST = reverse("procedures:list")


def version_url(version):
    return reverse("procedures:version", args=[version.pk])


def post(client, url, data):
    client.get(LIST)
    return client.post(url, {**data, "csrfmiddlewaretoken": client.cookies["csrftoken"].value})


def htmx(client, url):
    return client.get(url, headers={"HX-Request": "true"}).content.decode()


@pytest.fixture
def mined(operator, django_capture_on_commit_callbacks):
    refund_runs()
    with django_capture_on_commit_callbacks(execute=True):
        return mining_services.procedure_mine(actor=Actor(user=operator), intent=REFUND).version


def status_badge(page):
    return re.search(r'data-version-status="([^"]+)"', page).group(1)


# --- the polled fragment ----------------------------------------------------------------------------------------------
def test_after_the_replay_finishes_the_polled_fragment_brings_the_status_and_the_propose_button(reviewer, mined):
    candidate = stored_version(mined.procedure, "lookup_policy", number=2, status="candidate")
    replay = queued_replay(candidate, compared_with=None, held_out=mined.held_out_run_ids)
    client = logged_in(reviewer)
    page = client.get(version_url(candidate)).content.decode()
    assert 'hx-trigger="every 3s"' in page and status_badge(page) == "candidate"
    assert "Propose version 2 for activation" not in page

    offline_replay_services.replay_offline_run(replay=replay)
    assert ProcedureVersion.objects.get(pk=candidate.pk).status == VersionStatus.READY
    fragment = htmx(client, version_url(candidate))
    assert fragment.lstrip().startswith('<div id="replays"') and "<html" not in fragment
    assert 'hx-trigger="every 3s"' not in fragment  # nothing runs any more: the polling stops
    assert 'id="version-head" hx-swap-oob="true"' in fragment and status_badge(fragment) == "ready"
    assert 'id="version-promotion" hx-swap-oob="true"' in fragment
    assert "Propose version 2 for activation" in fragment
    assert "gate passed" in fragment


def test_while_a_replay_runs_the_fragment_keeps_polling_and_shows_replaying(viewer, mined):
    candidate = stored_version(mined.procedure, "lookup_policy", "x", number=2, status="replaying")
    queued_replay(candidate, compared_with=None, held_out=mined.held_out_run_ids)
    fragment = htmx(logged_in(viewer), version_url(candidate))
    assert 'hx-trigger="every 3s"' in fragment and status_badge(fragment) == "replaying"


# --- statuses that say what review decided ----------------------------------------------------------------------------
def reject(version):
    request = review_services.promotion_propose(
        actor=Actor(user=user_with(Role.OPERATOR)),
        kind="procedure_version",
        candidate_id=str(version.pk),
        rationale="r",
    )
    return review_services.judgment_submit(
        actor=Actor(user=user_with(Role.REVIEWER)), request=request, verdict="reject", comment="not convincing"
    )


def test_a_rejected_version_reads_rejected_on_its_page_and_in_the_list(viewer, mined):
    mined.refresh_from_db()
    assert mined.status == VersionStatus.READY
    request = reject(mined)
    assert request.status == "rejected"
    client = logged_in(viewer)
    page = client.get(version_url(mined)).content.decode()
    assert status_badge(page) == "rejected"
    assert reverse("reviews:item", args=[request.pk]) in page
    listing = client.get(LIST).content.decode()
    assert 'data-candidate-status="rejected"' in listing and 'data-candidate-status="ready"' not in listing


def test_the_list_shows_no_older_candidate_once_a_newer_version_is_active(viewer, mined):
    newer = stored_version(mined.procedure, "lookup_policy", "issue_refund", "notify", number=2, status="ready")
    listing = logged_in(viewer).get(LIST).content.decode()
    assert 'data-candidate-status="ready"' in listing and ">v2</a>" in listing

    promote_procedure_version(newer)
    listing = logged_in(viewer).get(LIST).content.decode()
    assert 'data-candidate-status="ready"' not in listing  # v1 is older than the active v2: not "newest candidate"
    assert "none newer than the active version" in listing
    assert re.search(r">v2</a> <span class=\"badge badge-active\">active", listing)

    newest = stored_version(mined.procedure, "lookup_policy", "notify", number=3, status="candidate")
    listing = logged_in(viewer).get(LIST).content.decode()
    assert 'data-candidate-status="candidate"' in listing and f'href="{version_url(newest)}"' in listing


# --- mining again with "Also replay live" -----------------------------------------------------------------------------
def test_mining_again_with_live_queues_a_live_replay_of_the_same_version(operator, mined, settings):
    settings.WAYMARK_LIVE_REPLAY = False
    assert [r.mode for r in mined.replays.all()] == ["offline"]
    client = logged_in(operator)
    response = post(client, reverse("procedures:mine"), {"intent": REFUND, "held_out_share": 0.3, "seed": 17})
    assert response.status_code == 302
    assert not mined.replays.filter(mode=ReplayMode.LIVE).exists()  # not asked: nothing queued

    response = post(
        client, reverse("procedures:mine"), {"intent": REFUND, "held_out_share": 0.3, "seed": 17, "live": "on"}
    )
    assert response.status_code == 302 and response["Location"] == version_url(mined)
    live = mined.replays.get(mode=ReplayMode.LIVE)
    assert live.status in (ReplayStatus.QUEUED, ReplayStatus.RUNNING)
    assert ProcedureVersion.objects.get(pk=mined.pk).status == VersionStatus.REPLAYING
    page = client.get(response["Location"]).content.decode()
    assert "live replay is queued" in page and "Nothing new" not in page

    again = mining_services.procedure_mine(actor=Actor(user=operator), intent=REFUND, live=True)
    assert again.replays == ()  # one is running: not a second one
    assert mined.replays.filter(mode=ReplayMode.LIVE).count() == 1


# --- re-running with another seed or held-out share -------------------------------------------------------------------
def rerun(client, version, **data):
    return post(client, reverse("procedures:rerun", args=[version.pk]), data)


def test_the_version_page_offers_a_rerun_with_another_split_to_operators_only(operator, viewer, mined):
    page = logged_in(operator).get(version_url(mined)).content.decode()
    assert 'name="seed"' in page and 'name="held_out_share"' in page and "Re-run with another split" in page
    assert "Re-run with another split" not in logged_in(viewer).get(version_url(mined)).content.decode()
    assert rerun(logged_in(viewer), mined, seed=3, held_out_share=0.5).status_code == 403


def test_another_split_that_learns_the_same_steps_replays_this_version_on_the_new_held_out_runs(
    operator, mined, django_capture_on_commit_callbacks
):
    client = logged_in(operator)
    with django_capture_on_commit_callbacks(execute=True):
        response = rerun(client, mined, seed=3, held_out_share=0.5)
    assert response.status_code == 302 and response["Location"] == version_url(mined)
    assert ProcedureVersion.objects.filter(procedure=mined.procedure).count() == 1
    newest = mined.replays.order_by("-id").first()
    original = ReplayRun.objects.filter(version=mined).order_by("id").first()
    assert newest.pk != original.pk and newest.status == ReplayStatus.DONE
    assert sorted(newest.held_out_run_ids) != sorted(mined.held_out_run_ids)
    assert len(newest.held_out_run_ids) == 7  # half of 10 successes and 4 failures
    event = AuditEvent.objects.get(verb="replay.resplit", target_id=str(mined.pk))
    assert event.after["split"] == {"seed": 3, "held_out_share": 0.5}
    page = client.get(version_url(mined)).content.decode()
    assert "seed 3, held-out share 0.5" in page and "another split than the version" in page


def test_another_split_that_learns_other_steps_makes_a_new_version(operator, django_capture_on_commit_callbacks):
    # Two shapes of successful runs: which shape the training side holds decides the steps learnt.
    from tests.trajectories.factories import ingest

    from .factories import refund_run

    short = ingest(*[refund_run("lookup_policy", "issue_refund") for _ in range(3)]).created_ids
    longer = ingest(*[refund_run("lookup_policy", "check_account", "issue_refund") for _ in range(3)]).created_ids
    runs = short + longer

    def trains_on(ids, seed):
        return set(split_ids(runs, held_out_share=0.5, seed=seed, at_least_one=True).training) == set(ids)

    first_seed = next(seed for seed in range(1000) if not trains_on(longer, seed))  # learns the short shape
    other_seed = next(seed for seed in range(1000) if trains_on(longer, seed))  # learns the longer one
    with django_capture_on_commit_callbacks(execute=True):
        first = mining_services.procedure_mine(
            actor=Actor(user=operator), intent=REFUND, seed=first_seed, held_out_share=0.5
        ).version
    assert first.tools == ["lookup_policy", "issue_refund"]
    with django_capture_on_commit_callbacks(execute=True):
        result = version_services.procedure_version_resplit(
            actor=Actor(user=operator), version=first, seed=other_seed, held_out_share=0.5
        )
    new = result.version
    assert result.created and new.tools == ["lookup_policy", "check_account", "issue_refund"]
    assert new.parent_id == first.pk and new.number > first.number
    assert sorted(new.training_run_ids) == sorted(longer) and sorted(new.held_out_run_ids) == sorted(short)
    assert AuditEvent.objects.filter(verb="procedure_version.resplit", target_id=str(new.pk)).exists()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"seed": -1, "held_out_share": 0.5}, "seed"),
        ({"seed": 3, "held_out_share": 1.5}, "held-out share"),
        ({"seed": "x", "held_out_share": 0.5}, "seed"),
    ],
)
def test_a_bad_split_is_refused_with_the_reason_and_nothing_queued(operator, mined, data, message):
    before = ReplayRun.objects.count()
    client = logged_in(operator)
    response = rerun(client, mined, **data)
    assert response.status_code == 302
    page = client.get(version_url(mined)).content.decode()
    assert "nothing was queued" in page.lower() and message in page.lower()
    assert ReplayRun.objects.count() == before


def test_a_split_rerun_waits_for_an_open_replay(operator, mined):
    queued_replay(mined, compared_with=None, held_out=mined.held_out_run_ids)
    with pytest.raises(errors.ReplayRefused, match="queued or running"):
        version_services.procedure_version_resplit(
            actor=Actor(user=operator), version=mined, seed=3, held_out_share=0.5
        )
