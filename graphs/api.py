"""/api/v1/graphs: agents read the active graph (ETag, 304) and revisions, and ask for step guidance.

Nothing here moves the active pointer: that is a promotion through reviews (POST /api/v1/promotions).
"""

from __future__ import annotations

import json

from django.http import HttpRequest, HttpResponse
from django.utils.http import parse_etags
from ninja import Query, Router, Status

from config.auth import scoped
from config.cursors import InvalidCursor
from config.errors import ApiError, Error
from llm.core import ModelError

from . import cache, selectors
from .guidance import NoActiveGraph, workspace_guidance
from .schemas import (
    GraphRevisionOut,
    GuidanceIn,
    GuidanceOut,
    RevisionPageIn,
    RevisionPageOut,
    WorkspaceListOut,
)

router = Router(tags=["graphs"])

READ = scoped("graphs:read")
GUIDE = scoped("graphs:guide")


def _summary_out(summary: dict | None) -> dict | None:
    if summary is None:
        return None
    keys = ("seq", "digest", "parent_digest", "meta", "created_at")
    return {key: summary[key] for key in keys}


def _revision_out(revision) -> dict:
    return {
        "seq": revision.seq,
        "digest": revision.digest,
        "parent_digest": revision.parent_digest,
        "meta": revision.meta,
        "created_at": revision.created_at,
    }


def _bad_ref(exc: Exception) -> ApiError:
    return ApiError(422, "invalid_revision", str(exc))


@router.get(
    "",
    auth=READ,
    response={200: WorkspaceListOut, 401: Error, 403: Error},
    summary="Workspaces with their active revision and graph head",
)
def list_workspaces(request: HttpRequest):
    items = []
    for workspace in selectors.workspaces_with_pointers():
        active = workspace.active_revision
        items.append(
            {
                "slug": workspace.slug,
                "title": workspace.title,
                "task_description": workspace.task_description,
                "active": _revision_out(active) if active is not None else None,
                "head": {"seq": workspace.head_seq, "digest": workspace.head_digest} if workspace.head_digest else None,
            }
        )
    return Status(200, {"items": items})


def _active_headers(response: HttpResponse, summary: dict) -> HttpResponse:
    response["ETag"] = f'"{summary["digest"]}"'
    response["X-Waymark-Revision"] = str(summary["seq"])
    response["Cache-Control"] = "no-cache"
    return response


@router.get(
    "/{ws}/active",
    auth=READ,
    response={200: GraphRevisionOut, 304: None, 401: Error, 403: Error, 404: Error, 422: Error},
    summary="The active graph (refiner shape) with digest, seq and meta; strong ETag, If-None-Match answers 304",
)
def active_graph(request: HttpRequest, ws: str):
    card = selectors.workspace_card(ws)
    summary = card["active"]
    if summary is None:
        raise ApiError(404, "no_active_graph", f"workspace {ws!r} has no active graph yet")
    if_none_match = request.headers.get("If-None-Match")
    etag = f'"{summary["digest"]}"'
    if if_none_match and ({etag, f"W/{etag}", "*"} & set(parse_etags(if_none_match))):
        return _active_headers(HttpResponse(status=304), summary)
    content = cache.bodies.get(summary["id"])
    if content is None:  # a revision never changes: its encoded body is kept per process
        graph = selectors.graph_at(summary["id"], summary["digest"])
        body = {
            "workspace": card["slug"],
            **_summary_out(summary),
            "created_at": summary["created_at"].isoformat().replace("+00:00", "Z"),
            "graph": graph.to_refiner_json(),
        }
        content = cache.bodies.put(summary["id"], json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode())
    return _active_headers(HttpResponse(content, content_type="application/json"), summary)


@router.get(
    "/{ws}/revisions",
    auth=READ,
    response={200: RevisionPageOut, 400: Error, 401: Error, 403: Error, 404: Error, 422: Error},
    summary="The graph revision chain, newest first (cursor pages)",
)
def list_revisions(request: HttpRequest, ws: str, page: Query[RevisionPageIn]):
    workspace = selectors.workspace_by_slug(ws)
    try:
        found = selectors.revision_page(workspace, cursor=page.cursor, limit=page.limit)
    except InvalidCursor as exc:
        raise ApiError(400, "bad_cursor", str(exc))
    return Status(200, {"items": [_revision_out(r) for r in found.revisions], "next_cursor": found.next_cursor})


@router.get(
    "/{ws}/revisions/{ref}",
    auth=READ,
    response={200: GraphRevisionOut, 401: Error, 403: Error, 404: Error, 422: Error},
    summary="One graph revision by seq number or digest (a unique prefix of at least 4 hex characters)",
)
def get_revision(request: HttpRequest, ws: str, ref: str):
    workspace = selectors.workspace_by_slug(ws)
    try:
        revision = selectors.resolve_revision(workspace, ref)
    except selectors.InvalidRef as exc:
        raise _bad_ref(exc)
    graph = selectors.graph_of(revision)
    response = Status(200, {"workspace": workspace.slug, **_revision_out(revision), "graph": graph.to_refiner_json()})
    return response


@router.post(
    "/{ws}/guidance",
    auth=GUIDE,
    response={200: GuidanceOut, 400: Error, 401: Error, 403: Error, 404: Error, 422: Error, 503: Error},
    summary="Guidance for the agent's next step, localized on the last action",
    description=(
        "Raw modes (`raw_subgraph`, `raw_full`) return the serialized graph context and never call a model; "
        "generative modes call the workspace's model (recorded in the model-call ledger). `revision` (seq or "
        "digest) pins the graph the agent started its run with; without it the active graph answers."
    ),
)
def guidance(request: HttpRequest, ws: str, payload: GuidanceIn):
    try:
        answer = workspace_guidance(
            slug=ws,
            query=payload.query,
            steps=[{"action": s.action, "args": s.args, "observation": s.observation} for s in payload.steps],
            mode=payload.mode,
            hops=payload.hops,
            window=payload.window,
            revision=payload.revision,
        )
    except NoActiveGraph as exc:
        raise ApiError(404, "no_active_graph", str(exc))
    except selectors.InvalidRef as exc:
        raise _bad_ref(exc)
    except ModelError as exc:
        raise ApiError(503, "model_unavailable", f"the guidance model did not answer: {exc}")
    return Status(
        200,
        {
            "text": answer.text,
            "node_id": answer.node_id,
            "used_full_graph": answer.used_full_graph,
            "subgraph_digest": answer.subgraph_digest,
            "mode": answer.mode,
            "revision": answer.revision["digest"],
        },
    )
