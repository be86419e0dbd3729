"""File importers: read a file into run items in the ingest API format (no writes; the service stores them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from common.text import SURROGATE_MESSAGE, dotted, first_unencodable

from .core.openai_chat import TranscriptError, transcript_to_run_item

FORMATS = ("jsonl", "openai-chat")
DEFAULT_OPENAI_SOURCE = "openai-chat"


class ImportFormatError(ValueError):
    """The file cannot be read in the requested format; the message names the line or record."""


def _require_encodable(record: Any, where: str) -> Any:
    """A JSON escape such as "\\ud800" decodes to a lone surrogate, which no database can store: name where it is."""
    path = first_unencodable(record)
    if path is not None:
        raise ImportFormatError(f"{where}: {dotted(path) or 'the record'} {SURROGATE_MESSAGE}")
    return record


def _json_lines(text: str) -> list[Any]:
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise ImportFormatError(f"line {number} is not valid JSON: {exc}") from None
        records.append(_require_encodable(record, f"line {number}"))
    return records


def _json_array_or_lines(text: str) -> list[Any]:
    if text.lstrip().startswith("["):
        try:
            return json.loads(text)
        except ValueError as exc:
            raise ImportFormatError(f"the file is not a valid JSON array: {exc}") from None
    return _json_lines(text)


def read_run_items(path: Path, *, fmt: str, source: str | None = None) -> list[dict[str, Any]]:
    """Run items from a jsonl file (one API run item per line) or an OpenAI-chat transcript file (array or JSONL).

    `source` names the source of every run: it replaces the items' own source in jsonl, and defaults to
    "openai-chat" for transcripts.
    """
    if fmt not in FORMATS:
        raise ImportFormatError(f"unknown format {fmt!r} (use {' or '.join(FORMATS)})")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportFormatError(f"cannot read {path}: {exc}") from None
    if fmt == "jsonl":
        items = _json_lines(text)
        if source:
            items = [{**item, "source": source} if isinstance(item, dict) else item for item in items]
        return items
    items = []
    for index, record in enumerate(_json_array_or_lines(text)):
        _require_encodable(record, f"record {index}")
        try:
            items.append(transcript_to_run_item(record, source=source or DEFAULT_OPENAI_SOURCE))
        except TranscriptError as exc:
            raise ImportFormatError(f"record {index}: {exc}") from None
    return items
