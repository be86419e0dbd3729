"""`manage.py seed_demo`: demo users for each role, an agent token shown once, demo runs; idempotent."""

import io
import stat

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from accounts.demo import DEMO_PASSWORD, DEMO_TOKEN_FILENAME, DEMO_TOKEN_SCOPES
from accounts.models import ApiToken, AuditEvent, User
from accounts.services import api_token_authenticate
from tests.demo_data import assert_the_users_runs_were_left_alone, demo_run_count, push_user_runs
from trajectories.models import Run, Step

DEMO_RUNS = demo_run_count()


@pytest.fixture
def var_dir(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    return tmp_path


def seed() -> str:
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    return out.getvalue()


def _totals() -> dict[str, int]:
    return {
        "users": User.objects.count(),
        "groups": Group.objects.count(),
        "tokens": ApiToken.objects.count(),
        "events": AuditEvent.objects.count(),
        "runs": Run.objects.count(),
        "steps": Step.objects.count(),
    }


def test_it_creates_a_user_for_each_role(db, var_dir):
    seed()
    users = {u.username: u for u in User.objects.all()}
    assert set(users) == {"admin", "rita", "rob", "otto", "vera", "demo-agent", "waymark-watch"}
    assert sorted(u.username for u in users.values() if u.is_agent) == ["demo-agent", "waymark-watch"]
    assert users["admin"].is_superuser and users["admin"].is_admin
    assert users["rita"].is_reviewer and users["rob"].is_reviewer and not users["rita"].is_operator
    assert users["otto"].is_operator and not users["otto"].is_admin
    vera = users["vera"]
    assert not (vera.is_reviewer or vera.is_operator or vera.is_admin)
    assert set(Group.objects.values_list("name", flat=True)) == {"reviewer", "operator", "admin"}


def test_it_creates_demo_runs_with_steps_and_outcomes(db, var_dir):
    seed()
    assert Run.objects.count() >= 20
    assert Step.objects.count() > Run.objects.count()
    assert set(Run.objects.values_list("outcome", flat=True)) >= {"success", "failure"}


@pytest.mark.parametrize("username", ["admin", "rita", "rob", "otto", "vera"])
def test_the_demo_users_can_log_in_with_the_demo_password(db, var_dir, username):
    seed()
    client = Client()
    assert client.login(username=username, password=DEMO_PASSWORD)
    assert client.get("/").status_code == 200


def test_it_saves_the_agent_token_privately_and_prints_only_where(db, var_dir):
    output = seed()
    token_file = var_dir / DEMO_TOKEN_FILENAME
    plaintext = token_file.read_text().strip()
    assert plaintext.startswith("wm_") and plaintext not in output and str(token_file) in output
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600

    token = api_token_authenticate(plaintext)
    assert token is not None and token.name == "demo-agent"
    assert sorted(token.scopes) == sorted(DEMO_TOKEN_SCOPES)
    assert token.user.username == "demo-agent" and token.user.is_agent  # an agent identity, not a person

    again = seed()
    assert plaintext not in again
    assert token_file.read_text().strip() == plaintext


def test_running_it_twice_creates_nothing_new(db, var_dir):
    seed()
    first = _totals()
    output = seed()
    assert _totals() == first
    assert "0 created" in output


def test_it_keeps_an_existing_users_password(db, var_dir):
    User.objects.create_user(username="rita", password="rita-chose-this")
    seed()
    rita = User.objects.get(username="rita")
    assert rita.check_password("rita-chose-this")
    assert not rita.check_password(DEMO_PASSWORD)


def test_it_replaces_a_revoked_agent_token(db, var_dir):
    seed()
    old = ApiToken.objects.get(name="demo-agent")
    ApiToken.objects.filter(pk=old.pk).update(revoked_at=old.created_at)

    output = seed()

    new = ApiToken.objects.get(name="demo-agent", revoked_at__isnull=True)
    assert new.pk != old.pk
    plaintext = (var_dir / DEMO_TOKEN_FILENAME).read_text().strip()
    assert api_token_authenticate(plaintext).pk == new.pk
    assert plaintext not in output and str(var_dir / DEMO_TOKEN_FILENAME) in output


def test_every_user_it_creates_is_audited(db, var_dir):
    seed()
    created = set(AuditEvent.objects.filter(verb="user.create").values_list("target_label", flat=True))
    assert created == {"admin", "rita", "rob", "otto", "vera"}


def test_a_demo_token_of_an_older_seed_owned_by_a_person_is_replaced(db, var_dir):
    from accounts.tokens import new_token

    seed()
    otto = User.objects.get(username="otto")
    ApiToken.objects.filter(user__username="demo-agent").update(revoked_at=timezone.now())
    _, prefix, digest = new_token()
    legacy = ApiToken.objects.create(
        user=otto, name="demo-agent", prefix=prefix, digest=digest, scopes=["evaluations:run"]
    )
    seed()
    legacy.refresh_from_db()
    assert legacy.revoked_at is not None
    token = api_token_authenticate((var_dir / DEMO_TOKEN_FILENAME).read_text().strip())
    assert token.user.username == "demo-agent" and "evaluations:run" in token.scopes


# --- the user's data: seeding touches only the demo's own runs and never fails because of them (issue 24) -----------


def test_it_seeds_the_demo_with_6000_of_the_users_runs_stored(db, var_dir):
    from intents.models import IntentProposalRun
    from reviews.models import PromotionRequest

    push_user_runs(6000)

    output = seed()

    assert "failed" not in output
    assert Run.objects.filter(source="demo-support-agent").count() == DEMO_RUNS
    (proposal,) = IntentProposalRun.objects.all()
    assert proposal.status == IntentProposalRun.Status.SUCCEEDED and proposal.runs_total == DEMO_RUNS
    assert set(PromotionRequest.objects.values_list("kind", flat=True)) >= {
        "procedure_version",
        "graph_revision",
        "rubric_version",
    }
    assert_the_users_runs_were_left_alone()
    client = Client()
    assert client.login(username="rita", password=DEMO_PASSWORD)
    for page in ("/", "/trajectories/", "/intents/", "/reviews/"):
        assert client.get(page).status_code == 200, page


def every_table() -> dict[str, int]:
    """Rows per model of every installed app: what "changes nothing" is measured on."""
    from django.apps import apps

    return {model._meta.label: model._default_manager.count() for model in apps.get_models()}


def seed_with_errors() -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("seed_demo", stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_seeding_again_after_the_user_deleted_the_demo_runs_completes(db, var_dir):
    from intents.windows.models import DriftReport, NoveltyAlert, WindowAnalysis

    seed()
    push_user_runs(300)
    for rows in (DriftReport.objects.all(), NoveltyAlert.objects.all(), WindowAnalysis.objects.all()):
        rows.delete()
    Run.objects.filter(source="demo-support-agent").delete()

    output, errors = seed_with_errors()

    assert "failed" not in output and errors == ""
    assert Run.objects.filter(source="demo-support-agent").count() == DEMO_RUNS
    assert WindowAnalysis.objects.count() == 2 and DriftReport.objects.count() == 1
    assert NoveltyAlert.objects.count() == 1 and "1 novelty alert(s)" in output
    assert_the_users_runs_were_left_alone()
    client = Client()
    assert client.login(username="otto", password=DEMO_PASSWORD)
    for page in ("/", "/trajectories/", "/procedures/", "/intents/", "/reviews/", "/graphs/"):
        assert client.get(page).status_code == 200, page


def demo_rows() -> dict[str, int]:
    """every_table() less what each seeding adds however it went (its audit events and model calls) and sessions."""
    left_out = ("accounts.AuditEvent", "llm.ModelCall", "sessions.Session")
    return {label: rows for label, rows in every_table().items() if label not in left_out}


def test_seeding_again_after_the_user_deleted_the_demos_alert_drift_report_and_users_recreates_them(db, var_dir):
    from intents.demo import NOVEL_LABEL
    from intents.windows.models import DriftReport, NoveltyAlert

    seed()
    push_user_runs(300)
    seeded = demo_rows()
    (alert,) = NoveltyAlert.objects.all()
    NoveltyAlert.objects.all().delete()
    DriftReport.objects.all().delete()
    User.objects.filter(username__in=["vera"]).delete()  # the demo user nothing refers to (admin overrode a gate)

    output, errors = seed_with_errors()

    assert "failed" not in output and errors == ""
    assert "1 novelty alert(s)" in output and "drift report" in output and "users: 1 created (vera)" in output
    assert demo_rows() == seeded  # the demo whole again, nothing more
    (again,) = NoveltyAlert.objects.all()
    assert (again.candidate_id, again.label, again.analysis_id, again.status) == (
        alert.candidate_id,
        NOVEL_LABEL,
        alert.analysis_id,
        "open",
    )
    assert AuditEvent.objects.filter(verb="intent_window.alerts_restore").count() == 1
    assert User.objects.get(username="vera").check_password(DEMO_PASSWORD)
    client = Client()
    assert client.login(username="otto", password=DEMO_PASSWORD)
    assert NOVEL_LABEL in client.get("/intents/windows/alerts/").content.decode()
    assert_the_users_runs_were_left_alone()

    seed()
    assert demo_rows() == seeded  # and a next seeding writes nothing


def test_seeding_twice_with_the_users_runs_stored_changes_nothing_the_second_time(db, var_dir):
    seed()
    push_user_runs(300)
    seed()
    first = every_table()

    output = seed()

    assert every_table() == first
    assert "failed" not in output
    assert_the_users_runs_were_left_alone()


@pytest.fixture
def failing_seeder(monkeypatch):
    """Replace one registered seeder's step by one that raises."""
    from dataclasses import replace

    from common import demo_seeding

    demo_seeding.demo_seeders()  # every app's demo module imported: the registry is complete

    def fail(name: str) -> None:
        def boom(ctx):
            raise RuntimeError(f"the {name} seeder broke")

        monkeypatch.setitem(demo_seeding._registry, name, replace(demo_seeding._registry[name], step=boom))

    return fail


def test_a_seeder_that_raises_does_not_stop_the_others(db, var_dir, failing_seeder):
    from procedures.models import ProcedureVersion
    from reviews.models import PromotionRequest

    failing_seeder("graphs")

    output, errors = seed_with_errors()  # no exception: the command exits 0

    assert "graphs: failed (RuntimeError: the graphs seeder broke)" in output
    assert "Traceback" in errors and "demo seeder 'graphs' failed" in errors and "the graphs seeder broke" in errors
    assert "Demo seeders that failed: graphs" in output
    assert Run.objects.filter(source="demo-support-agent").count() == DEMO_RUNS  # the seeders before it ran
    assert ProcedureVersion.objects.exists()  # and those after it
    assert PromotionRequest.objects.filter(kind="procedure_version").exists()
    assert "intents: proposal run" in output and "rubrics: refund request" in output
    assert "Demo logins" in output


def test_a_seeder_whose_input_failed_skips_with_a_message(db, var_dir, failing_seeder):
    from graphs.models import Workspace

    failing_seeder("runs")

    output, errors = seed_with_errors()

    assert "runs: failed (RuntimeError: the runs seeder broke)" in output
    for dependent in ("procedures", "intents", "rubrics"):
        assert f"{dependent}: skipped (needs runs, which did not finish)" in output
    assert "Demo seeders that failed: runs (skipped: procedures, certification, watches, intents, rubrics)" in output
    assert Workspace.objects.filter(slug="two-hop-qa").exists()  # graphs needs no runs
    assert errors.count("Traceback") == 1


def test_with_a_model_key_set_seeding_still_calls_no_provider(db, var_dir, settings, monkeypatch):
    """The demo is the scripted one, key or not: seeding never bills a provider (issue 25, item 5)."""
    from llm.adapters import anthropic as adapter
    from llm.models import ModelCall

    settings.ANTHROPIC_API_KEY = "sk-test-not-used"

    def no_provider(*args, **kwargs):
        raise AssertionError("seed_demo called the provider")

    monkeypatch.setattr(adapter.AnthropicChatModel, "complete", no_provider)
    out = io.StringIO()
    call_command("seed_demo", stdout=out, stderr=io.StringIO())
    assert "failed" not in out.getvalue(), out.getvalue()
    assert ModelCall.objects.exists() and not ModelCall.objects.exclude(model_id__startswith="scripted").exists()
