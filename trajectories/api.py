"""/api/v1/trajectories: agents push batches of runs; readers page through runs and open one with its steps."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from ninja import Query, Router, Status

from accounts.api_auth import scoped
from accounts.services import Actor
from common.bodies import read_limited_body
from common.errors import ApiError, Error, cursor_checked
from common.ingest_gate import ingest_admitted
from common.jsonbody import DuplicateKey, loads_unique
from common.text import NOT_JSON_MESSAGE, is_json_request, printable_key

from . import selectors, services
from .schemas import IngestIn, IngestOut, RunDetailOut, RunFilterIn, RunIn, RunPageOut, inlined_json_schema

router = Router(tags=["trajectories"])

INGEST_DESCRIPTION = """Push a batch of runs: `{"runs": [run, ...]}`, at most WAYMARK_INGEST_MAX_RUNS runs (default
1,000) and WAYMARK_INGEST_MAX_BYTES bytes (default 5 MB). Idempotent on (source, external_id): runs that exist already
are reported in `existing_ids` and never modified. The batch is all or nothing: one invalid item answers 422 with
`details.errors[].loc` naming the item index and field (e.g. `["runs", 3, "steps", 0, "tool"]`), and nothing is
written; a key twice in one object is refused the same way (`duplicate_key`). 201 when something was created, 200
when every run existed already. 413 over the size limit; 429 `too_many_in_flight` (with `Retry-After`) while the
token or its agent already has its share of ingest requests in flight (WAYMARK_INGEST_CONCURRENT_PER_TOKEN, default
2, and _PER_AGENT, default 4). See docs/api.md."""


def _body_text(request: HttpRequest) -> str:
    """The body as text. The raw bytes are dropped on return (the request keeps no copy: common.bodies)."""
    body = read_limited_body(request, settings.WAYMARK_INGEST_MAX_BYTES)
    if body and not is_json_request(request):  # an empty body is malformed JSON whatever its type
        raise ApiError(400, "unsupported_media_type", NOT_JSON_MESSAGE, {"content_type": request.content_type or ""})
    try:
        return body.decode(json.detect_encoding(body), "surrogatepass")  # as json.loads(bytes) reads them
    except UnicodeDecodeError as exc:
        raise ApiError(400, "malformed_json", f"the body is not valid JSON: {exc}") from None


def _parse_batch(text: str) -> list[Any]:
    try:
        payload = loads_unique(text)
    except DuplicateKey as exc:
        loc = [printable_key(part) if isinstance(part, str) else part for part in exc.loc]
        message = f"the key {printable_key(exc.key)!r} appears twice in one object: which one counts is ambiguous"
        raise _invalid([{"loc": loc, "msg": message, "type": "duplicate_key"}]) from None
    except (ValueError, RecursionError) as exc:
        raise ApiError(400, "malformed_json", f"the body is not valid JSON: {exc}")
    if not isinstance(payload, dict):
        raise _invalid([{"loc": [], "msg": 'the body must be a JSON object {"runs": [...]}', "type": "dict_type"}])
    unknown = sorted(set(payload) - {"runs"})
    if unknown:
        raise _invalid(
            [{"loc": [key], "msg": "Extra inputs are not permitted", "type": "extra_forbidden"} for key in unknown]
        )
    runs = payload.get("runs")
    if not isinstance(runs, list):
        raise _invalid([{"loc": ["runs"], "msg": "must be a list of runs", "type": "list_type"}])
    limit = settings.WAYMARK_INGEST_MAX_RUNS
    if len(runs) > limit:
        raise _invalid([{"loc": ["runs"], "msg": f"at most {limit} runs per batch", "type": "too_long"}])
    return runs


def _validated_batch(request: HttpRequest) -> list[RunIn]:
    """The batch as run schemas. Each form is dropped once the next exists (bytes → text → parsed JSON → schemas),
    so a batch never holds more than two of them at a time (docs/benchmarks.md, Load: memory per batch)."""
    runs = _parse_batch(_body_text(request))
    try:
        return services.validate_ingest_items(runs)
    except services.IngestInvalid as exc:
        raise _invalid(exc.errors)


def _invalid(errors: list[dict[str, Any]]) -> ApiError:
    return ApiError(
        422, "invalid", "the batch does not match the ingest format; nothing was written", {"errors": errors}
    )


@router.post(
    "",
    auth=scoped("trajectories:write"),
    response={200: IngestOut, 201: IngestOut, 400: Error, 401: Error, 403: Error, 413: Error, 422: Error},
    summary="Ingest a batch of runs",
    description=INGEST_DESCRIPTION,
    openapi_extra={
        "requestBody": {"required": True, "content": {"application/json": {"schema": inlined_json_schema(IngestIn)}}}
    },
)
def ingest(request: HttpRequest):
    # 413 / 429 past the token's or the agent's share / 503 without room for the body (common/ingest_gate.py)
    with ingest_admitted(request, settings.WAYMARK_INGEST_MAX_BYTES):
        try:
            # validated models pass through the service's validation as they are (pydantic does not revalidate them)
            result = services.run_ingest_batch(actor=Actor.of_request(request), items=_validated_batch(request))
        except services.IngestInvalid as exc:
            raise _invalid(exc.errors)
    body = {
        "created": result.created,
        "existing": result.existing,
        "created_ids": result.created_ids,
        "existing_ids": result.existing_ids,
    }
    return Status(201 if result.created else 200, body)


@router.get(
    "",
    auth=scoped("trajectories:read"),
    response={200: RunPageOut, 400: Error, 401: Error, 403: Error, 422: Error},
    summary="List runs, newest first (cursor pages)",
)
def list_runs(request: HttpRequest, filters: Query[RunFilterIn]):
    with cursor_checked():
        page = selectors.run_page(
            filters=selectors.RunFilters(
                outcome=filters.outcome, source=filters.source, tool=filters.tool, intent=filters.intent, q=filters.q
            ),
            cursor=filters.cursor,
            limit=filters.limit,
        )
    return Status(200, {"items": page.runs, "next_cursor": page.next_cursor})


@router.get(
    "/{run_id}",
    auth=scoped("trajectories:read"),
    response={200: RunDetailOut, 401: Error, 403: Error, 404: Error, 422: Error},
    summary="One run with its steps",
)
def get_run(request: HttpRequest, run_id: int):
    return Status(200, selectors.run_with_steps(run_id))
