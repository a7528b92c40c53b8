"""A typing session replayed through the real daemon: keystroke-to-completion latency as an editor sees it.

``lookahead-lsp serve`` runs as a subprocess over stdio JSON-RPC, with a copy of the corpus as its workspace
(the hole's file as the user has it before typing). The client initializes, waits until the model is ready,
opens the file and asks for an inline completion at the hole; then, for each character of the hole's code,
it sends ``didChange`` (the whole text) and ``textDocument/inlineCompletion`` and waits for the answer
(one keystroke at a time: a user pausing after each key). A keystroke's latency runs from the ``didChange``
to the answer. An answer with the same request id as the one before is "typed through": the daemon answered
from the completion already shown, without the model.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from evaluation.workloads import Corpus, Hole

READY_TIMEOUT_S = 900.0
ANSWER_TIMEOUT_S = 300.0


class LspClient:
    """A minimal JSON-RPC client over a subprocess's stdio (Content-Length framing)."""

    def __init__(self, command: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            command, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        self._next_id = 0
        self._answers: dict[int, queue.Queue[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()

    def _send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write(f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        stdin.flush()

    def notify(self, method: str, params: Any) -> None:
        self._send({"method": method, "params": params})

    def request(self, method: str, params: Any, timeout: float = ANSWER_TIMEOUT_S) -> Any:
        with self._lock:
            self._next_id += 1
            message_id = self._next_id
            self._answers[message_id] = queue.Queue(maxsize=1)
        self._send({"id": message_id, "method": method, "params": params})
        answer = self._answers[message_id].get(timeout=timeout)
        del self._answers[message_id]
        if "error" in answer:
            raise RuntimeError(f"{method} failed: {answer['error']}")
        return answer.get("result")

    def _read_loop(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        while (message := _read_message(stdout)) is not None:
            if "method" in message and "id" in message:  # a request from the server: accept it, empty
                self._send({"id": message["id"], "result": None})
            elif "id" in message and message["id"] in self._answers:
                self._answers[message["id"]].put(message)

    def close(self) -> None:
        try:
            self.request("shutdown", None, timeout=30)
            self.notify("exit", None)
            self.process.wait(timeout=30)
        except (RuntimeError, OSError, queue.Empty, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()


def _read_message(stream: IO[bytes]) -> dict[str, Any] | None:
    length = None
    while True:
        line = stream.readline()
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode("ascii").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    if length is None:
        return None
    return dict(json.loads(stream.read(length)))


def lsp_position(text: str) -> dict[str, int]:
    """The LSP position (UTF-16 code units) at the end of ``text``."""
    line = text.count("\n")
    last = text[text.rfind("\n") + 1 :]
    return {"line": line, "character": len(last.encode("utf-16-le")) // 2}


@dataclass(frozen=True)
class Keystroke:
    typed: int  # characters of the hole typed so far (0: the first request, before typing)
    latency_ms: float
    request_id: str | None  # None: an empty answer
    typed_through: bool
    text: str  # the completion shown


@dataclass
class ReplayResult:
    hole: Hole
    keystrokes: list[Keystroke] = field(default_factory=list)
    ready_s: float = 0.0  # from start to a ready model

    def summary(self) -> dict[str, Any]:
        latencies = [k.latency_ms for k in self.keystrokes]
        later = latencies[1:]
        return {
            "hole": self.hole.id,
            "keystrokes": len(latencies),
            "ready_s": round(self.ready_s, 1),
            "median_ms": round(statistics.median(latencies), 1) if latencies else None,
            "p90_ms": round(_percentile(latencies, 0.9), 1) if latencies else None,
            "first_ms": round(latencies[0], 1) if latencies else None,
            "later_median_ms": round(statistics.median(later), 1) if later else None,
            "typed_through": sum(k.typed_through for k in self.keystrokes),
            "empty": sum(k.request_id is None for k in self.keystrokes),
        }


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _wait_ready(client: LspClient) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        report = client.request("workspace/executeCommand", {"command": "lookahead.stats", "arguments": []})
        state = (report or {}).get("model", {}).get("state")
        if state == "ready":
            return
        if state == "failed":
            raise RuntimeError(f"the daemon's model failed to load: {report['model']}")
        time.sleep(1.0)
    raise TimeoutError("the daemon's model was not ready in time")


def replay(hole: Hole, corpus: Corpus, model: str, max_new_tokens: int, keystrokes: int = 20) -> ReplayResult:
    """Type the first ``keystrokes`` characters of ``hole.middle`` into the daemon, one at a time."""
    result = ReplayResult(hole)
    with tempfile.TemporaryDirectory(prefix="lookahead-replay-") as tmp:
        root = Path(tmp) / corpus.root.name
        shutil.copytree(corpus.root, root, ignore=shutil.ignore_patterns("__pycache__"))
        (root / hole.path).write_text(hole.text_before_typing, encoding="utf-8")
        uri = (root / hole.path).as_uri()
        started = time.perf_counter()
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        client = LspClient([sys.executable, "-m", "lsp_server.cli", "serve"], Path.cwd(), env)
        try:
            client.request(
                "initialize",
                {
                    "processId": os.getpid(),
                    "rootUri": root.as_uri(),
                    "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}],
                    "capabilities": {"textDocument": {"inlineCompletion": {}}},
                    "initializationOptions": {"model": model, "maxNewTokens": max_new_tokens},
                },
            )
            client.notify("initialized", {})
            _wait_ready(client)
            result.ready_s = time.perf_counter() - started
            client.notify(
                "textDocument/didOpen",
                {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": hole.text_before_typing}},
            )
            previous: str | None = None
            for typed in range(min(keystrokes, len(hole.middle)) + 1):
                t0 = time.perf_counter()
                before_cursor = hole.prefix + hole.middle[:typed]
                if typed:
                    text = before_cursor + hole.suffix
                    client.notify(
                        "textDocument/didChange",
                        {"textDocument": {"uri": uri, "version": typed + 1}, "contentChanges": [{"text": text}]},
                    )
                answer = client.request(
                    "textDocument/inlineCompletion",
                    {
                        "textDocument": {"uri": uri},
                        "position": lsp_position(before_cursor),
                        "context": {"triggerKind": 2},
                    },
                )
                latency = (time.perf_counter() - t0) * 1000.0
                items = (answer or {}).get("items", []) if isinstance(answer, dict) else answer or []
                request_id = items[0]["command"]["arguments"][0] if items else None
                text_shown = items[0]["insertText"] if items else ""
                through = request_id is not None and request_id == previous
                result.keystrokes.append(Keystroke(typed, latency, request_id, through, text_shown))
                previous = request_id
        finally:
            client.close()
    return result


_REPLAY_COLUMNS = {
    "hole": "hole",
    "keystrokes": "keystrokes",
    "median_ms": "median ms",
    "p90_ms": "p90 ms",
    "first_ms": "first ms",
    "later_median_ms": "later median ms",
    "typed_through": "typed through",
    "empty": "empty answers",
}


def replay_markdown(results: list[ReplayResult]) -> str:
    from evaluation.report import markdown_table

    rows = [[r.summary()[key] for key in _REPLAY_COLUMNS] for r in results]
    table = markdown_table(list(_REPLAY_COLUMNS.values()), rows)
    return "\n".join(["## Typing replay through the daemon", "", table, ""])
