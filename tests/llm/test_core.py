import json

import pytest

from llm.core import (
    ChatModel,
    MalformedModelOutput,
    ModelRequest,
    ScriptedChatModel,
    ScriptExhausted,
    Usage,
    extract_json_object,
    parse_script,
    require_list,
)


def request(role="refiner", *parts, system="sys", max_tokens=100):
    return ModelRequest(role=role, system=system, parts=parts or ("hello",), max_tokens=max_tokens)


class TestModelRequest:
    def test_it_keeps_parts_as_a_tuple_and_metadata_read_only(self):
        made = ModelRequest(role="r", system="", parts=["a", "b"], max_tokens=5, metadata={"k": 1})
        assert made.parts == ("a", "b")
        with pytest.raises(TypeError):
            made.metadata["k"] = 2

    @pytest.mark.parametrize(
        ("fields", "message"),
        [
            ({"role": " "}, "role"),
            ({"parts": "not a tuple"}, "parts"),
            ({"parts": ("a", 3)}, "parts"),
            ({"parts": ("", "  ")}, "non-blank"),
            ({"max_tokens": 0}, "max_tokens"),
            ({"max_tokens": True}, "max_tokens"),
            ({"system": None}, "system"),
            ({"metadata": ["x"]}, "metadata"),
        ],
    )
    def test_it_rejects_bad_fields_with_a_value_error(self, fields, message):
        base = {"role": "r", "system": "", "parts": ("a",), "max_tokens": 5}
        with pytest.raises(ValueError, match=message):
            ModelRequest(**{**base, **fields})

    def test_text_parts_leave_out_blank_parts(self):
        assert request("r", "a", " ", "b").text_parts == ("a", "b")


def test_usage_refuses_negative_counts_and_totals_the_rest():
    assert Usage(1, 2, 3).total_tokens == 6
    with pytest.raises(ValueError, match="output_tokens"):
        Usage(output_tokens=-1)


def test_malformed_model_output_is_a_runtime_error_not_a_value_error():
    assert issubclass(MalformedModelOutput, RuntimeError)
    assert not issubclass(MalformedModelOutput, ValueError)


class TestRequireList:
    def test_it_returns_the_rows(self):
        assert require_list({"intents": [{"a": 1}]}, "intents", "trajectory-intents-v1") == [{"a": 1}]
        assert require_list({"intents": []}, "intents", "r") == []

    @pytest.mark.parametrize("value", [[], "text", None, 3])
    def test_it_names_the_recipe_when_the_output_is_not_an_object(self, value):
        with pytest.raises(MalformedModelOutput) as raised:
            require_list(value, "intents", "trajectory-intents-v1")
        assert str(raised.value) == "trajectory-intents-v1 must return a JSON object"

    @pytest.mark.parametrize("value", [{}, {"intents": {"a": 1}}, {"intents": [{"a": 1}, 2]}, {"intents": "x"}])
    def test_it_names_the_key_when_the_item_is_not_an_array_of_objects(self, value):
        with pytest.raises(MalformedModelOutput) as raised:
            require_list(value, "intents", "trajectory-intents-v1")
        assert str(raised.value) == "trajectory-intents-v1.intents must be a JSON array of objects"


class TestExtractJsonObject:
    def test_it_reads_a_bare_object(self):
        assert extract_json_object('{"a": [1, {"b": "}"}]}') == {"a": [1, {"b": "}"}]}

    def test_it_prefers_a_fenced_block_over_braces_in_prose(self):
        text = 'Here {is} my answer:\n```json\n{"intents": []}\n```\nand {"other": 1}'
        assert extract_json_object(text) == {"intents": []}

    def test_it_skips_braces_that_do_not_parse(self):
        assert extract_json_object('use {x} then {"ok": true} then') == {"ok": True}

    def test_it_tolerates_an_unbalanced_brace_before_the_object(self):
        assert extract_json_object('{{{ {"a": 1}') == {"a": 1}

    @pytest.mark.parametrize("text", ["", "no json here", "[1, 2]", '{"a": ', None])
    def test_it_raises_malformed_output_when_there_is_no_object(self, text):
        with pytest.raises(MalformedModelOutput, match="refiner must return"):
            extract_json_object(text, recipe="refiner")


class TestScriptedChatModel:
    def test_it_replies_in_order_and_records_the_requests(self):
        model = ScriptedChatModel(["one", "two"])
        first, second = request("a", "x"), request("b", "y")
        assert model.complete(first).text == "one"
        reply = model.complete(second)
        assert reply.text == "two"
        assert reply.model == "scripted"
        assert reply.usage.output_tokens == 1
        assert reply.usage.input_tokens > 0
        assert model.requests == [first, second]
        assert isinstance(model, ChatModel)

    def test_it_raises_a_clear_error_when_the_script_runs_out(self):
        model = ScriptedChatModel(["only"])
        model.complete(request())
        with pytest.raises(ScriptExhausted, match=r"ran out of replies: request 2 \(role 'refiner'\).*reply 2 of 1"):
            model.complete(request())

    def test_it_starts_over_when_it_cycles(self):
        model = ScriptedChatModel(["a", "b"], cycle=True)
        assert [model.complete(request()).text for _ in range(5)] == ["a", "b", "a", "b", "a"]

    def test_it_answers_per_role_with_a_fallback(self):
        model = ScriptedChatModel({"refiner": ["R1", "R2"], "*": ["other"]}, cycle=True)
        texts = [model.complete(request(role)).text for role in ("refiner", "guidance", "refiner", "refiner")]
        assert texts == ["R1", "other", "R2", "R1"]

    def test_it_refuses_a_role_without_a_script_or_fallback(self):
        model = ScriptedChatModel({"refiner": ["R"]})
        with pytest.raises(ScriptExhausted, match="no replies for role 'guidance'"):
            model.complete(request("guidance"))

    @pytest.mark.parametrize("replies", ["just a string", ["ok", 3], {"r": "abc"}])
    def test_it_rejects_replies_that_are_not_strings(self, replies):
        with pytest.raises(ValueError, match="sequence of strings"):
            ScriptedChatModel(replies)

    def test_a_cycling_script_needs_a_reply(self):
        with pytest.raises(ValueError, match="at least one reply"):
            ScriptedChatModel([], cycle=True)

    def test_it_reads_a_json_array_file(self, tmp_path):
        path = tmp_path / "script.json"
        path.write_text(json.dumps(["first", '{"a": 1}']))
        model = ScriptedChatModel.from_file(path)
        assert [model.complete(request()).text for _ in range(2)] == ["first", '{"a": 1}']

    def test_it_reads_a_jsonl_file(self, tmp_path):
        path = tmp_path / "script.jsonl"
        path.write_text('"first"\n\n"second\\nline"\n')
        model = ScriptedChatModel.from_file(path, model_id="scripted-test")
        assert model.complete(request()).text == "first"
        assert model.complete(request()).text == "second\nline"
        assert model.model_id == "scripted-test"


class TestParseScript:
    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("", "no replies"),
            ("[1, 2]", "array of strings"),
            ("[unclosed", "not a valid JSON array"),
            ('"ok"\n{"a": 1}\n', "line 2 is not a JSON string"),
            ('"ok"\nnot json\n', "line 2 is not a JSON string"),
        ],
    )
    def test_it_names_what_is_wrong_with_a_script(self, text, message):
        with pytest.raises(ValueError, match=message):
            parse_script(text)


def test_deeply_nested_garbage_is_malformed_output_not_a_crash():
    import pytest

    from llm.core import MalformedModelOutput, extract_json_object

    with pytest.raises(MalformedModelOutput):
        extract_json_object('{"a": ' + "[" * 100_000)
