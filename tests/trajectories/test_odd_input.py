"""Odd input (issue 10, item 1): text that cannot be encoded, coerced types, unmatched API paths, non-JSON bodies,
Unicode normalization of run identity, and a hypothesis fuzz of the ingest format that never finds a 5xx."""

import json
import unicodedata
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError as DjangoValidationError
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from common.text import first_unencodable, validate_encodable
from tests.conftest import logged_in
from tests.factories import user_with
from trajectories.importers import ImportFormatError, read_run_items
from trajectories.models import Run, Step

from .factories import run_item, step_item

pytestmark = pytest.mark.django_db
URL = "/api/v1/trajectories"
SURROGATE = "\ud800"


@pytest.fixture
def writer(make_token):
    agent = user_with(username="agent-odd", is_agent=True)
    return make_token(agent, "trajectories:write", "trajectories:read", "evaluations:run")


def assert_error(response, status, code=None):
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"code", "message", "details"}
    if code:
        assert body["code"] == code
    return body


def error_locs(body):
    return [err["loc"] for err in body["details"]["errors"]]


# --- lone surrogates -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("item", "loc"),
    [
        (run_item(steps=[step_item(arguments={"name": SURROGATE})]), ["runs", 0, "steps", 0, "arguments"]),
        (run_item(steps=[step_item(arguments={SURROGATE: 1})]), ["runs", 0, "steps", 0, "arguments"]),
        (run_item(steps=[step_item(arguments={"a": [{"b": "x" + SURROGATE}]})]), ["runs", 0, "steps", 0, "arguments"]),
        (run_item(steps=[step_item(observation="ok " + SURROGATE)]), ["runs", 0, "steps", 0, "observation"]),
        (run_item(steps=[step_item(tool="t" + SURROGATE)]), ["runs", 0, "steps", 0, "tool"]),
        (run_item(task=SURROGATE), ["runs", 0, "task"]),
        (run_item(source=SURROGATE), ["runs", 0, "source"]),
        (run_item(external_id="\udfff"), ["runs", 0, "external_id"]),
        (run_item(metadata={"model": SURROGATE}), ["runs", 0, "metadata"]),
        (run_item(intent=SURROGATE), ["runs", 0, "intent"]),
    ],
)
def test_a_lone_surrogate_anywhere_in_a_run_answers_422_naming_the_field(api_client, writer, item, loc):
    body = assert_error(api_client.post(URL, {"runs": [item]}, token=writer), 422, "invalid")
    (error,) = [err for err in body["details"]["errors"] if err["loc"] == loc]
    assert "surrogate" in error["msg"] or error["type"] == "string_unicode"
    assert Run.objects.count() == 0 and Step.objects.count() == 0


def test_a_lone_surrogate_in_a_job_claim_answers_422_naming_the_field(api_client, writer):
    body = assert_error(api_client.post("/api/v1/jobs/claim", {"worker": SURROGATE}, token=writer), 422, "invalid")
    assert ["body", "worker"] in error_locs(body)


def test_valid_astral_text_is_stored_and_shown(api_client, writer, operator):
    item = run_item(task="emoji 😀 ok", steps=[step_item(arguments={"k": "𝔘😀"}, observation="😀")])
    response = api_client.post(URL, {"runs": [item]}, token=writer)
    assert response.status_code == 201
    run_id = response.json()["created_ids"][0]
    assert api_client.get(f"{URL}/{run_id}", token=writer).json()["steps"][0]["arguments"] == {"k": "𝔘😀"}
    assert logged_in(operator).get(f"/trajectories/{run_id}/").status_code == 200


def test_the_shared_validator_names_the_path_and_refuses_form_text():
    assert first_unencodable({"a": ["ok", {"b": SURROGATE}]}) == ["a", 1, "b"]
    assert first_unencodable({SURROGATE: 1}) == [SURROGATE.encode("utf-8", "backslashreplace").decode()]
    assert first_unencodable({"a": "😀"}) is None
    validate_encodable("fine 😀")
    with pytest.raises(DjangoValidationError):
        validate_encodable("x" + SURROGATE)


def test_a_form_that_reads_json_text_refuses_a_lone_surrogate():
    from graphs.evolution.forms import StartRunForm
    from graphs.evolution.sources import TWO_HOP

    data = {"rounds": 1, "evaluator": TWO_HOP, "gate": "objective", "objective": '{"a": "\\ud800"}', "context": "{}"}
    form = StartRunForm(data=data)
    assert not form.is_valid()
    assert "surrogate" in " ".join(form.errors["objective"])


def test_form_encodings_cannot_carry_a_lone_surrogate():
    # Django decodes form bodies with replacement characters: only JSON escapes can spell a lone surrogate.
    from django.http import QueryDict

    assert QueryDict("a=%ED%A0%80")["a"] == "\ufffd" * 3


# --- importers -----------------------------------------------------------------------------------------------------


def test_the_jsonl_importer_names_the_line_and_field_of_a_lone_surrogate(tmp_path: Path):
    path = tmp_path / "runs.jsonl"
    bad = run_item(steps=[step_item(arguments={"q": SURROGATE})])
    path.write_text(json.dumps(run_item()) + "\n\n" + json.dumps(bad) + "\n", encoding="utf-8")
    with pytest.raises(ImportFormatError, match=r"line 3: steps\[0\]\.arguments\.q .*surrogate"):
        read_run_items(path, fmt="jsonl")


def test_the_transcript_importer_names_the_record_of_a_lone_surrogate(tmp_path: Path):
    path = tmp_path / "chats.json"
    records = [{"messages": [{"role": "user", "content": "hi " + SURROGATE}]}]
    path.write_text(json.dumps(records), encoding="utf-8")
    with pytest.raises(ImportFormatError, match=r"record 0: messages\[0\]\.content .*surrogate"):
        read_run_items(path, fmt="openai-chat")


# --- no type coercion ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("item", "loc"),
    [
        (run_item(score="1"), ["runs", 0, "score"]),
        (run_item(score=True), ["runs", 0, "score"]),
        (run_item(steps=[step_item(input_tokens="10")]), ["runs", 0, "steps", 0, "input_tokens"]),
        (run_item(steps=[step_item(output_tokens=1.5)]), ["runs", 0, "steps", 0, "output_tokens"]),
        (run_item(steps=[step_item(cost="0.1")]), ["runs", 0, "steps", 0, "cost"]),
        (run_item(steps=[step_item(ok="true")]), ["runs", 0, "steps", 0, "ok"]),
        (run_item(steps=[step_item(ok=1)]), ["runs", 0, "steps", 0, "ok"]),
    ],
)
def test_strings_and_booleans_are_not_coerced_to_numbers(api_client, writer, item, loc):
    body = assert_error(api_client.post(URL, {"runs": [item]}, token=writer), 422, "invalid")
    assert loc in error_locs(body)
    assert Run.objects.count() == 0


def test_an_integer_score_and_cost_are_still_numbers(api_client, writer):
    response = api_client.post(URL, {"runs": [run_item(score=1, steps=[step_item(cost=0)])]}, token=writer)
    assert response.status_code == 201, response.content
    assert Run.objects.get().score == 1.0


def test_a_job_claim_does_not_coerce_lease_seconds(api_client, writer):
    body = assert_error(api_client.post("/api/v1/jobs/claim", {"lease_seconds": "60"}, token=writer), 422)
    assert ["body", "body", "lease_seconds"] in error_locs(body)


# --- unmatched API paths -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "PATCH", "DELETE"])
@pytest.mark.parametrize("path", ["/api/v1/nope", "/api/v1/trajectories/1/steps/2", "/api/v1/", "/api/v1/a%20b/"])
def test_an_unmatched_api_path_answers_the_json_404(client, writer, method, path):
    response = client.generic(
        method, path, "{}", content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {writer}"
    )
    assert_error(response, 404, "not_found")


def test_an_unmatched_api_path_answers_404_without_a_session_or_csrf_token(operator):
    assert_error(logged_in(operator).post("/api/v1/nope", {}), 404, "not_found")


# --- non-JSON bodies -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"])
def test_a_non_json_body_to_ingest_answers_400(client, writer, content_type):
    body = json.dumps({"runs": [run_item()]})
    response = client.generic("POST", URL, body, content_type=content_type, HTTP_AUTHORIZATION=f"Bearer {writer}")
    assert_error(response, 400, "unsupported_media_type")
    assert Run.objects.count() == 0


def test_a_non_json_body_to_a_ninja_body_operation_answers_400(client, writer):
    response = client.generic(
        "POST", "/api/v1/jobs/claim", "{}", content_type="text/plain", HTTP_AUTHORIZATION=f"Bearer {writer}"
    )
    assert_error(response, 400, "unsupported_media_type")


def test_json_with_a_charset_and_a_json_suffix_type_is_accepted(client, writer):
    for content_type in ["application/json; charset=utf-8", "application/vnd.waymark+json"]:
        body = json.dumps({"runs": [run_item()]})
        response = client.generic("POST", URL, body, content_type=content_type, HTTP_AUTHORIZATION=f"Bearer {writer}")
        assert response.status_code == 201, response.content


# --- Unicode normalization of run identity -------------------------------------------------------------------------


def test_visually_identical_run_identities_are_one_run(api_client, writer):
    decomposed = run_item(source="cafe\u0301", external_id="re\u0301sume\u0301-1")
    composed = run_item(source="caf\u00e9", external_id="r\u00e9sum\u00e9-1")
    first = api_client.post(URL, {"runs": [decomposed]}, token=writer)
    assert first.status_code == 201
    second = api_client.post(URL, {"runs": [composed]}, token=writer)
    assert second.status_code == 200 and second.json()["existing_ids"] == first.json()["created_ids"]
    run = Run.objects.get()
    assert (run.source, run.external_id) == ("caf\u00e9", "r\u00e9sum\u00e9-1")


def test_the_api_source_filter_compares_in_nfc(api_client, writer):
    assert api_client.post(URL, {"runs": [run_item(source="caf\u00e9")]}, token=writer).status_code == 201
    response = api_client.get(f"{URL}?source=cafe%CC%81", token=writer)
    assert len(response.json()["items"]) == 1


def test_both_spellings_in_one_batch_are_a_duplicate(api_client, writer):
    items = [run_item(external_id="e\u0301"), run_item(external_id="\u00e9")]
    body = assert_error(api_client.post(URL, {"runs": items}, token=writer), 422, "invalid")
    assert ["runs", 1, "external_id"] in error_locs(body)


def test_the_length_limit_applies_to_the_normalized_identity(api_client, writer):
    # U+0958 is excluded from composition: NFC turns it into two code points.
    body = assert_error(api_client.post(URL, {"runs": [run_item(external_id="\u0958" * 150)]}, token=writer), 422)
    assert ["runs", 0, "external_id"] in error_locs(body)


# --- fuzz: never a 5xx ---------------------------------------------------------------------------------------------

# Any code point (st.characters() leaves out the surrogate block even with codec=None, so it is drawn explicitly),
# combining marks for the identity, and mostly clean text so that some runs are stored and their pages drawn.
surrogate = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
clean_text = st.text(st.characters(codec=None), max_size=12)
any_text = st.text(
    st.one_of(st.characters(codec=None), surrogate, st.sampled_from(["e", "\u0301", "\u0958"])), max_size=12
)
fuzz_text = st.one_of(clean_text, clean_text, clean_text, any_text)
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), fuzz_text)
json_value = st.recursive(
    json_leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(fuzz_text, inner, max_size=3), max_leaves=6
)
fuzz_step = st.fixed_dictionaries(
    {"tool": fuzz_text},
    optional={
        "action_family": fuzz_text,
        "arguments": st.dictionaries(fuzz_text, json_value, max_size=3),
        "observation": fuzz_text,
        "ok": st.one_of(st.none(), st.booleans(), fuzz_text),
        "input_tokens": st.one_of(st.integers(-5, 2**32), fuzz_text),
        "cost": st.one_of(st.floats(allow_nan=False, allow_infinity=False), fuzz_text),
    },
)
fuzz_run = st.fixed_dictionaries(
    {"source": fuzz_text, "external_id": fuzz_text},
    optional={
        "task": fuzz_text,
        "intent": fuzz_text,
        "outcome": st.one_of(st.sampled_from(["success", "failure", "unknown"]), fuzz_text),
        "score": st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False), fuzz_text),
        "graph_workspace": fuzz_text,
        "graph_revision": fuzz_text,
        "metadata": st.dictionaries(fuzz_text, json_value, max_size=3),
        "steps": st.lists(fuzz_step, max_size=3),
    },
)


def test_fuzzed_runs_never_answer_a_5xx_in_the_api_or_the_pages(api_client, writer, operator):
    page_client = logged_in(operator)

    @settings(
        max_examples=150,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
    )
    @given(run=fuzz_run)
    # Both paths on every run, whatever the draw (150 drawn runs can all be refused): one stored, one refused.
    @example(run={"source": "fuzz-example", "external_id": "e\u0301", "steps": [{"tool": "search"}]})
    @example(run={"source": "fuzz-example", "external_id": "\ud800"})
    def never_a_server_error(run):
        response = api_client.post(URL, {"runs": [run]}, token=writer)
        assert response.status_code in (200, 201, 422), response.content
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        if response.status_code == 422:
            return
        body = response.json()
        (run_id,) = body["created_ids"] or body["existing_ids"]
        detail = api_client.get(f"{URL}/{run_id}", token=writer)
        assert detail.status_code == 200, detail.content
        stored = detail.json()
        assert unicodedata.is_normalized("NFC", stored["source"] + stored["external_id"])
        assert page_client.get(f"/trajectories/{run_id}/").status_code == 200
        assert api_client.get(URL, token=writer).status_code == 200
        assert page_client.get("/trajectories/").status_code == 200

    statuses: dict[int, int] = {}
    never_a_server_error()
    assert statuses.get(201) and statuses.get(422), statuses  # both paths were exercised
