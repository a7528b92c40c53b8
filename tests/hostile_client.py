"""A hostile LSP client for the hardening tests: its own Content-Length framing over a daemon's raw stdio.

Nothing of the project's or pygls' protocol code is used: requests go out as bytes the test writes
(well-formed or not), and the daemon's output is parsed strictly here (each frame must be exactly a
``Content-Length`` header block and a JSON body), so a daemon that writes anything else fails the test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lookahead_lsp.evaluation.lsp_client import poll

Message = dict[str, Any]


def frame(body: bytes | str, length: int | None = None, header: bytes | None = None) -> bytes:
    """A frame with the right Content-Length (or ``length``, or a whole ``header`` block of the test's)."""
    data = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    head = header if header is not None else b"Content-Length: %d\r\n\r\n" % (len(data) if length is None else length)
    return head + data


def message(method: str | None, params: Any = None, msg_id: Any = None) -> bytes:
    payload: Message = {"jsonrpc": "2.0"}
    if msg_id is not None:
        payload["id"] = msg_id
    if method is not None:
        payload["method"] = method
        payload["params"] = params
    return frame(json.dumps(payload))


class HostileClient:
    """One daemon (``lookahead-lsp serve``) and everything it wrote, parsed strictly."""

    def __init__(
        self,
        tmp: Path,
        env: dict[str, str] | None = None,
        answer_requests: bool = True,
        wrapper: Sequence[str] = (),
    ) -> None:
        """``answer_requests``: answer the daemon's own requests (progress) with null, as an editor does;
        ``wrapper``: a command the daemon runs under (``strace ...``)."""
        self.answer_requests = answer_requests
        tmp.mkdir(parents=True, exist_ok=True)
        self.stderr_path = tmp / "daemon.stderr"
        self._stderr = open(self.stderr_path, "wb")  # noqa: SIM115 (closed in close())
        self.process = subprocess.Popen(
            [*wrapper, sys.executable, "-m", "lookahead_lsp.lsp_server.cli", "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", **(env or {})},
            start_new_session=True,
        )
        self.received: list[Message] = []
        self.garbage: list[bytes] = []  # anything on stdout that is not a well-formed frame
        self._cond = threading.Condition()
        self._write_lock = threading.Lock()
        self._next_id = 1000
        self._stop_reading = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    # ---- output ------------------------------------------------------------------------------------

    def _read(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        while not self._stop_reading:
            header = b""
            while not header.endswith(b"\r\n\r\n"):
                byte = stream.read(1)
                if not byte:
                    return self._ended()
                header += byte
            fields = dict(line.partition(b": ")[::2] for line in header[:-4].split(b"\r\n"))
            value = fields.pop(b"Content-Length", b"")
            if not value.isdigit() or set(fields) - {b"Content-Type"}:
                self.garbage.append(header)
                return self._ended()
            body = stream.read(int(value))
            try:
                parsed = json.loads(body)
            except ValueError:
                self.garbage.append(body)
                return self._ended()
            if not isinstance(parsed, dict) or ("method" not in parsed and "id" not in parsed):
                self.garbage.append(body)  # neither a request, a notification nor a response (JSON-RPC 2.0)
                continue
            if "method" in parsed and "id" in parsed and self.answer_requests:  # the daemon's own request: answer
                self.send(frame(json.dumps({"jsonrpc": "2.0", "id": parsed["id"], "result": None})))
            with self._cond:
                self.received.append(parsed)
                self._cond.notify_all()
        return self._ended()

    def close_output(self) -> None:
        """Stop reading and close the daemon's stdout here (the reader ends after one more answer)."""
        self._stop_reading = True
        self.request("workspace/executeCommand", {"command": "lookahead.stats"})
        self._reader.join(10)
        assert self.process.stdout is not None
        self.process.stdout.close()

    def _ended(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def wait_for(self, test: Callable[[Message], bool], timeout: float = 30.0, after: int = 0) -> Message:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for item in self.received[after:]:
                    if test(item):
                        return item
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no such message within {timeout} s (daemon alive: {self.alive})")
                self._cond.wait(min(left, 0.5))

    def response(self, msg_id: Any, timeout: float = 30.0) -> Message:
        return self.wait_for(lambda m: m.get("id") == msg_id and "method" not in m, timeout)

    def pop_ups(self) -> list[str]:
        with self._cond:
            return [m["params"]["message"] for m in self.received if m.get("method") == "window/showMessage"]

    def null_id_errors(self) -> int:
        with self._cond:
            return sum(1 for m in self.received if "error" in m and "id" in m and m["id"] is None)

    # ---- input -------------------------------------------------------------------------------------

    def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        with self._write_lock:
            self.process.stdin.write(data)
            self.process.stdin.flush()

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def request(self, method: str, params: Any = None, timeout: float = 30.0) -> Message:
        msg_id = self.new_id()
        self.send(message(method, params, msg_id))
        return self.response(msg_id, timeout)

    def notify(self, method: str, params: Any = None) -> None:
        self.send(message(method, params))

    def initialize(self, root: Path | None, options: dict[str, Any], progress: bool = False) -> Message:
        """``initialize`` and ``initialized``; ``progress``: the client supports work-done progress."""
        capabilities: Message = {"textDocument": {"inlineCompletion": {}}, "general": {"positionEncodings": ["utf-16"]}}
        if progress:
            capabilities["window"] = {"workDoneProgress": True}
        params = {
            "processId": os.getpid(),
            "rootUri": root.as_uri() if root else None,
            "capabilities": capabilities,
            "initializationOptions": options,
        }
        reply = self.request("initialize", params, timeout=60)
        self.notify("initialized", {})
        return reply

    def stats(self) -> dict[str, Any]:
        return dict(self.request("workspace/executeCommand", {"command": "lookahead.stats", "arguments": []})["result"])

    def wait_ready(self, timeout: float = 120.0) -> dict[str, Any]:
        return dict(poll(lambda: self.stats()["model"], lambda m: m["state"] in ("ready", "failed"), timeout))

    def wait_index(self, timeout: float = 240.0) -> dict[str, Any]:
        """The workspace index's state once it is ready (or when ``timeout`` ran out: generous, a CI machine
        may be busy; a ready index returns at once)."""
        return dict(poll(lambda: self.stats()["model"]["index"], lambda i: bool(i["ready"]), timeout, 0.2))

    def indexed_files(self) -> int:
        return int(self.stats()["model"]["index"]["stats"]["files"])

    # ---- the process -------------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def threads(self) -> int:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        return int(next(line.split()[1] for line in status.splitlines() if line.startswith("Threads:")))

    def rss_mb(self) -> float:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))) / 1024

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def close(self, timeout: float = 20.0) -> int | None:
        """Shutdown and exit if it still runs; the exit status."""
        if self.alive:
            try:
                self.request("shutdown", None, timeout=timeout)
                self.notify("exit")
            except (OSError, TimeoutError):
                pass
        try:
            status = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            status = self.process.wait()
        self._stderr.close()
        return status
