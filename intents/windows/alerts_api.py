"""/api/v1/intents/alerts: novelty alerts raised by window analyses, and their decision (dismiss, or promote the
candidate to review).

Mounted by config/api.py. Reading needs the scope `intents:read`; deciding needs `intents:write` and the reviewer or
operator role. Decisions go through intents.windows.services.novelty_alert_decide (an alert is decided once: 409 after).
A promoted candidate heads every reviewer's judging queue (intents.taxonomy.selectors.review_queue_for) until it is
judged. Every refusal answers with the Error schema and writes nothing.
"""

from __future__ import annotations

from typing import Annotated

from django.http import HttpRequest
from ninja import Path, Query, Router, Status

from accounts.api_auth import scoped
from accounts.services import Actor
from common.errors import ApiError, Error, cursor_checked

from ..taxonomy.schemas import AlertDecisionIn, AlertOut, AlertPageIn, AlertPageOut
from . import selectors
from .models import NoveltyAlert
from .services import WindowRefused, novelty_alert_decide

router = Router(tags=["intent novelty alerts"])

READ = scoped("intents:read")
WRITE = scoped("intents:write")
AlertId = Annotated[int, Path(ge=1, le=2**63 - 1)]
DECISIONS = {"dismiss": NoveltyAlert.Status.DISMISSED, "promote": NoveltyAlert.Status.PROMOTED}


def alert_out(alert: NoveltyAlert) -> dict:
    return {
        "id": alert.pk,
        "analysis": alert.analysis_id,
        "candidate_id": alert.candidate_id,
        "label": alert.label,
        "nearest_intent_id": alert.nearest_intent_id,
        "nearest_label": alert.nearest_label,
        "similarity": alert.similarity,
        "threshold": alert.threshold,
        "status": alert.status,
        "note": alert.note,
        "decided_by": alert.decided_by.username if alert.decided_by_id else None,
        "decided_at": alert.decided_at,
        "created_at": alert.created_at,
    }


@router.get(
    "",
    auth=READ,
    response={200: AlertPageOut, 400: Error, 401: Error, 403: Error, 422: Error},
    summary="Novelty alerts, newest first (cursor pages; filter by status)",
)
def list_alerts(request: HttpRequest, page: Query[AlertPageIn]):
    with cursor_checked():
        found = selectors.alert_page(status=page.status or "", cursor=page.cursor, limit=page.limit)
    return Status(200, {"items": [alert_out(alert) for alert in found.alerts], "next_cursor": found.next_cursor})


@router.get(
    "/{alert_id}",
    auth=READ,
    response={200: AlertOut, 401: Error, 403: Error, 404: Error, 422: Error},
    summary="One novelty alert",
)
def get_alert(request: HttpRequest, alert_id: AlertId):
    return Status(200, alert_out(selectors.alert_of(alert_id)))


@router.post(
    "/{alert_id}/decision",
    auth=WRITE,
    response={200: AlertOut, 400: Error, 401: Error, 403: Error, 404: Error, 409: Error, 422: Error},
    summary="Dismiss an open alert, or promote its candidate to review (reviewers and operators)",
    description="`promote` puts the candidate at the head of the reviewers' judging queue "
    "(GET /api/v1/intents/taxonomy/queue). 403 `not_a_reviewer` without the reviewer or operator role; 404 for an "
    "unknown alert; 409 `alert_decided` once the alert was dismissed or promoted.",
)
def decide_alert(request: HttpRequest, alert_id: AlertId, body: AlertDecisionIn):
    if not request.user.may_decide_alerts:
        raise ApiError(403, "not_a_reviewer", "deciding novelty alerts needs the reviewer or operator role")
    alert = selectors.alert_of(alert_id)
    try:
        decided = novelty_alert_decide(
            actor=Actor.of_request(request), alert=alert, status=DECISIONS[body.decision], note=body.note
        )
    except WindowRefused as exc:
        raise ApiError(exc.status, exc.code, str(exc)) from None
    return Status(200, alert_out(decided))
