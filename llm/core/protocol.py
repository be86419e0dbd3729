"""The model gateway's value types and the `ChatModel` protocol every model (real or scripted) implements."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable


class MalformedModelOutput(RuntimeError):
    """A model reply was rejected by a parser. Deliberately not a ValueError: bad caller input is a ValueError."""


class ModelError(RuntimeError):
    """A model call did not produce a usable reply.

    `diagnostics` say what was seen (HTTP status, content type, request id, stop reason, …: JSON-ready values), and
    `partial` is what came back when something did (an HTML page as text, a reply cut short with its usage): the
    ledger keeps both, so nothing the provider sent is lost and none of it is taken for an answer.
    """

    def __init__(
        self, message: str, *, diagnostics: Mapping[str, Any] | None = None, partial: ModelResponse | None = None
    ) -> None:
        super().__init__(message)
        self.diagnostics: dict[str, Any] = dict(diagnostics or {})
        self.partial = partial


class ModelTimeout(ModelError, TimeoutError):
    """The provider did not answer in time (after the allowed retries). Transient: a task may retry later."""


class ModelUnavailable(ModelError, ConnectionError):
    """The provider was unreachable, rate-limited or failing (429/5xx) after the allowed retries. Transient."""


class ModelReplyInvalid(ModelUnavailable):
    """A 2xx answer that is not a reply at all: an HTML page, malformed JSON, JSON of another shape. Something other
    than the model answered (a proxy, a gateway, a wrong ANTHROPIC_BASE_URL), as with a 5xx: transient."""


class ModelReplyIncomplete(ModelError):
    """The model replied, but not with a whole answer: cut at max_tokens (or the context window), refused, or
    without any text. `partial` holds what it said and the tokens it spent. Asking the same again tends to get the
    same, so this is not transient; it is never to be served as an answer."""


class ModelRequestRejected(ModelError):
    """The provider refused the request itself (a 4xx other than 429): retrying the same request will not help."""


@dataclass(frozen=True)
class ModelRequest:
    """One synchronous completion: a system text and user text parts sent as one user message. No tools, ever."""

    role: str
    system: str
    parts: tuple[str, ...]
    max_tokens: int
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.role, str) or not self.role.strip():
            raise ValueError("ModelRequest.role must be a non-empty string")
        if not isinstance(self.system, str):
            raise ValueError("ModelRequest.system must be a string")
        if isinstance(self.parts, str) or not all(isinstance(part, str) for part in self.parts):
            raise ValueError("ModelRequest.parts must be a sequence of strings")
        object.__setattr__(self, "parts", tuple(self.parts))
        if not any(part.strip() for part in self.parts):
            raise ValueError("ModelRequest.parts needs at least one non-blank text part")
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise ValueError("ModelRequest.max_tokens must be a positive integer")
        if not isinstance(self.metadata, Mapping):
            raise ValueError("ModelRequest.metadata must be a mapping")
        object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))

    @property
    def text_parts(self) -> tuple[str, ...]:
        """The parts worth sending: blank parts are left out."""
        return tuple(part for part in self.parts if part.strip())


@dataclass(frozen=True)
class Usage:
    """Tokens of one call. `input_tokens` are uncached input; cache reads are counted in `cached_input_tokens`."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0

    def __post_init__(self) -> None:
        for name in ("input_tokens", "output_tokens", "cached_input_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"Usage.{name} must be a non-negative integer")

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.cached_input_tokens


@dataclass(frozen=True)
class ModelResponse:
    text: str
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    stop_reason: str | None = None
    response_id: str = ""


@runtime_checkable
class ChatModel(Protocol):
    """What every model offers: one synchronous completion. `model_id` and `provider` name it in the ledger."""

    model_id: str
    provider: str

    def complete(self, request: ModelRequest) -> ModelResponse: ...
