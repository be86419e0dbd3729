"""Structured logs: JSON records carry the request id on a request and the task id inside a task."""

import io
import json
import logging
import logging.config

import pytest
from django.http import HttpResponse
from django.test import RequestFactory

from accounts.middleware import RequestIdMiddleware
from config.celery import app as celery_app
from config.logs import ContextFilter, JsonFormatter, logging_config

LOGGER = "waymark.tests.logging"


@celery_app.task(name="tests.config.log_from_a_task")
def log_from_a_task() -> None:
    logging.getLogger(LOGGER).warning("inside a task")


@pytest.fixture
def records():
    """The JSON lines written by a handler built like the production one (context filter + JSON formatter)."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(ContextFilter())
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger(LOGGER)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    finally:
        logger.removeHandler(handler)


def test_a_record_logged_during_a_request_carries_its_request_id(records):
    def view(request):
        logging.getLogger(LOGGER).info("serving %s", request.path, extra={"trajectory": 7})
        return HttpResponse("ok")

    request = RequestFactory().get("/somewhere", HTTP_X_REQUEST_ID="req-abc.123")
    response = RequestIdMiddleware(view)(request)

    assert response["X-Request-Id"] == "req-abc.123"
    [record] = records()
    assert record["request_id"] == "req-abc.123"
    assert record["message"] == "serving /somewhere"
    assert record["level"] == "INFO" and record["logger"] == LOGGER
    assert record["trajectory"] == 7  # extra= fields are kept
    assert "task_id" not in record
    assert record["time"].endswith("+00:00")


def test_a_record_logged_outside_any_request_or_task_has_no_ids(records):
    logging.getLogger(LOGGER).warning("idle")
    [record] = records()
    assert "request_id" not in record and "task_id" not in record and "task_name" not in record


def test_a_record_logged_inside_a_task_carries_the_task_id_and_name(records):
    result = log_from_a_task.delay()  # eager under the test settings

    [record] = records()
    assert record["message"] == "inside a task"
    assert record["task_id"] == result.id
    assert record["task_name"] == "tests.config.log_from_a_task"


def test_exceptions_are_one_json_line(records):
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger(LOGGER).exception("failed")
    [record] = records()
    assert "ValueError: boom" in record["exc_info"]


def test_the_json_logging_config_writes_json_to_stderr(capsys):
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    try:
        logging.config.dictConfig(logging_config("json", "INFO"))
        logging.getLogger(LOGGER).info("configured")
    finally:
        for handler in root.handlers[:]:
            root.removeHandler(handler)
        for handler in saved_handlers:
            root.addHandler(handler)
        root.setLevel(saved_level)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert json.loads(lines[-1])["message"] == "configured"


def test_plain_is_the_default_outside_production_and_other_formats_are_refused():
    assert logging_config("plain", "INFO")["handlers"]["console"]["formatter"] == "plain"
    with pytest.raises(ValueError):
        logging_config("xml", "INFO")
