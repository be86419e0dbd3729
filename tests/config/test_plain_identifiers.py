"""Identifiers are plain (issue 30, item 7): a right-to-left override or any other invisible or direction-changing
character in an id lets one id be displayed as another, so every place an id (or a name shown as one) enters refuses
it, naming the field and the character (common.text.require_plain_identifier)."""

from __future__ import annotations

import pytest

from accounts.roles import Role
from accounts.services import Actor, AgentRefused, agent_create, api_token_create
from common.text import plain_identifier_error, require_plain_identifier
from graphs.services import workspace_create
from intents.taxonomy.services import taxonomy_draft
from procedures.errors import MiningError
from procedures.mining.services import procedure_mine
from reviews.errors import Invalid
from rubrics.services import rubric_ensure
from tests.conftest import logged_in
from tests.factories import user_with
from tests.trajectories.factories import run_item
from trajectories.models import Run

HIDDEN = {
    "\u202e": "RIGHT-TO-LEFT OVERRIDE",
    "\u202a": "LEFT-TO-RIGHT EMBEDDING",
    "\u2066": "LEFT-TO-RIGHT ISOLATE",
    "\u2069": "POP DIRECTIONAL ISOLATE",
    "\u200e": "LEFT-TO-RIGHT MARK",
    "\u200f": "RIGHT-TO-LEFT MARK",
    "\u061c": "ARABIC LETTER MARK",
    "\u200b": "ZERO WIDTH SPACE",
    "\u200d": "ZERO WIDTH JOINER",
    "\u2060": "WORD JOINER",
    "\ufeff": "ZERO WIDTH NO-BREAK SPACE",
    "\u00ad": "SOFT HYPHEN",
    "\u3164": "HANGUL FILLER",
    "\u00a0": "NO-BREAK SPACE",
    "\ufe0f": "VARIATION SELECTOR-16",
    "\U000e0041": "TAG LATIN CAPITAL LETTER A",
    "\t": "unnamed character",
}
RLO = "\u202e"


@pytest.mark.parametrize("char", list(HIDDEN))
def test_every_invisible_or_direction_changing_character_is_refused_by_name(char):
    with pytest.raises(ValueError) as refused:
        require_plain_identifier(f"invoice{char}txt.exe")
    message = str(refused.value)
    assert f"U+{ord(char):04X}" in message and HIDDEN[char] in message and "at position 8" in message


PLAIN = ["refund_request", "ci deploy", "café", "日本語-エージェント", "run-42:b", "عربى", "🔑 key"]


@pytest.mark.parametrize("text", PLAIN)
def test_plain_identifiers_in_any_script_pass(text):
    assert require_plain_identifier(text) == text and plain_identifier_error(text) is None


# --- where ids enter -------------------------------------------------------------------------------------------------
@pytest.mark.django_db
@pytest.mark.parametrize("field", ["source", "external_id"])
def test_ingest_answers_422_naming_the_run_identity_field(api_client, make_agent_token, field):
    token = make_agent_token("trajectories:write")
    item = run_item(**{field: f"invoice{RLO}fdp.exe"})
    response = api_client.post("/api/v1/trajectories", {"runs": [run_item(), item]}, token=token)
    assert response.status_code == 422, response.content
    body = response.json()
    (error,) = [e for e in body["details"]["errors"] if e["loc"][-3:] == ["runs", 1, field]]
    assert "RIGHT-TO-LEFT OVERRIDE" in error["msg"]
    assert Run.objects.count() == 0  # nothing of the batch is written


@pytest.mark.django_db
def test_a_token_name_is_refused_on_the_page_and_in_the_service(operator):
    with pytest.raises(ValueError, match="a token name must not contain invisible"):
        api_token_create(actor=Actor.system(), user=operator, name=f"ci{RLO}prod", scopes=["graphs:read"])
    client = logged_in(operator)
    client.get("/accounts/settings/")
    response = client.post(
        "/accounts/settings/",
        {"name": f"ci{RLO}prod", "scopes": ["graphs:read"], "csrfmiddlewaretoken": client.cookies["csrftoken"].value},
    )
    assert response.status_code == 400 and "a token name must not contain invisible" in response.content.decode()
    assert not operator.api_tokens.exists()


@pytest.mark.django_db
def test_an_agent_name_is_refused():
    with pytest.raises(AgentRefused, match="only letters"):  # Django's username rule refuses format characters
        agent_create(actor=Actor.system(), name=f"agent{RLO}one")
    with pytest.raises(AgentRefused, match=r"an agent name must not contain invisible.*HANGUL FILLER"):
        agent_create(actor=Actor.system(), name="agent\u3164one")  # a letter to Django's rule


@pytest.mark.django_db
def test_a_workspace_slug_is_refused(operator):
    with pytest.raises(ValueError, match="not a valid workspace slug"):
        workspace_create(actor=Actor(user=operator), slug=f"two{RLO}hop")


@pytest.mark.django_db
def test_mining_refuses_an_intent_that_would_name_a_procedure(operator):
    with pytest.raises(MiningError, match="the intent must not contain invisible"):
        procedure_mine(actor=Actor(user=operator), intent="refund\u3164request")


@pytest.mark.django_db
def test_a_posted_intent_label_answers_422_naming_the_item(api_client, make_token, operator):
    token = make_token(operator, "intents:write")
    item = {"intent": f"reset{RLO}password", "evidence": [{"trajectory_id": "a:b", "start": 0, "end": 0}]}
    response = api_client.post("/api/v1/intents/candidates", {"intents": [item]}, token=token)
    assert response.status_code == 422, response.content
    assert "intents[0].intent must not contain invisible" in response.json()["message"]


@pytest.mark.django_db
def test_a_taxonomy_relabel_is_refused(operator):
    with pytest.raises(Invalid, match="the new label of i1 must not contain invisible"):
        taxonomy_draft(actor=Actor(user=operator), relabels={"i1": f"refund{RLO}"})


@pytest.mark.django_db
@pytest.mark.parametrize("field", ["key", "label"])
def test_a_rubric_key_or_label_is_refused(operator, field):
    values = {"key": "refund_request", "label": "", field: f"refund{RLO}request"}
    with pytest.raises(Invalid, match="must not contain invisible") as refused:
        rubric_ensure(actor=Actor(user=operator), **values)
    assert refused.value.code == "invisible_characters"


@pytest.mark.django_db
@pytest.mark.parametrize("field", ["kind", "candidate_id"])
def test_a_promotion_proposal_answers_422_naming_the_field(api_client, make_token, field):
    token = make_token(user_with(Role.REVIEWER, username="rita"), "reviews:judge")
    body = {"kind": "procedure_version", "candidate_id": "12", "rationale": "better", field: f"1{RLO}2"}
    response = api_client.post("/api/v1/promotions", body, token=token)
    assert response.status_code == 422, response.content
    locs = [error["loc"] for error in response.json()["details"]["errors"]]
    assert ["body", "body", field] in locs


def test_every_api_body_refuses_a_key_twice_in_one_object(db, api_client, make_token, reviewer):
    """Not only ingest: a promotion body with two `kind` keys would otherwise be read as its last one."""
    token = make_token(reviewer, "reviews:judge")
    body = '{"kind": "procedure_version", "kind": "graph_revision", "candidate_id": "1", "rationale": "x"}'
    response = api_client.post("/api/v1/promotions", raw=body, token=token)
    assert response.status_code == 422, response.content
    (error,) = response.json()["details"]["errors"]
    assert (error["loc"], error["type"]) == (["body", "kind"], "duplicate_key")
