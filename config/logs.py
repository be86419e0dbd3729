"""Structured logs: every record carries the request id and, inside a Celery task, the task id and name.

`ContextFilter` (attached to the console handler in settings.LOGGING) copies them onto each record, so both the
plain and the JSON format can use them. `JsonFormatter` writes one JSON object per line (WAYMARK_LOG_FORMAT=json,
the production default). The task fields come from Celery's own `current_task`, which eager runs set too.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

from accounts.request_context import current_request_id

# Attributes every LogRecord has; anything else on a record came from `extra=` and is written out as a field.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}
_CONTEXT = ("request_id", "task_id", "task_name")


class ContextFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = current_request_id.get()
        task_id = task_name = ""
        try:
            from celery import current_task

            if current_task:
                task_id = current_task.request.id or ""
                task_name = current_task.name or ""
        except Exception:  # pragma: no cover - logging must never fail because of the context lookup
            pass
        record.task_id = task_id
        record.task_name = task_name
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in _CONTEXT:
            value = getattr(record, key, "")
            if value:
                payload[key] = value
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in _CONTEXT and key not in payload:
                payload[key] = value
        if record.exc_info:
            payload["exc_info"] = self.formatException(record.exc_info)
        if record.stack_info:
            payload["stack_info"] = self.formatStack(record.stack_info)
        return json.dumps(payload, default=str, ensure_ascii=False)


def logging_config(log_format: str, level: str) -> dict:
    """The LOGGING dict for settings: one console handler, plain or JSON, with the context filter."""
    if log_format not in ("plain", "json"):
        raise ValueError(f"WAYMARK_LOG_FORMAT must be plain or json, not {log_format!r}")
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"context": {"()": "config.logs.ContextFilter"}},
        "formatters": {
            "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
            "json": {"()": "config.logs.JsonFormatter"},
        },
        "handlers": {
            "console": {"class": "logging.StreamHandler", "formatter": log_format, "filters": ["context"]},
        },
        "root": {"handlers": ["console"], "level": level},
    }
