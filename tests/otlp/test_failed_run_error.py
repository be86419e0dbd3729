"""A failed run keeps what ended it (`metadata.otlp.error`): the exception on the run or root span, else its status
description, else the first span in ERROR — the case of an instrumentor-only loop whose model call the provider
refused, where no tool step holds the error. Pure, no database."""

from otlp.core.mapping import map_trace
from otlp.core.spans import STATUS_ERROR, STATUS_OK
from tests.helpers.otlp_spans import OI, event, llm_out, span, with_events


def loop(root_status=STATUS_ERROR, root_message="", refused_message="", *root_events):
    """A span of the application's around two OpenInference model calls, the second refused."""
    root = with_events(span(1, start=0, end=9, status=root_status, message=root_message, name="loop"), *root_events)
    return [
        root,
        llm_out(2, 1, 1, [("c1", "lookup_policy", {"topic": "refunds"})]),
        span(3, 1, start=4, end=5, status=STATUS_ERROR, message=refused_message, **{OI: "LLM"}),
    ]


def error_of(spans):
    return map_trace(spans).run["metadata"]["otlp"].get("error")


def test_the_exception_on_the_root_span_is_the_runs_error():
    raised = event("exception", **{"exception.type": "openai.BadRequestError", "exception.message": "Error code: 400"})
    spans = loop(STATUS_ERROR, "BadRequestError: Error code: 400", "refused", raised)
    assert map_trace(spans).run["outcome"] == "failure"
    assert error_of(spans) == "openai.BadRequestError: Error code: 400"


def test_the_root_spans_status_description_without_an_exception_event():
    assert error_of(loop(STATUS_ERROR, "quota exceeded\ntraceback …", "refused")) == "quota exceeded"


def test_else_the_first_span_in_error():
    assert error_of(loop(STATUS_ERROR, "", "Error code: 400 - refused")) == "Error code: 400 - refused"


def test_a_run_that_did_not_fail_keeps_no_error():
    spans = loop(STATUS_OK, "", "Error code: 400 - refused")  # the loop recovered from the refused call
    assert map_trace(spans).run["outcome"] == "success"
    assert error_of(spans) is None
