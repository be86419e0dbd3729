"""/api/v1/trajectories: agents push batches of runs; readers page through runs and open one with its steps."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from ninja import Query, Router, Status

from accounts.services import Actor
from config.auth import scoped
from config.bodies import read_limited_body
from config.cursors import InvalidCursor
from config.errors import ApiError, Error
from config.text import NOT_JSON_MESSAGE, is_json_request

from . import selectors, services
from .schemas import IngestIn, IngestOut, RunDetailOut, RunFilterIn, RunPageOut, inlined_json_schema

router = Router(tags=["trajectories"])

INGEST_DESCRIPTION = """Push a batch of runs: `{"runs": [run, ...]}`, at most WAYMARK_INGEST_MAX_RUNS runs (default
1,000) and WAYMARK_INGEST_MAX_BYTES bytes (default 5 MB). Idempotent on (source, external_id): runs that exist already
are reported in `existing_ids` and never modified. The batch is all or nothing: one invalid item answers 422 with
`details.errors[].loc` naming the item index and field (e.g. `["runs", 3, "steps", 0, "tool"]`), and nothing is
written. 201 when something was created, 200 when every run existed already. See docs/api.md."""


def _read_body(request: HttpRequest) -> bytes:
    body = read_limited_body(request, settings.WAYMARK_INGEST_MAX_BYTES)
    if body and not is_json_request(request):  # an empty body is malformed JSON whatever its type
        raise ApiError(400, "unsupported_media_type", NOT_JSON_MESSAGE, {"content_type": request.content_type or ""})
    return body


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _parse_batch(body: bytes) -> list[Any]:
    try:
        payload = json.loads(body, parse_constant=_reject_constant)
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
    runs = _parse_batch(_read_body(request))
    try:
        result = services.run_ingest_batch(actor=Actor.of_request(request), items=runs)
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
    try:
        page = selectors.run_page(
            filters=selectors.RunFilters(
                outcome=filters.outcome, source=filters.source, tool=filters.tool, intent=filters.intent, q=filters.q
            ),
            cursor=filters.cursor,
            limit=filters.limit,
        )
    except InvalidCursor as exc:
        raise ApiError(400, "bad_cursor", str(exc))
    return Status(200, {"items": page.runs, "next_cursor": page.next_cursor})


@router.get(
    "/{run_id}",
    auth=scoped("trajectories:read"),
    response={200: RunDetailOut, 401: Error, 403: Error, 404: Error, 422: Error},
    summary="One run with its steps",
)
def get_run(request: HttpRequest, run_id: int):
    return Status(200, selectors.run_with_steps(run_id))
