"""The one error path: every message body from the transport is answered or deliberately dropped.

:class:`RobustProtocol` is pygls' ``LanguageServerProtocol`` entered through :meth:`RobustProtocol.receive`
(bytes of one frame) instead of pygls' own reader. Before pygls dispatches anything, the message is
checked here, and a request that cannot be handled gets its JSON-RPC error: -32700 (no JSON), -32600
(no valid envelope; a second ``initialize``; anything after ``shutdown``), -32002 (anything but ``initialize``
before it; notifications then are dropped, ``exit`` excepted), -32601 (a method this server does not serve),
-32602 (params that do not fit the method's type, a position's fields checked strictly by
:mod:`lsp_server.params`; a ``workspace/executeCommand`` of a command this server does not have, answered
here because pygls would log the same answer as an error with its traceback). Every error
answer carries ``id``, ``null`` when the request's id could not be read (lsprotocol's converter would leave a
``None`` id out, and a frame without ``id`` is neither response nor notification to a strict client).
Notifications are never answered; their problems, like every refusal, are logged to stderr. Nothing here shows
a window message: the user is told about settings and the model elsewhere, never about a client's malformed
messages.
"""

from __future__ import annotations

import logging
from typing import Any

from lsprotocol import types
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.json_rpc import JsonRPCNotification, JsonRPCRequestMessage

from lookahead_lsp.lsp_server import rpc
from lookahead_lsp.lsp_server.params import position_problem
from lookahead_lsp.lsp_server.rpc import Refusal

log = logging.getLogger(__name__)


class RobustProtocol(LanguageServerProtocol):
    """pygls' LSP protocol behind the envelope checks of :mod:`lsp_server.rpc` (see the module docstring)."""

    _initialize_seen = False

    def receive(self, body: bytes) -> bool:
        """Handle one frame's body; False when it was no JSON at all (the framing may have slipped)."""
        decoded = rpc.decode(body)
        if isinstance(decoded, Refusal):
            self.refuse(decoded)
            return decoded.code != rpc.PARSE_ERROR
        refusal = self._refusal(decoded)
        if refusal is not None:
            self.refuse(refusal)
            return True
        try:
            message = self.structure_message(decoded)
        except Exception as exc:
            method = decoded.get("method", "a response")
            self.refuse(
                Refusal(
                    rpc.INVALID_PARAMS,
                    f"Invalid params for {method}: {rpc.describe(exc)}",
                    decoded.get("id"),
                    rpc.is_request(decoded),
                )
            )
            return True
        if decoded.get("method") == types.INITIALIZE:
            self._initialize_seen = True
        self.handle_message(message)
        return True

    def refuse(self, refusal: Refusal) -> None:
        """Log a refused message and, for a request, answer it with its error."""
        log.warning("refused message (id %r): %s", refusal.msg_id, refusal.message)
        if refusal.answer:
            error = types.ResponseError(code=refusal.code, message=refusal.message)
            self._send_data(types.ResponseErrorMessage(id=refusal.msg_id, error=error))

    def _serialize_message(self, data: Any) -> Any:
        """pygls' serialization, except that an error answer always has its ``id`` member (``null`` if unknown)."""
        serialized = super()._serialize_message(data)
        if isinstance(data, types.ResponseErrorMessage):
            serialized.setdefault("id", None)
        return serialized

    def _refusal(self, message: dict[str, Any]) -> Refusal | None:
        """Why this checked message is not handed to pygls, given the server's state; None to handle it."""
        method, request = message.get("method"), rpc.is_request(message)
        if method is None or method == types.EXIT:
            return None
        msg_id = message.get("id")
        if self._shutdown:
            return Refusal(rpc.INVALID_REQUEST, f"{method}: the server is shutting down", msg_id, request)
        if method == types.INITIALIZE and self._initialize_seen:
            return Refusal(rpc.INVALID_REQUEST, "initialize: the server is already initialized", msg_id, request)
        if method != types.INITIALIZE and not self._initialize_seen:
            return Refusal(rpc.SERVER_NOT_INITIALIZED, f"{method}: the server is not initialized yet", msg_id, request)
        if not self._serves(method):
            if request:
                return Refusal(rpc.METHOD_NOT_FOUND, f"Method not found: {method}", msg_id)
            return Refusal(rpc.METHOD_NOT_FOUND, f"notification {method} ignored", None, answer=False)
        command = rpc.command_of(message)
        if command is not None and command not in self.fm.commands:
            return Refusal(rpc.INVALID_PARAMS, f"Invalid params: no command {command!r}", msg_id, request)
        problem = position_problem(method, message.get("params"))
        if problem is not None:
            return Refusal(rpc.INVALID_PARAMS, f"Invalid params for {method}: {problem}", msg_id, request)
        return None

    def _serves(self, method: str) -> bool:
        return method == types.CANCEL_REQUEST or method in self.fm.builtin_features or method in self.fm.features

    def structure_message(self, data: dict[str, Any]) -> Any:
        """Requests and notifications as their lsprotocol types; errors propagate (no logged traceback)."""
        method = data.get("method")
        if method is None:
            return super().structure_message(data)
        fallback = JsonRPCRequestMessage if "id" in data else JsonRPCNotification
        return self._converter.structure(data, self.get_message_type(method) or fallback)

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        if not rpc.valid_id(msg_id):
            log.warning("$/cancelRequest with an id that is no integer or string: %r", msg_id)
            return
        super()._handle_cancel_notification(msg_id)
