"""Procedure pages in Debian's Chromium: an operator mines from the list and proposes the version for activation,
pages fit a phone."""

import re

import pytest
from playwright.sync_api import expect

from procedures.models import Procedure, ProcedureVersion
from procedures.replay.services import offline as offline_replay_services
from reviews.models import PromotionRequest
from tests.e2e.conftest import browser_type_launch_args, page_as  # noqa: F401  (shared browser fixtures)
from tests.promote import promote_procedure_version
from tests.trajectories.factories import ingest

from .factories import REFUND, queued_replay, refund_run, refund_runs, stored_version

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning")]


def test_an_operator_mines_and_proposes_the_version_for_activation_in_the_browser(page_as, operator):  # noqa: F811
    refund_runs()
    page = page_as(operator, "/procedures/")
    page.get_by_label("Intent").fill(REFUND)
    page.get_by_role("button", name="Mine").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("version 1")
    expect(page.get_by_text("Mined version 1")).to_be_visible()
    expect(page.get_by_text("gate passed").first).to_be_visible()
    version = ProcedureVersion.objects.get()

    page.get_by_text("Propose for activation").click()
    page.get_by_label("Rationale").fill("mined from ten successful refunds; the replay gate passed")
    page.get_by_role("button", name="Propose version 1 for activation").click()

    expect(page).to_have_url(re.compile(r"/reviews/\d+/$"))
    request = PromotionRequest.objects.get()
    assert page.url.endswith(f"/reviews/{request.pk}/")
    assert (request.kind, request.candidate_id, request.proposer_id) == (
        "procedure_version",
        str(version.pk),
        operator.pk,
    )
    assert Procedure.objects.get().active_version_id is None  # it waits for two reviewers


def test_procedure_pages_fit_a_narrow_screen(page_as, admin_user):  # noqa: F811
    held_out = ingest(*[refund_run() for _ in range(3)], refund_run("lookup_policy", "check", "issue_refund"))
    procedure = Procedure.objects.create(intent="refund request", title=REFUND)
    active = stored_version(procedure, "lookup_policy", "issue_refund", number=1)
    promote_procedure_version(active)
    candidate = stored_version(procedure, "lookup_policy", "check", "issue_refund", number=2, status="candidate")
    offline_replay_services.replay_offline_run(
        replay=queued_replay(candidate, compared_with=active, held_out=held_out.created_ids)
    )
    page = page_as(admin_user)
    page.set_viewport_size({"width": 380, "height": 800})
    too_wide = {}
    for path in ("/procedures/", f"/procedures/versions/{candidate.pk}/", f"/procedures/versions/{active.pk}/"):
        page.goto(path)
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        if overflow > 0:
            too_wide[path] = overflow
    assert not too_wide, f"pages wider than a 380px screen (px too wide): {too_wide}"
