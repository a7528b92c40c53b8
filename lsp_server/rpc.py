"""JSON-RPC envelopes: a message body becomes a checked message dict, or the error it must get.

Pure functions, no I/O. :func:`decode` parses a body and checks the envelope the way JSON-RPC 2.0
and LSP define it (an object, ``"jsonrpc": "2.0"``, an integer or string id, a string method);
what is wrong becomes a :class:`Refusal`: the error code, the message, the id to answer (None when
none can be told) and whether an answer is due at all (never for notifications).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
SERVER_NOT_INITIALIZED = -32002  # LSP: a request before ``initialize``

MsgId = int | str


@dataclass(frozen=True)
class Refusal:
    """A message that is not handled: the JSON-RPC error it gets (when ``answer``)."""

    code: int
    message: str
    msg_id: MsgId | None = None
    answer: bool = True


def valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def is_request(message: dict[str, Any]) -> bool:
    return "method" in message and "id" in message


def command_of(message: dict[str, Any]) -> str | None:
    """The command a ``workspace/executeCommand`` message names (None: another method, or no string command)."""
    params = message.get("params")
    if message.get("method") != "workspace/executeCommand" or not isinstance(params, dict):
        return None
    command = params.get("command")
    return command if isinstance(command, str) else None


def decode(body: bytes) -> dict[str, Any] | Refusal:
    """The message in ``body``, or why it is none (parse error or invalid request)."""
    try:
        data = json.loads(body.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        return Refusal(PARSE_ERROR, f"Parse error: {_short(exc)}")
    if not isinstance(data, dict):
        return Refusal(INVALID_REQUEST, f"Invalid request: a message is a JSON object, not {type(data).__name__}")
    msg_id = data.get("id")
    if "id" in data and not valid_id(msg_id):
        answer = "method" in data  # a request with a bad id: answered with a null id
        return Refusal(INVALID_REQUEST, "Invalid request: the id must be an integer or a string", None, answer)
    answer = "id" in data and "result" not in data and "error" not in data
    if data.get("jsonrpc") != "2.0":
        return Refusal(INVALID_REQUEST, 'Invalid request: "jsonrpc" must be "2.0"', msg_id, answer)
    if "method" in data and not isinstance(data["method"], str):
        return Refusal(INVALID_REQUEST, 'Invalid request: "method" must be a string', msg_id, answer)
    if "method" not in data and "id" not in data:
        return Refusal(INVALID_REQUEST, "Invalid request: neither a method nor an id", None)
    return data


def _short(exc: BaseException | str, limit: int = 200) -> str:
    text = (str(exc) or type(exc).__name__) if isinstance(exc, BaseException) else exc
    return text if len(text) <= limit else text[:limit] + "..."


def describe(exc: BaseException) -> str:
    """A one-line account of why params could not be read (cattrs' nested errors flattened)."""
    try:
        from cattrs import transform_error

        lines = transform_error(exc, path="params")  # type: ignore[arg-type]
    except Exception:  # not a cattrs error
        lines = [_short(exc)]
    return _short("; ".join(lines), 400)
