"""``lookahead-lsp serve --tcp``: LSP over a socket on 127.0.0.1; shutdown and exit end the process."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from typing import Any

from lookahead_lsp.evaluation.lsp_client import frame, read_message


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _connect(port: int, timeout: float = 60.0) -> socket.socket:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=30)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_tcp_session() -> None:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "lookahead_lsp.lsp_server.cli", "serve", "--tcp", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        with _connect(port) as sock:
            stream = sock.makefile("rb")

            def call(msg_id: int | None, method: str, params: Any) -> Any:
                message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
                if msg_id is not None:
                    message["id"] = msg_id
                sock.sendall(frame(json.dumps(message).encode()))
                while msg_id is not None:
                    reply = read_message(stream)
                    assert reply is not None
                    if reply.get("id") == msg_id and "method" not in reply:
                        return reply
                return None

            init = call(
                1,
                "initialize",
                {"processId": None, "rootUri": None, "capabilities": {}, "initializationOptions": {"enabled": False}},
            )
            assert "inlineCompletionProvider" in init["result"]["capabilities"]
            call(None, "initialized", {})
            call(
                None,
                "textDocument/didOpen",
                {"textDocument": {"uri": "file:///t.py", "languageId": "python", "version": 1, "text": "x = "}},
            )
            answer = call(
                2,
                "textDocument/inlineCompletion",
                {
                    "textDocument": {"uri": "file:///t.py"},
                    "position": {"line": 0, "character": 4},
                    "context": {"triggerKind": 1},
                },
            )
            assert answer["result"] == {"items": []}  # disabled: empty, at once
            assert call(3, "shutdown", None)["result"] is None
            call(None, "exit", None)
        assert process.wait(30) == 0
        assert process.stdout is not None and process.stdout.read() == b""  # nothing on stdout in TCP mode
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
