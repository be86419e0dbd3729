"""A model that answers from a script: for tests, the offline demo and `scripted:FILE` model specs."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from .protocol import ModelError, ModelRequest, ModelResponse, Usage

DEFAULT_ROLE = "*"


class ScriptExhausted(ModelError):
    """A scripted model was asked for more replies than its script holds."""


def parse_script(text: str) -> list[str]:
    """Replies from a script's text: a JSON array of strings, or JSONL with one JSON string per line."""
    stripped = text.strip()
    if not stripped:
        raise ValueError("the script holds no replies")
    if stripped.startswith("["):
        try:
            replies = json.loads(stripped)
        except ValueError as error:
            raise ValueError(f"the script is not a valid JSON array: {error}") from None
        if not isinstance(replies, list) or not all(isinstance(reply, str) for reply in replies):
            raise ValueError("a JSON script must be an array of strings")
        return replies
    replies = []
    for number, line in enumerate(stripped.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            reply = json.loads(line)
        except ValueError:
            raise ValueError(f"script line {number} is not a JSON string") from None
        if not isinstance(reply, str):
            raise ValueError(f"script line {number} is not a JSON string")
        replies.append(reply)
    return replies


def estimate_tokens(text: str) -> int:
    """A rough, deterministic token count (four characters a token) for models that report no usage."""
    return math.ceil(len(text) / 4)


class ScriptedChatModel:
    """Replies in order from a list, or per request role from a mapping (key "*" serves every other role).

    Every request is kept in `requests`. With `cycle=True` the replies start over when they run out; without it
    the next request raises ScriptExhausted.
    """

    provider = "scripted"

    def __init__(
        self,
        replies: Sequence[str] | Mapping[str, Sequence[str]],
        *,
        cycle: bool = False,
        model_id: str = "scripted",
    ) -> None:
        scripts = dict(replies) if isinstance(replies, Mapping) else {DEFAULT_ROLE: replies}
        for role, script in scripts.items():
            if isinstance(script, str) or not all(isinstance(reply, str) for reply in script):
                raise ValueError(f"the replies for role {role!r} must be a sequence of strings")
            if cycle and not script:
                raise ValueError(f"a cycling script needs at least one reply for role {role!r}")
        self._scripts = {role: list(script) for role, script in scripts.items()}
        self._served = dict.fromkeys(self._scripts, 0)
        self.cycle = cycle
        self.model_id = model_id
        self.requests: list[ModelRequest] = []

    @classmethod
    def from_file(cls, path: str | Path, **options) -> ScriptedChatModel:
        return cls(parse_script(Path(path).read_text(encoding="utf-8")), **options)

    def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        key = request.role if request.role in self._scripts else DEFAULT_ROLE
        script = self._scripts.get(key)
        if script is None:
            raise ScriptExhausted(f"the scripted model has no replies for role {request.role!r}")
        served = self._served[key]
        if served >= len(script) and not self.cycle:
            raise ScriptExhausted(
                f"the scripted model ran out of replies: request {len(self.requests)} (role {request.role!r}) "
                f"asked for reply {served + 1} of {len(script)}"
            )
        text = script[served % len(script)]
        self._served[key] = served + 1
        prompt = request.system + "".join(request.parts)
        usage = Usage(input_tokens=estimate_tokens(prompt), output_tokens=estimate_tokens(text))
        return ModelResponse(
            text=text,
            usage=usage,
            model=self.model_id,
            stop_reason="end_turn",
            response_id=f"scripted-{len(self.requests)}",
        )
