"""A small LSP client over a subprocess's stdio: the end-to-end tests and the typing-session replays use it.

It frames JSON-RPC messages with Content-Length headers, reads the server's output on a thread, matches
responses to requests by id, keeps every notification, and answers the server's own requests
(``window/workDoneProgress/create``, ``workspace/configuration``) with null.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import IO, Any

Message = dict[str, Any]


class ResponseError(Exception):
    def __init__(self, error: Message) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code = error.get("code")


def frame(payload: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(payload) + payload


def read_message(stream: IO[bytes]) -> Message | None:
    """One framed message, or None at the end of the stream."""
    length = None
    while True:
        line = stream.readline()
        if not line:
            return None
        line = line.strip()
        if not line:
            break
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    if length is None:
        raise ValueError("message without Content-Length")
    body = stream.read(length)
    return json.loads(body) if len(body) == length else None


def poll(read: Callable[[], Any], done: Callable[[Any], bool], timeout: float, every_s: float = 0.1) -> Any:
    """``read()`` every ``every_s`` until ``done`` of its value or ``timeout`` ran out; the last value read."""
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(every_s)


class LspClient:
    """Drives one server process. ``command`` defaults to ``python -m lookahead_lsp.lsp_server.cli serve``."""

    def __init__(
        self,
        command: Sequence[str] | None = None,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        stderr_path: Path | None = None,
    ) -> None:
        command = list(command or [sys.executable, "-m", "lookahead_lsp.lsp_server.cli", "serve"])
        self._stderr = open(stderr_path or os.devnull, "wb")  # noqa: SIM115 (closed in close())
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            cwd=cwd,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", **(env or {})},
            start_new_session=True,
        )
        self._ids = itertools.count(1)
        self._pending: dict[Any, Future[Any]] = {}
        self._write_lock = threading.Lock()
        self._cond = threading.Condition()
        self.notifications: list[Message] = []
        self.server_requests: list[Message] = []
        self._reader = threading.Thread(target=self._read_loop, name="lsp-client-reader", daemon=True)
        self._reader.start()

    # ---- sending -------------------------------------------------------------------------------------

    def send_raw(self, data: bytes) -> None:
        assert self.process.stdin is not None
        with self._write_lock:
            self.process.stdin.write(data)
            self.process.stdin.flush()

    def send(self, message: Message) -> None:
        self.send_raw(frame(json.dumps(message).encode("utf-8")))

    def request_async(self, method: str, params: Any = None) -> tuple[int, Future[Any]]:
        msg_id = next(self._ids)
        future: Future[Any] = Future()
        self._pending[msg_id] = future
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return msg_id, future

    def request(self, method: str, params: Any = None, timeout: float = 30.0) -> Any:
        _, future = self.request_async(method, params)
        return future.result(timeout)

    def notify(self, method: str, params: Any = None) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    # ---- receiving -----------------------------------------------------------------------------------

    def _read_loop(self) -> None:
        assert self.process.stdout is not None
        while True:
            try:
                message = read_message(self.process.stdout)
            except (ValueError, OSError):
                message = None
            if message is None:
                break
            self._dispatch(message)
        with self._cond:
            self._cond.notify_all()
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ConnectionError("the server closed its output"))

    def _dispatch(self, message: Message) -> None:
        if "method" in message and "id" in message:  # a request from the server
            with self._cond:
                self.server_requests.append(message)
            self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})
        elif "method" in message:
            with self._cond:
                self.notifications.append(message)
                self._cond.notify_all()
        else:
            future = self._pending.pop(message.get("id"), None)
            if future is None:
                return
            if "error" in message:
                future.set_exception(ResponseError(message["error"]))
            else:
                future.set_result(message.get("result"))

    def wait_notification(
        self, method: str, predicate: Callable[[Any], bool] = lambda params: True, timeout: float = 30.0, after: int = 0
    ) -> Any:
        """The params of the first notification ``method`` (from index ``after`` on) that satisfies ``predicate``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for message in self.notifications[after:]:
                    if message["method"] == method and predicate(message.get("params")):
                        return message.get("params")
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.process.poll() is not None:
                    raise TimeoutError(f"no {method} notification within {timeout} s")
                self._cond.wait(remaining)

    def completion_stats(self, request_id: str) -> dict[str, Any] | None:
        """The ``lookahead/completionStats`` params of one request, if the server has sent them."""
        for params in self.notifications_of("lookahead/completionStats"):
            if str(params.get("requestId")) == request_id:
                return dict(params)
        return None

    def notifications_of(self, method: str, after: int = 0) -> list[Any]:
        with self._cond:
            return [m.get("params") for m in self.notifications[after:] if m["method"] == method]

    # ---- LSP conveniences ----------------------------------------------------------------------------

    def initialize(
        self,
        root: Path | None = None,
        options: dict[str, Any] | None = None,
        inline: bool = True,
        progress: bool = True,
    ) -> Any:
        capabilities: dict[str, Any] = {
            "window": {"workDoneProgress": progress},
            "general": {"positionEncodings": ["utf-16"]},
            "textDocument": {"synchronization": {"dynamicRegistration": False}},
        }
        if inline:
            capabilities["textDocument"]["inlineCompletion"] = {"dynamicRegistration": False}
        params: dict[str, Any] = {
            "processId": os.getpid(),
            "rootUri": root.as_uri() if root else None,
            "capabilities": capabilities,
            "initializationOptions": options or {},
        }
        if root:
            params["workspaceFolders"] = [{"uri": root.as_uri(), "name": root.name}]
        result = self.request("initialize", params)
        self.notify("initialized", {})
        return result

    def open(self, uri: str, text: str, language_id: str = "python", version: int = 1) -> None:
        self.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": language_id, "version": version, "text": text}},
        )

    def change(self, uri: str, version: int, changes: list[dict[str, Any]]) -> None:
        self.notify(
            "textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": changes}
        )

    def inline_params(self, uri: str, line: int, character: int) -> dict[str, Any]:
        return {
            "textDocument": {"uri": uri},
            "position": {"line": line, "character": character},
            "context": {"triggerKind": 2},
        }

    def inline(self, uri: str, line: int, character: int, timeout: float = 60.0) -> Any:
        return self.request("textDocument/inlineCompletion", self.inline_params(uri, line, character), timeout)

    def command(self, name: str, *arguments: Any, timeout: float = 30.0) -> Any:
        return self.request("workspace/executeCommand", {"command": name, "arguments": list(arguments)}, timeout)

    def wait_model(self, state: str = "ready", timeout: float = 120.0) -> dict[str, Any]:
        """Poll ``lookahead.stats`` until the model reaches ``state`` (or failed)."""
        return poll(
            lambda: self.command("lookahead.stats")["model"], lambda m: m["state"] in (state, "failed"), timeout
        )

    def wait_index(self, timeout: float = 240.0) -> dict[str, Any]:
        """Poll ``lookahead.stats`` until the workspace index is ready (or ``timeout`` ran out: generous, a CI
        machine may be busy); its state."""
        return poll(lambda: self.command("lookahead.stats")["model"]["index"], lambda i: bool(i["ready"]), timeout)

    def close(self, timeout: float = 20.0) -> int:
        """Shutdown, exit and wait for the process; returns its exit status."""
        if self.process.poll() is None:
            try:
                self.request("shutdown", None, timeout)
                self.notify("exit")
            except (OSError, ConnectionError, TimeoutError):
                pass
        try:
            status = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            status = self.process.wait()
        if self.process.stdin:
            self.process.stdin.close()
        self._stderr.close()
        return status


def session_processes(session_id: int) -> list[int]:
    """Live processes (not zombies) in a session: the server and anything it started."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        state, session = fields[0], int(fields[3])
        if session == session_id and state != "Z":
            pids.append(int(entry.name))
    return pids
