"""Pure core of the model gateway: request/response types, the ChatModel protocol, output checks, a scripted model.

No Django import, no I/O (ScriptedChatModel.from_file is the one convenience that reads a file).
"""

from .output import extract_json_object, require_list
from .protocol import (
    ChatModel,
    MalformedModelOutput,
    ModelError,
    ModelReplyIncomplete,
    ModelReplyInvalid,
    ModelRequest,
    ModelRequestRejected,
    ModelResponse,
    ModelTimeout,
    ModelUnavailable,
    Usage,
)
from .scripted import ScriptedChatModel, ScriptExhausted, parse_script

__all__ = [
    "ChatModel",
    "MalformedModelOutput",
    "ModelError",
    "ModelReplyIncomplete",
    "ModelReplyInvalid",
    "ModelRequest",
    "ModelRequestRejected",
    "ModelResponse",
    "ModelTimeout",
    "ModelUnavailable",
    "ScriptExhausted",
    "ScriptedChatModel",
    "Usage",
    "extract_json_object",
    "parse_script",
    "require_list",
]
