"""/api/v1/graphs: agents read the active graph (ETag, 304) and revisions, and ask for step guidance.

Nothing here moves the active pointer: that is a promotion through reviews (POST /api/v1/promotions).
"""

from __future__ import annotations

import json

from django.http import HttpRequest, HttpResponse, HttpResponseNotModified
from django.utils.http import parse_etags
from ninja import Query, Router, Status
from pydantic import ValidationError

from accounts.api_auth import scoped
from accounts.services import Actor
from common.errors import ApiError, Error, cursor_checked
from common.plain_models import plain_model
from common.text import first_unencodable, is_json_request
from llm.core import ModelError, ModelReplyIncomplete, ModelReplyInvalid

from . import cache, selectors
from .guidance import NoActiveGraph, guidance_body
from .schemas import (
    ActiveGraphOut,
    CertificationOut,
    CertifyIn,
    GraphRevisionOut,
    GuidanceIn,
    GuidanceOut,
    RevisionPageIn,
    RevisionPageOut,
    WorkspaceListOut,
)

router = Router(tags=["graphs"])

READ_SCOPE = "graphs:read"
GUIDE_SCOPE = "graphs:guide"
READ = scoped(READ_SCOPE)
GUIDE = scoped(GUIDE_SCOPE)
CERTIFY = scoped("evolutions:run")  # starting an evaluation is an operator's, as starting an evolution run is
JSON = "application/json; charset=utf-8"  # what ninja's renderer answers
MODEL_RETRY_AFTER_SECONDS = 5  # when the provider named no wait of its own
MAX_MODEL_RETRY_AFTER_SECONDS = 300


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


def _revision_at(ws: str, ref: str):
    """The workspace's revision `ref` names (seq or digest prefix): 404 for none, 422 `invalid_revision` for a bad
    or ambiguous ref."""
    workspace = selectors.workspace_by_slug(ws)
    try:
        return selectors.resolve_revision(workspace, ref)
    except selectors.InvalidRef as exc:
        raise _bad_ref(exc)


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


RUN_HEADER = "HTTP_X_WAYMARK_RUN"  # X-Waymark-Run: the agent's run key (a canary's assignment)
PIN_HEADER = "HTTP_X_WAYMARK_REVISION"  # X-Waymark-Revision: the revision the run was first served (its pin)
CANARY_VARY = "X-Waymark-Run, X-Waymark-Revision"


def _active_headers(response: HttpResponse, served: selectors.ServedArm, card: dict) -> HttpResponse:
    response["ETag"] = f'"{served.summary["digest"]}"'
    response["X-Waymark-Revision"] = str(served.summary["seq"])
    response["X-Waymark-Certificate"] = served.certificate_header
    response["Cache-Control"] = "no-cache"
    if card.get("canary") is not None:  # two revisions are live: the answer depends on the run
        response["Vary"] = CANARY_VARY
    return response


@router.get(
    "/{ws}/active",
    auth=READ,
    response={200: ActiveGraphOut, 304: None, 401: Error, 403: Error, 404: Error, 422: Error},
    summary="The active graph (refiner shape) with digest, seq and meta; strong ETag, If-None-Match answers 304",
    description=(
        "`certificate` is the summary of the revision's latest with-versus-without certificate (null: not "
        "certified yet). The ETag is the graph's digest: a certificate issued later for the same revision does not "
        "change it, so the `X-Waymark-Certificate` header (on 200 and 304 alike) names the certificate in force "
        "(`none`, or `id=…; passed=…; uplift=…; lower=…; n=…`); ask without If-None-Match when its id changed. "
        "While a canary runs, the revision served depends on the request headers `X-Waymark-Run` (the agent's run "
        "id: the same run always gets the same revision) and `X-Waymark-Revision` (the revision the run was served "
        "first, sent back to stay on it); without a run key the control (the previous revision) answers."
    ),
)
def active_graph(request: HttpRequest, ws: str):
    return active_graph_response(request, ws)


def active_graph_response(request: HttpRequest, ws: str) -> HttpResponse:
    """The active graph from its encoded body (kept per revision), or 304 when If-None-Match names its ETag. Served
    by config.step_api on every agent step, and by the ninja operation above."""
    card = selectors.workspace_card(ws)
    if card["active"] is None:
        raise ApiError(404, "no_active_graph", f"workspace {ws!r} has no active graph yet")
    meta = request.META
    served = selectors.served_arm(card, run_key=meta.get(RUN_HEADER), pin=meta.get(PIN_HEADER))
    summary = served.summary
    if_none_match = meta.get("HTTP_IF_NONE_MATCH")
    etag = f'"{summary["digest"]}"'
    if if_none_match and (if_none_match == etag or {etag, f"W/{etag}", "*"} & set(parse_etags(if_none_match))):
        return _active_headers(HttpResponseNotModified(), served, card)
    certificate = served.certificate
    key = (summary["id"], certificate["digest"] if certificate else None)
    content = cache.bodies.get(key)
    if content is None:  # a revision and a certificate never change: the encoded body is kept per process
        graph = selectors.graph_at(summary["id"], summary["digest"])
        body = {
            "workspace": card["slug"],
            **_summary_out(summary),
            "created_at": summary["created_at"].isoformat().replace("+00:00", "Z"),
            "graph": graph.to_refiner_json(),
            "certificate": certificate,
        }
        content = cache.bodies.put(key, json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode())
    return _active_headers(HttpResponse(content, content_type="application/json"), served, card)


@router.get(
    "/{ws}/revisions",
    auth=READ,
    response={200: RevisionPageOut, 400: Error, 401: Error, 403: Error, 404: Error, 422: Error},
    summary="The graph revision chain, newest first (cursor pages)",
)
def list_revisions(request: HttpRequest, ws: str, page: Query[RevisionPageIn]):
    workspace = selectors.workspace_by_slug(ws)
    with cursor_checked():
        found = selectors.revision_page(workspace, cursor=page.cursor, limit=page.limit)
    return Status(200, {"items": [_revision_out(r) for r in found.revisions], "next_cursor": found.next_cursor})


@router.get(
    "/{ws}/revisions/{ref}",
    auth=READ,
    response={200: GraphRevisionOut, 401: Error, 403: Error, 404: Error, 422: Error},
    summary="One graph revision by seq number or digest (a unique prefix of at least 4 hex characters)",
)
def get_revision(request: HttpRequest, ws: str, ref: str):
    revision = _revision_at(ws, ref)
    graph = selectors.graph_of(revision)
    return Status(200, {"workspace": ws, **_revision_out(revision), "graph": graph.to_refiner_json()})


def _ref(revision) -> dict:
    return {"seq": revision.seq, "digest": revision.digest}


def certification_out(certification) -> dict:
    return {
        "id": certification.pk,
        "workspace": certification.workspace.slug,
        "status": certification.status,
        "source": certification.source,
        "evaluator": certification.evaluator,
        "candidate": _ref(certification.candidate),
        "control": _ref(certification.control) if certification.control_id else None,
        "evolution_run": certification.evolution_run_id,
        "round": certification.iteration,
        "error": certification.error,
        "certificate_id": certification.certificate_id,
        "certificate": selectors.revision_certificate(certification.candidate_id),
        "created_at": certification.created_at,
        "finished_at": certification.finished_at,
    }


@router.post(
    "/{ws}/revisions/{ref}/certify",
    auth=CERTIFY,
    response={202: CertificationOut, 400: Error, 401: Error, 403: Error, 404: Error, 422: Error},
    summary="Certify a graph revision (operators): a paired evaluation against the active revision, or no graph",
    description=(
        "202 with the certification: the same validation tasks measured under the revision and under the "
        "workspace's active revision (the active revision itself: against what its last certificate measured it "
        "against; nothing active: no graph at all), on a worker; with the agents evaluator, agents answer its jobs. "
        "A certification of the revision already under way is answered as it is. 422 `cannot_certify` says why "
        "none can start (no evaluator to take, an evaluator that cannot measure without a graph, the same graph)."
    ),
)
def certify_revision(request: HttpRequest, ws: str, ref: str, body: CertifyIn | None = None):
    from .certification_services import CertificationRefused, graph_certify

    if not request.user.may_operate:
        raise ApiError(403, "forbidden", "certifying a graph revision needs the operator role")
    revision = _revision_at(ws, ref)
    try:
        certification, _ = graph_certify(
            actor=Actor.of_request(request), revision=revision, evaluator=body.evaluator if body else None
        )
    except CertificationRefused as exc:
        raise ApiError(422, "cannot_certify", str(exc)) from None
    certification.refresh_from_db()
    return Status(202, certification_out(certification))


@router.get(
    "/{ws}/revisions/{ref}/certification",
    auth=READ,
    response={200: CertificationOut, 401: Error, 403: Error, 404: Error, 422: Error},
    summary="A graph revision's latest certification (paired evaluation) with its latest certificate",
)
def revision_certification(request: HttpRequest, ws: str, ref: str):
    revision = _revision_at(ws, ref)
    certification = selectors.latest_certification(revision)
    if certification is None:
        raise ApiError(404, "not_certified", f"revision {revision.label} has no certification yet")
    return Status(200, certification_out(certification))


@router.post(
    "/{ws}/guidance",
    auth=GUIDE,
    response={200: GuidanceOut, 400: Error, 401: Error, 403: Error, 404: Error, 422: Error, 503: Error},
    summary="Guidance for the agent's next step, localized on the last action",
    description=(
        "Raw modes (`raw_subgraph`, `raw_full`) return the serialized graph context and never call a model; "
        "generative modes call the workspace's model (recorded in the model-call ledger). `revision` (seq or "
        "digest) pins the graph the agent started its run with; without it the active graph answers. When the "
        "model gives no answer (unreachable, rate-limited, or a reply that is not one: malformed, empty, cut at "
        "max_tokens) the answer is 503 `model_unavailable` with `Retry-After` and `details.reason`; a raw mode "
        "needs no model. Without `revision`, while a canary runs, the graph is chosen as GET …/active chooses it "
        "(the headers `X-Waymark-Run` and `X-Waymark-Revision`); the answer's `X-Waymark-Revision` header is the "
        "seq of the graph used."
    ),
)
def guidance(request: HttpRequest, ws: str, payload: GuidanceIn):
    return guidance_response(ws, payload, request)


def step_guidance_response(request: HttpRequest, ws: str) -> HttpResponse | None:
    """config.step_api's guidance: the body validated against GuidanceIn's plain twin here (common.plain_models), or
    None for a body that is not JSON, not valid JSON or does not match the schema (the ninja operation then answers
    it, with its 400/422 details)."""
    if not is_json_request(request):
        return None
    body = request.body
    try:
        data = json.loads(body)
        payload = plain_model(GuidanceIn).model_validate(data)
    except (ValueError, RecursionError, ValidationError):  # not JSON (too deep), or not a GuidanceIn
        return None
    if not (body.isascii() and b"\\u" not in body) and first_unencodable(data) is not None:
        return None  # (ASCII JSON without \u escapes cannot hold a lone surrogate: no need to look)
    return guidance_response(ws, payload, request)


def guidance_response(ws: str, payload: GuidanceIn, request: HttpRequest | None = None) -> HttpResponse:
    """The guidance answer as JSON; raw modes from bytes prepared once per (revision, node, mode, hops). `payload` is
    a GuidanceIn or its plain twin (the same fields); `request` gives the canary's headers (run key, pin)."""
    meta = request.META if request is not None else {}
    try:
        body, seq = guidance_body(
            slug=ws,
            query=payload.query,
            steps=[{"action": s.action, "args": s.args, "observation": s.observation} for s in payload.steps],
            mode=payload.mode,
            hops=payload.hops,
            window=payload.window,
            revision=payload.revision,
            run_key=meta.get(RUN_HEADER),
            pin=meta.get(PIN_HEADER),
        )
    except NoActiveGraph as exc:
        raise ApiError(404, "no_active_graph", str(exc))
    except selectors.InvalidRef as exc:
        raise _bad_ref(exc)
    except ModelError as exc:
        raise ModelAnswerMissing(exc) from None
    response = HttpResponse(body, content_type=JSON)
    response["X-Waymark-Revision"] = str(seq)
    return response


class ModelAnswerMissing(ApiError):
    """503 with Retry-After: the generative mode's model gave no answer — it did not answer in time or at all, or
    its reply was not one (an HTML page, malformed JSON, cut at max_tokens, empty). The call is in the ledger with
    its diagnostics; nothing of the reply is served. Retry-After is the provider's own when it sent one."""

    def __init__(self, error: ModelError) -> None:
        diagnostics = error.diagnostics
        retry_after = diagnostics.get("retry_after")
        if not isinstance(retry_after, int) or isinstance(retry_after, bool):
            retry_after = MODEL_RETRY_AFTER_SECONDS
        retry_after = min(max(retry_after, 1), MAX_MODEL_RETRY_AFTER_SECONDS)
        said = "gave no answer" if isinstance(error, ModelReplyInvalid | ModelReplyIncomplete) else "did not answer"
        details = {"reason": str(diagnostics.get("kind") or type(error).__name__), "retry_after": retry_after}
        super().__init__(503, "model_unavailable", f"the guidance model {said}: {error}", details)
        self.headers = {"Retry-After": str(retry_after)}
