"""Every write of graphs: workspaces, seeding, accepted revisions, transfer and the seeded active pointer.

Each service is one durable transaction that writes its audit event inside; the active-graph cache entry of a
workspace is dropped on commit whenever its pointer moves or its canary starts, changes share or ends. Seeding sets a
workspace's first active revision; every later move of the pointer is a promotion through reviews
(graphs/promotable.py), which calls `workspace_activate_revision_in_transaction` (a full activation) or
`workspace_start_canary_in_transaction` (a canary: the replaced revision kept as the control) inside the review's
transaction, and `workspace_end_canary_in_transaction` when the watch ends a canary.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.core.validators import validate_slug
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.roles import Role, require_role
from accounts.services import Actor, audit_record
from graphs.core import Diagnostic, Graph, GraphError, errors_in, skeleton

from . import cache, revisions
from .models import Revision, Workspace, default_vocabulary

GRAPH = Revision.Kind.GRAPH
VOCABULARY_KEYS = ("relations", "node_types", "attribute_fields")


@dataclass(frozen=True)
class Seeded:
    """A seeded workspace: its first graph revision and the warnings the hand-written graph produced."""

    workspace: Workspace
    revision: Revision
    warnings: list[Diagnostic] = field(default_factory=list)

    @property
    def origin(self) -> str:
        return self.revision.meta.get("origin", "")


def normalize_vocabulary(vocabulary: Mapping[str, Any] | None) -> dict[str, list[str]]:
    """{relations, node_types, attribute_fields}: missing keys take the defaults; types and relations upper-case."""
    if vocabulary is None:
        return default_vocabulary()
    if not isinstance(vocabulary, Mapping):
        raise ValueError("a vocabulary is an object with relations, node_types and attribute_fields")
    unknown = sorted(set(vocabulary) - set(VOCABULARY_KEYS))
    if unknown:
        raise ValueError(f"unknown vocabulary keys: {', '.join(unknown)}")
    for key, value in vocabulary.items():
        if value is not None and (not isinstance(value, list) or not all(isinstance(v, str) for v in value)):
            raise ValueError(f"vocabulary {key} must be a list of strings")
    probe = Graph(**{key: vocabulary.get(key) for key in VOCABULARY_KEYS})
    return {key: list(getattr(probe, key)) for key in VOCABULARY_KEYS}


def _clean_slug(slug: str) -> str:
    slug = (slug or "").strip()
    try:
        validate_slug(slug)
    except ValidationError:
        raise ValueError(f"{slug!r} is not a valid workspace slug (letters, digits, hyphens and underscores)") from None
    if len(slug) > 100:
        raise ValueError("a workspace slug has at most 100 characters")
    return slug


def seed_graph(
    graph: Graph | Mapping[str, Any] | str | os.PathLike[str] | None, vocabulary: Mapping[str, list[str]]
) -> tuple[Graph, str, list[Diagnostic]]:
    """(graph, origin, warnings): the skeleton, a built Graph (checked as it is), or a hand-written refiner-shape
    graph through `from_human`."""
    if graph is None:
        return skeleton(**vocabulary), "skeleton", []
    if isinstance(graph, Graph):
        failures = errors_in(graph.validate(cycle_policy="allow"))
        if failures:
            raise GraphError(failures, "a seed graph must pass the structural checks")
        return graph, "skeleton" if graph.is_skeleton else "onboarded", []
    loaded, warnings = Graph.from_human(graph, **vocabulary)
    return loaded, "skeleton" if loaded.is_skeleton else "onboarded", warnings


def _invalidate_on_commit(workspace: Workspace) -> None:
    slug = workspace.slug
    transaction.on_commit(lambda: cache.forget_active(slug))


def workspace_activate_revision_in_transaction(*, workspace: Workspace, revision: Revision) -> None:
    """Point `workspace` (locked by the caller) at `revision` inside the caller's transaction; the cache entry is
    dropped on commit. For seeding and for the graph_revision promotable kind only: it checks and audits nothing.
    A full activation ends a running canary (a rollback to its control included): one revision for every run."""
    workspace.active_revision = revision
    workspace.canary_control = None
    workspace.canary_share = 0.0
    workspace.updated_at = timezone.now()
    workspace.save(update_fields=["active_revision", "canary_control", "canary_share", "updated_at"])
    _invalidate_on_commit(workspace)


def canary_share_of(share: Any) -> float:
    """A canary's share as a float strictly between 0 and 1, else ValueError (a share of 0 or 1 is no canary)."""
    if isinstance(share, bool) or not isinstance(share, int | float) or not math.isfinite(share) or not 0 < share < 1:
        raise ValueError(f"a canary's share is a number between 0 and 1 (exclusive), not {share!r}")
    return float(share)


def workspace_start_canary_in_transaction(
    *, actor: Actor, workspace: Workspace, revision: Revision, share: float
) -> Revision:
    """Make `revision` the active one for a share of runs, inside the caller's transaction (the review's), on
    `workspace` locked by the caller, whose expected active revision the caller checked: the pointer moves as in a
    full activation and the revision it replaced stays live as the control for the other runs. Audited as a pointer
    move (`workspace.set_active_revision`, as every activation) plus `workspace.canary_start`. Returns the control.

    ValueError when the share is not strictly between 0 and 1, when nothing is active (no revision to serve the other
    runs: activate fully instead), or when the revision is the active one already or holds the same graph (same
    digest: the runs of the two arms could not be told apart)."""
    share = canary_share_of(share)
    control = Revision.objects.defer("document").filter(pk=workspace.active_revision_id).first()
    if control is None:
        raise ValueError(
            f"workspace {workspace.slug!r} has no active revision: a canary needs one to serve the other runs "
            "(activate the revision fully)"
        )
    if control.pk == revision.pk:
        raise ValueError(f"revision {revision.label} is the active revision already")
    if control.digest == revision.digest:
        raise ValueError(
            f"revision {revision.label} holds the same graph as the active revision {control.label}: "
            "its runs could not be told apart"
        )
    running = {"control": workspace.canary_control_id, "share": workspace.canary_share}
    workspace_activate_revision_in_transaction(workspace=workspace, revision=revision)
    workspace.canary_control_id = control.pk
    workspace.canary_share = share
    workspace.save(update_fields=["canary_control", "canary_share"])
    audit_record(
        actor=actor,
        verb="workspace.set_active_revision",
        target=workspace,
        before={"active_revision": control.pk},
        after={"active_revision": revision.pk, "seq": revision.seq, "digest": revision.digest, "label": revision.label},
    )
    audit_record(
        actor=actor,
        verb="workspace.canary_start",
        target=workspace,
        before=running if running["control"] else None,
        after={
            "candidate": revision.pk,
            "candidate_label": revision.label,
            "control": control.pk,
            "control_label": control.label,
            "share": share,
        },
    )
    return control


def workspace_end_canary_in_transaction(*, actor: Actor, workspace: Workspace) -> bool:
    """The active revision is live for every run: the control is dropped, inside the caller's transaction, on
    `workspace` locked by the caller; audited `workspace.canary_end`. False (nothing written) when no canary runs."""
    if workspace.canary_control_id is None:
        return False
    before = {"control": workspace.canary_control_id, "share": workspace.canary_share}
    workspace.canary_control = None
    workspace.canary_share = 0.0
    workspace.updated_at = timezone.now()
    workspace.save(update_fields=["canary_control", "canary_share", "updated_at"])
    audit_record(
        actor=actor,
        verb="workspace.canary_end",
        target=workspace,
        before=before,
        after={"active_revision": workspace.active_revision_id},
    )
    _invalidate_on_commit(workspace)
    return True


def workspace_set_canary_share(*, actor: Actor, slug: str, share: float) -> Workspace:
    """Change a running canary's share (one durable transaction, audited `workspace.canary_share`; the card is
    dropped on commit). Runs already pinned to an arm keep it (uplift.core.canary). ValueError for a share outside
    (0, 1), an unknown workspace, or a workspace with no canary running."""
    share = canary_share_of(share)
    with transaction.atomic(durable=True):
        workspace = Workspace.objects.select_for_update().filter(slug=slug).first()
        if workspace is None:
            raise ValueError(f"no workspace named {slug!r}")
        if workspace.canary_control_id is None:
            raise ValueError(f"workspace {slug!r} has no canary running")
        before = workspace.canary_share
        workspace.canary_share = share
        workspace.updated_at = timezone.now()
        workspace.save(update_fields=["canary_share", "updated_at"])
        audit_record(
            actor=actor, verb="workspace.canary_share", target=workspace, before={"share": before},
            after={"share": share},
        )  # fmt: skip
        _invalidate_on_commit(workspace)
    return workspace


def _append_seed(*, actor: Actor, workspace: Workspace, graph: Graph, meta: dict[str, Any], activate: bool) -> Revision:
    revision = revisions.append(workspace, GRAPH, graph.to_document(), expected_head=None, meta=meta)
    audit_record(
        actor=actor,
        verb="graph_revision.seed",
        target=revision,
        after={"workspace": workspace.slug, "seq": revision.seq, "digest": revision.digest, "meta": meta},
    )
    if activate:
        workspace_activate_revision_in_transaction(workspace=workspace, revision=revision)
    return revision


def workspace_create(
    *,
    actor: Actor,
    slug: str,
    title: str = "",
    task_description: str = "",
    vocabulary: Mapping[str, Any] | None = None,
    graph: Graph | Mapping[str, Any] | str | os.PathLike[str] | None = None,
    transfer_from: Workspace | None = None,
    seed: bool = True,
    activate: bool = True,
    seed_meta: Mapping[str, Any] | None = None,
) -> Seeded | Workspace:
    """Create a workspace; with `seed` (default) its graph chain starts with the skeleton, the hand-written `graph`,
    or the head graph of `transfer_from` (origin "transfer:<source>", source_ref; rejection memory never travels).

    Returns a `Seeded` when seeded, else the bare workspace. The seed becomes the active revision unless
    `activate=False`. Raises ValueError (bad slug or vocabulary, the slug is taken, a source without a graph) or
    GraphError (a hand-written graph that fails the structural checks); nothing is written then.
    """
    require_role(actor, Role.OPERATOR, doing="creating a workspace", system=True)
    slug = _clean_slug(slug)
    if transfer_from is not None and vocabulary is None:
        vocabulary = transfer_from.vocabulary
    words = normalize_vocabulary(vocabulary)
    if (graph is not None or transfer_from is not None) and not seed:
        raise ValueError("a graph to seed was given but seed=False")
    extra: dict[str, Any] = {}
    if transfer_from is not None:
        if graph is not None:
            raise ValueError("seed from a hand-written graph or from a transfer, not both")
        source_head = revisions.head(transfer_from, GRAPH)
        if source_head is None:
            raise ValueError(f"workspace {transfer_from.slug!r} has no graph to transfer")
        loaded, origin, warnings = Graph.from_document(source_head.document), f"transfer:{transfer_from.slug}", []
        extra = {"source_ref": source_head.digest}
    elif seed:
        loaded, origin, warnings = seed_graph(graph, words)
    try:
        with transaction.atomic(durable=True):
            workspace = Workspace.objects.create(
                slug=slug, title=title.strip()[:200], task_description=task_description.strip(), vocabulary=words
            )
            audit_record(
                actor=actor,
                verb="workspace.create",
                target=workspace,
                after={"slug": slug, "title": workspace.title, "vocabulary": words},
            )
            if not seed:
                return workspace
            meta = {"origin": origin, **extra, "iteration": 0, **dict(seed_meta or {})}
            revision = _append_seed(actor=actor, workspace=workspace, graph=loaded, meta=meta, activate=activate)
    except IntegrityError:
        raise ValueError(f"a workspace named {slug!r} exists already") from None
    return Seeded(workspace, revision, warnings)


def graph_seed(
    *,
    actor: Actor,
    workspace: Workspace,
    graph: Graph | Mapping[str, Any] | str | os.PathLike[str] | None = None,
    activate: bool = True,
    seed_meta: Mapping[str, Any] | None = None,
) -> Seeded:
    """Seed the empty graph chain of an existing workspace; HeadMoved when it already has a graph. `seed_meta` adds
    to (or overrides) the seed's meta, e.g. BootstrapResult.seed_meta() with origin "bootstrapped"."""
    require_role(actor, Role.OPERATOR, doing="seeding a graph", system=True)
    loaded, origin, warnings = seed_graph(graph, workspace.vocabulary or default_vocabulary())
    meta = {"origin": origin, "iteration": 0, **dict(seed_meta or {})}
    with transaction.atomic(durable=True):
        revision = _append_seed(actor=actor, workspace=workspace, graph=loaded, meta=meta, activate=activate)
    return Seeded(workspace, revision, warnings)


def graph_transfer(*, actor: Actor, source: Workspace, target_slug: str, activate: bool = True) -> Revision | None:
    """Copy the source's head graph into an empty target (created when missing) as revision 0.

    Meta {origin: "transfer:<source>", source_ref, iteration: 0}. Rejection memory never travels. Returns None when
    the source has no graph or the target already has one.
    """
    require_role(actor, Role.OPERATOR, doing="transferring a graph", system=True)
    target_slug = _clean_slug(target_slug)
    if target_slug == source.slug:
        raise ValueError("a workspace cannot be transferred onto itself")
    with transaction.atomic(durable=True):
        source_head = revisions.head(source, GRAPH)
        if source_head is None:
            return None
        target = Workspace.objects.select_for_update().filter(slug=target_slug).first()
        if target is None:
            target = Workspace.objects.create(
                slug=target_slug,
                title=source.title,
                task_description=source.task_description,
                vocabulary=source.vocabulary,
            )
            audit_record(
                actor=actor,
                verb="workspace.create",
                target=target,
                after={"slug": target.slug, "transferred_from": source.slug},
            )
        elif revisions.head(target, GRAPH) is not None:
            return None
        meta = {"origin": f"transfer:{source.slug}", "source_ref": source_head.digest, "iteration": 0}
        graph = Graph.from_document(source_head.document)
        return _append_seed(actor=actor, workspace=target, graph=graph, meta=meta, activate=activate)


def graph_append_accepted(
    *,
    actor: Actor,
    workspace: Workspace,
    graph: Graph,
    expected_head: str | None,
    meta: Mapping[str, Any] | None = None,
) -> Revision:
    """Append a graph the evolution gate accepted (origin "accepted"); HeadMoved when `expected_head` is stale.

    A graph with a structural error is refused (GraphError); the active pointer does not move (a review moves it).
    """
    require_role(actor, Role.OPERATOR, doing="appending an accepted graph", system=True)
    failures = errors_in(graph.validate(cycle_policy="allow"))
    if failures:
        raise GraphError(failures, "an accepted graph must pass the structural checks")
    stored_meta = {**dict(meta or {}), "origin": "accepted"}
    with transaction.atomic(durable=True):
        revision = revisions.append(
            workspace, GRAPH, graph.to_document(), expected_head=expected_head, meta=stored_meta
        )
        audit_record(
            actor=actor,
            verb="graph_revision.append",
            target=revision,
            before={"head": expected_head},
            after={"workspace": workspace.slug, "seq": revision.seq, "digest": revision.digest},
        )
    return revision


def workspace_seed_active_revision(*, actor: Actor, workspace: Workspace, revision: Revision) -> Workspace:
    """Seeding only (the system actor of commands such as seed_demo): give a workspace with no active revision its
    first one. A workspace that has an active revision is refused: moving the pointer is a promotion (reviews)."""
    if actor.user is not None or actor.token is not None:
        raise PermissionDenied("only seeding commands set a first active revision; propose a promotion instead")
    if revision.workspace_id != workspace.pk or revision.kind != GRAPH:
        raise ValueError("the revision must be a graph revision of this workspace")
    with transaction.atomic(durable=True):
        locked = Workspace.objects.select_for_update().get(pk=workspace.pk)
        if locked.active_revision_id is not None:
            raise ValueError(f"workspace {locked.slug!r} has an active revision already; propose a promotion instead")
        workspace_activate_revision_in_transaction(workspace=locked, revision=revision)
        audit_record(
            actor=actor,
            verb="workspace.set_active_revision",
            target=locked,
            before={"active_revision": None},
            after={"active_revision": revision.pk, "seq": revision.seq, "digest": revision.digest, "seeded": True},
        )
    return locked
