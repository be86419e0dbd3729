"""Who may act has one home (issue 28, item 5): every public service that writes on someone's behalf asks
accounts.roles.require_role first, and refuses a person without the role — "vera", read-only — with RoleRequired
(Django's PermissionDenied: 403 in the API and on the pages) before it reads or writes anything.

The services are found, not listed: every public function with a keyword-only `actor` of every services module
(`services.py`, a module of a `services/` package, `*_services.py`) of the project's apps. Each one found is in
exactly one of two tables, so a new service fails `test_every_service_with_an_actor_is_accounted_for` until it
is placed, and coverage cannot shrink without an edit here:

- REFUSES: called with vera and stand-in arguments (which fail the test if the service reads them before its check);
  it must refuse with the error named (RoleRequired, or the service's own rule where the rule is not a role) and
  write nothing: no statement that writes, no audit event.
- EXEMPT: whose actor is, by design, not a person asking for a role: agents (their scopes are agent-only and checked
  at every call), the system's workers, a person's own account, and steps that run inside a service that checked.

A service whose rule allows the system (commands, tasks, seed_demo) says so with require_role(..., system=True).
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from django.apps import apps
from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import connection

from accounts.models import AuditEvent
from accounts.roles import Role, RoleRequired, require_role
from accounts.services import Actor
from reviews.errors import NotAllowed

pytestmark = pytest.mark.django_db


class StandIn:
    """An argument the service must not look at before its role check: any use fails the test, naming it."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        raise AssertionError(f"the service read `{self._name}.{attribute}` before checking who acts")

    def __iter__(self):
        raise AssertionError(f"the service read `{self._name}` before checking who acts")

    def __bool__(self) -> bool:
        raise AssertionError(f"the service read `{self._name}` before checking who acts")


@dataclass(frozen=True)
class Refuses:
    """How a service refuses vera: the error, and arguments the check itself reads (others are stand-ins)."""

    error: type[Exception] = RoleRequired
    arguments: Callable[[], dict[str, Any]] = field(default=dict)


OPERATOR = Refuses()
REVIEWER = Refuses()

REFUSES: dict[str, Refuses] = {
    "accounts.services.agent_create": OPERATOR,
    "accounts.services.user_create": Refuses(),  # admins (and the system: seed_demo, set_roles)
    "accounts.services.user_roles_set": Refuses(),  # admins (and the system)
    "graphs.certification_services.graph_certify": OPERATOR,
    "graphs.evolution.services.evolution_cancel": OPERATOR,
    "graphs.evolution.services.evolution_start": OPERATOR,
    "graphs.services.graph_append_accepted": OPERATOR,
    "graphs.services.graph_seed": OPERATOR,
    "graphs.services.graph_transfer": OPERATOR,
    "graphs.services.workspace_create": OPERATOR,
    # Its own rule, not a role: only the seeding commands (the system) set a first active revision.
    "graphs.services.workspace_seed_active_revision": Refuses(error=PermissionDenied),
    "intents.taxonomy.services.intent_judgment_submit": REVIEWER,
    "intents.taxonomy.services.taxonomy_draft": REVIEWER,
    # Through reviews' promotion_propose, which is asked for the version's id.
    "intents.taxonomy.services.taxonomy_propose": Refuses(arguments=lambda: {"version": SimpleNamespace(pk=0)}),
    "intents.windows.services.drift_compare": OPERATOR,
    "intents.windows.services.novelty_alert_decide": REVIEWER,
    "intents.windows.services.novelty_alerts_restore": OPERATOR,
    "intents.windows.services.window_analyze": OPERATOR,
    "procedures.mining.services.procedure_mine": OPERATOR,
    "procedures.versions.services.procedure_version_amend": OPERATOR,
    "procedures.versions.services.procedure_version_recertify": OPERATOR,
    "procedures.versions.services.procedure_version_resplit": OPERATOR,
    "procedures.versions.services.replay_rerun": OPERATOR,
    "procedures.versions.services.rubric_floor_set": OPERATOR,
    "reviews.services.judgment_submit": REVIEWER,
    "reviews.services.promotion_override": Refuses(),  # admins
    "reviews.services.promotion_propose": REVIEWER,
    # Its own rule, not a role: the request's proposer, or an admin.
    "reviews.services.promotion_withdraw": Refuses(
        error=NotAllowed, arguments=lambda: {"request": SimpleNamespace(proposer_id=0)}
    ),
    "reviews.services.queue_next": REVIEWER,
    "reviews.services.rollback_emergency": Refuses(),  # admins
    "intents.services.intent_candidates_submit": REVIEWER,
    "intents.services.intent_vectors_submit": REVIEWER,
    "intents.services.intent_proposal_start": OPERATOR,
    "intents.services.intent_proposal_cancel": OPERATOR,
    "rubrics.services.rubric_assessment_submit": REVIEWER,
    "rubrics.services.rubric_judge_start": REVIEWER,
    "rubrics.services.rubric_propose_start": REVIEWER,
    "uplift.services.critical_task_tag": OPERATOR,
    "uplift.services.critical_task_untag": OPERATOR,
    "uplift.services.policy_set": OPERATOR,
    "uplift.services.recertification_start": OPERATOR,
    "uplift.watch_services.watch_set": OPERATOR,
    "uplift.watch_services.watch_stop": OPERATOR,
}

EXEMPT: dict[str, str] = {
    # Agents: the scopes of these writes are agent-only (accounts.roles.AGENT_SCOPES), checked at every call.
    "trajectories.services.run_ingest_batch": "agents push runs",
    "trajectories.services.run_record_job_answer": "agents answer evaluation jobs",
    "trajectories.job_services.job_claim": "agents claim evaluation jobs",
    "trajectories.job_services.job_complete": "agents complete evaluation jobs",
    "otlp.services.otlp_export": "agents export spans (trajectories:write)",
    # The system's workers: replays run, settle and fail on workers, queued by services that checked.
    "procedures.replay.services.lifecycle.fail_replay": "a replay worker",
    "procedures.replay.services.lifecycle.finish_replay": "a replay worker",
    "procedures.replay.services.lifecycle.requeue_replays": "a step of replay_rerun and mining, which check",
    "procedures.replay.services.live.replay_live_settle": "a replay worker",
    "procedures.replay.services.live.replay_live_start": "a replay worker",
    "procedures.replay.services.offline.replay_offline_run": "a replay worker",
    "procedures.replay.services.offline.replays_to_requeue": "the reaper",
    # Steps inside a change someone was allowed to make: a promotion applied by the review policy, the watch.
    "graphs.services.workspace_start_canary_in_transaction": "a step of applying an approved promotion",
    "graphs.services.workspace_end_canary_in_transaction": "a step of the watch ending a canary",
    "graphs.services.workspace_set_canary_share": "a step of the watch widening a canary",
    "graphs.certification_services.issue_in_transaction": "a step of a certification's worker",
    "reviews.services.promotion_supersede_stale": "housekeeping after an activation",
    "rubrics.services.rubric_ensure": "a step of rubric_propose_start, which checks",
    "rubrics.services.rubric_version_add": "a step of a rubric proposal's worker",
    "uplift.services.certificate_issue": "a step of a certification's worker (graphs, procedures' replays)",
    "uplift.services.split_decision_record": "a step of a certification's worker",
    "uplift.services.coverage_check": "the system's periodic coverage check (uplift.tasks, manage.py recertify)",
    "uplift.watch_services.watch_start": "a step of applying an approved canary promotion (reviews.services)",
    # A person's own account: any active user holds tokens, limited to the scopes they may hold.
    "accounts.services.api_token_create": "her own tokens (accounts.roles.scopes_allowed_for)",
    "accounts.services.api_token_revoke": "her own tokens",
    "accounts.services.audit_record": "records what another service did",
}

SERVICES_MODULE = re.compile(r"(^|/)(services\.py|services/[^/]+\.py|[^/]+_services\.py)$")


def service_modules() -> list[str]:
    """The dotted names of every services module of the project's own apps."""
    root = Path(settings.BASE_DIR)
    names: set[str] = set()
    for config in apps.get_app_configs():
        path = Path(config.path)
        if not path.is_relative_to(root) or ".venv" in path.parts:
            continue
        for file in path.rglob("*.py"):
            relative = file.relative_to(root)
            if "migrations" in relative.parts or "tests" in relative.parts or file.name == "__init__.py":
                continue
            if SERVICES_MODULE.search(relative.as_posix()):
                names.add(".".join(relative.with_suffix("").parts))
    return sorted(names)


def services_with_an_actor() -> dict[str, Callable[..., Any]]:
    """Every public function (defined in its module) of the services modules that takes a keyword-only `actor`."""
    found: dict[str, Callable[..., Any]] = {}
    for name in service_modules():
        module = importlib.import_module(name)
        for attribute, function in inspect.getmembers(module, inspect.isfunction):
            if attribute.startswith("_") or function.__module__ != name:
                continue
            actor = inspect.signature(function).parameters.get("actor")
            if actor is not None and actor.kind is inspect.Parameter.KEYWORD_ONLY:
                found[f"{name}.{attribute}"] = function
    return found


WRITE = re.compile(r"^\s*(INSERT|UPDATE|DELETE)\b", re.IGNORECASE)


@contextmanager
def statements_that_write():
    seen: list[str] = []

    def record(execute, sql, params, many, context):
        if WRITE.match(sql):
            seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        yield seen


def call_as(actor: Actor, path: str, function: Callable[..., Any], given: dict[str, Any]) -> None:
    """Call the service with `actor`, the `given` arguments and a stand-in for every other required one."""
    arguments = dict(given)
    for name, parameter in inspect.signature(function).parameters.items():
        if name == "actor" or name in arguments or parameter.default is not inspect.Parameter.empty:
            continue
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        arguments[name] = StandIn(name)
    function(actor=actor, **arguments)


def test_every_service_with_an_actor_is_accounted_for():
    found = set(services_with_an_actor())
    placed = set(REFUSES) | set(EXEMPT)
    assert found - placed == set(), "new services with an actor: add each to REFUSES (or, with a reason, EXEMPT)"
    assert placed - found == set(), "the tables name services that no longer exist"
    assert set(REFUSES) & set(EXEMPT) == set(), "a service is in both REFUSES and EXEMPT"
    assert len(REFUSES) >= 43  # the sweep below covers at least this many


@pytest.mark.parametrize("path", sorted(REFUSES))
def test_a_person_without_the_role_is_refused_before_anything_is_written(path, viewer):
    refuses = REFUSES[path]
    function = services_with_an_actor()[path]
    events = AuditEvent.objects.count()
    with statements_that_write() as written, pytest.raises(refuses.error):
        call_as(Actor(user=viewer), path, function, refuses.arguments())
    assert written == []
    assert AuditEvent.objects.count() == events


def test_require_role_admits_the_holders_and_refuses_the_rest(operator, reviewer, viewer, outsider, agent):
    assert require_role(Actor(user=operator), Role.OPERATOR, doing="x") == operator
    assert require_role(Actor(user=reviewer), Role.REVIEWER, Role.OPERATOR, doing="x") == reviewer
    assert require_role(Actor.system(), Role.OPERATOR, doing="x", system=True) is None
    assert require_role(Actor(user=agent), Role.REVIEWER, doing="x", agents=True) == agent
    refusals = [
        (Actor(user=viewer), {}),
        (Actor(user=outsider), {}),  # inactive, whatever her groups
        (Actor(user=agent), {}),  # agents hold no role
        (Actor(user=reviewer), {}),
        (Actor.system(), {}),  # the system acts only where the service says so
    ]
    for actor, extra in refusals:
        with pytest.raises(RoleRequired) as refused:
            require_role(actor, Role.OPERATOR, doing="starting an evolution run", **extra)
        assert refused.value.message == "starting an evolution run needs the operator role"
        assert refused.value.code == "forbidden"
    with pytest.raises(RoleRequired) as refused:
        require_role(Actor(user=viewer), Role.REVIEWER, Role.OPERATOR, doing="judging", code="not_a_reviewer")
    assert str(refused.value) == "judging needs the reviewer or operator role"
    assert refused.value.code == "not_a_reviewer"
    assert isinstance(refused.value, PermissionDenied)


def test_the_api_answers_a_refusal_with_its_code(rf):
    from config.api import on_permission_denied

    refusal = RoleRequired("judging needs the reviewer role", code="not_a_reviewer")
    response = on_permission_denied(rf.post("/api/v1/reviews/requests"), refusal)
    assert response.status_code == 403
    assert json.loads(response.content) == {
        "code": "not_a_reviewer",
        "message": "judging needs the reviewer role",
        "details": None,
    }
    plain = on_permission_denied(rf.post("/api/v1/reviews/requests"), PermissionDenied("no"))
    assert json.loads(plain.content)["code"] == "forbidden"
