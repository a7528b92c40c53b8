"""A hostile client against the real daemon over stdio: every request is answered, no frame makes it deaf.

One daemon (the tiny model) serves the malformed-message and bad-framing cases in turn; after each one a
well-formed request must still be answered. Separate short-lived daemons cover shutdown, a second
``initialize``, a closed stdout and SIGTERM. The framing is the test's own (tests/hostile_client.py).
"""

from __future__ import annotations

import contextlib
import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.hostile_client import HostileClient, frame, message

URI = "file:///tmp/hostile/doc.py"
GOOD_POSITION = {"textDocument": {"uri": URI}, "position": {"line": 0, "character": 1}, "context": {"triggerKind": 1}}

BAD_INLINE_PARAMS: list[Any] = [
    {**GOOD_POSITION, "position": {"line": -1, "character": 0}},
    {**GOOD_POSITION, "position": {"line": 0, "character": -3}},
    {**GOOD_POSITION, "position": {"line": None, "character": 0}},
    {**GOOD_POSITION, "position": {"line": 2**53, "character": 0}},
    {**GOOD_POSITION, "position": {"line": 2**64, "character": 0}},
    {"textDocument": {"uri": URI}, "context": {"triggerKind": 1}},
    {"textDocument": {"uri": URI}, "position": {"line": 0, "character": 0}},
    {**GOOD_POSITION, "textDocument": None},
    {**GOOD_POSITION, "textDocument": "file:///x.py"},
    {**GOOD_POSITION, "context": {"triggerKind": 99}},
    None,
    [],
    {},
]
UNKNOWN_METHODS = ["textDocument/hover", "textDocument/definition", "workspace/symbol", "textDocument/formatting"]
BAD_BODIES: list[bytes] = [
    b'{"jsonrpc": "2.0", "id": 5, "method": "workspace/executeCommand", "par',  # truncated
    b'{"jsonrpc": "2.0", "id": 6, "method": "\xff\xfe"}',  # invalid UTF-8
    b"[" * 100_000 + b"]" * 100_000,  # deep nesting
    b"not json at all",
]
INVALID_ENVELOPES: list[tuple[dict[str, Any], Any]] = [  # (message, the id its error must carry)
    ({"id": 7, "method": "workspace/executeCommand", "params": {}}, 7),  # no jsonrpc
    ({"jsonrpc": "1.0", "id": 8, "method": "workspace/executeCommand", "params": {}}, 8),
    ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "shutdown"}, None),  # object id
    ({"jsonrpc": "2.0", "id": [1], "method": "shutdown"}, None),
    ({"jsonrpc": "2.0", "id": 9, "method": 42, "params": {}}, 9),  # numeric method
    ({"jsonrpc": "2.0", "params": {}}, None),  # neither method nor id
]


@pytest.fixture(scope="module")
def daemon(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostileClient]:
    tmp = tmp_path_factory.mktemp("hostile")
    client = HostileClient(tmp)
    reply = client.initialize(None, {"model": str(tiny_model_dir), "maxNewTokens": 4, "indexEnabled": False})
    assert "result" in reply, reply
    assert client.wait_ready()["state"] == "ready"
    client.notify(
        "textDocument/didOpen",
        {"textDocument": {"uri": URI, "languageId": "python", "version": 1, "text": "import os\n"}},
    )
    yield client
    assert client.close() == 0
    assert client.garbage == []
    assert client.pop_ups() == [], client.pop_ups()


def _still_answers(client: HostileClient, method: str = "workspace/executeCommand") -> None:
    params = GOOD_POSITION if method == "textDocument/inlineCompletion" else {"command": "lookahead.stats"}
    reply = client.request(method, params, timeout=30)
    assert "result" in reply, reply


@pytest.mark.parametrize("params", BAD_INLINE_PARAMS, ids=[json.dumps(p)[:40] for p in BAD_INLINE_PARAMS])
def test_ill_typed_params_get_invalid_params(daemon: HostileClient, params: Any) -> None:
    reply = daemon.request("textDocument/inlineCompletion", params, timeout=10)
    assert reply["error"]["code"] == -32602, reply
    _still_answers(daemon, "textDocument/inlineCompletion")


@pytest.mark.parametrize("method", UNKNOWN_METHODS)
def test_unknown_methods_get_method_not_found(daemon: HostileClient, method: str) -> None:
    reply = daemon.request(method, {}, timeout=10)
    assert reply["error"]["code"] == -32601, reply


@pytest.mark.parametrize("body", BAD_BODIES, ids=["truncated", "utf8", "nesting", "text"])
def test_unparsable_bodies_get_parse_error(daemon: HostileClient, body: bytes) -> None:
    before = daemon.null_id_errors()
    daemon.send(frame(body))
    _still_answers(daemon)
    assert daemon.garbage == []  # every frame was a response, a request or a notification: the error has its id
    error = daemon.wait_for(lambda m: "id" in m and m["id"] is None and "error" in m, after=len(daemon.received) - 3)
    assert error["error"]["code"] == -32700
    assert daemon.null_id_errors() == before + 1


@pytest.mark.parametrize("payload,answer_id", INVALID_ENVELOPES, ids=[str(i) for i in range(len(INVALID_ENVELOPES))])
def test_invalid_envelopes_get_invalid_request(daemon: HostileClient, payload: dict[str, Any], answer_id: Any) -> None:
    before = daemon.null_id_errors()
    daemon.send(frame(json.dumps(payload)))
    _still_answers(daemon)
    if answer_id is None:
        assert daemon.null_id_errors() == before + 1
        reply = [m for m in daemon.received if m.get("id") is None and "error" in m][-1]
    else:
        reply = daemon.response(answer_id, timeout=5)
    assert reply["error"]["code"] == -32600, reply


def test_cancel_with_odd_ids_is_ignored(daemon: HostileClient) -> None:
    for odd in ({"x": 1}, [1, 2], None, 1.5, True):
        daemon.send(message("$/cancelRequest", {"id": odd}))
    daemon.send(message("$/cancelRequest", None))
    _still_answers(daemon)
    assert daemon.pop_ups() == []


def _sized(text: str) -> bytes:
    return text.encode("utf-8")


BODY = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 77,
        "method": "workspace/executeCommand",
        "params": {"command": "lookahead.stats", "arguments": ["é✓"]},
    }
)
BAD_FRAMES: dict[str, bytes] = {
    "short": frame(BODY, len(_sized(BODY)) - 9),
    "long": frame(BODY, len(_sized(BODY)) + 9),
    "much-longer": frame(BODY, len(_sized(BODY)) + 500),
    "characters": frame(BODY, len(BODY)),
    "no-header": _sized(BODY),
    "no-space": frame(BODY, header=b"Content-Length:%d\r\n\r\n" % len(_sized(BODY))),
    "lf-only": frame(BODY, header=b"Content-Length: %d\n\n" % len(_sized(BODY))),
    "negative": frame(BODY, header=b"Content-Length: -5\r\n\r\n"),
    "10^12": frame(BODY, header=b"Content-Length: 1000000000000\r\n\r\n"),
    "10^20": frame(BODY, header=b"Content-Length: 100000000000000000000\r\n\r\n"),
    "garbage-header": frame(BODY, header=b"Hello there\r\n\r\n"),
}


@pytest.mark.parametrize("name", list(BAD_FRAMES))
def test_reader_resynchronises_after_a_bad_frame(daemon: HostileClient, name: str) -> None:
    """The request right after a bad frame is read and answered; so is one sent later on its own."""
    msg_id = daemon.new_id()
    daemon.send(BAD_FRAMES[name] + message("workspace/executeCommand", {"command": "lookahead.stats"}, msg_id))
    assert "result" in daemon.response(msg_id, timeout=10)
    _still_answers(daemon)
    assert daemon.alive
    assert daemon.garbage == []  # a parse error for the bad frame (if any) carries "id": null


def test_lenient_frames_are_understood(daemon: HostileClient) -> None:
    """LF-only headers and a missing space are sloppy, not wrong: those requests are answered themselves."""
    for header in (b"Content-Length: %d\n\n", b"Content-Length:%d\r\n\r\n", b"content-length:   %d\r\n\r\n"):
        msg_id = daemon.new_id()
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": msg_id,
                "method": "workspace/executeCommand",
                "params": {"command": "lookahead.stats"},
            }
        ).encode()
        daemon.send(header % len(body) + body)
        assert "result" in daemon.response(msg_id, timeout=10)


def _short_daemon(
    tmp: Path, tiny_model_dir: Path, options: dict[str, Any] | None = None, root: Path | None = None
) -> HostileClient:
    client = HostileClient(tmp)
    init = {"model": str(tiny_model_dir), "maxNewTokens": 4, "indexEnabled": False, **(options or {})}
    assert "result" in client.initialize(root, init)
    return client


def test_second_initialize_refused_and_requests_after_shutdown_get_invalid_request(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    client = _short_daemon(tmp_path, tiny_model_dir)
    assert client.wait_ready()["state"] == "ready"
    threads = client.threads()
    for _ in range(3):
        again = client.request("initialize", {"processId": None, "rootUri": None, "capabilities": {}}, timeout=10)
        assert again["error"]["code"] == -32600, again
    time.sleep(0.5)
    assert client.threads() <= threads
    assert "result" in client.request("shutdown", None)
    for method, params in (("textDocument/inlineCompletion", GOOD_POSITION), ("shutdown", None)):
        after = client.request(method, params, timeout=10)
        assert after["error"]["code"] == -32600, after
    client.notify("exit")
    assert client.process.wait(20) == 0
    assert client.pop_ups() == []


def test_closed_stdout_stops_the_daemon_quietly(tiny_model_dir: Path, tmp_path: Path) -> None:
    client = _short_daemon(tmp_path, tiny_model_dir, {"enabled": False})
    client.close_output()
    with contextlib.suppress(BrokenPipeError):  # the daemon may be gone before the last of them
        for _ in range(50):
            client.send(message("workspace/executeCommand", {"command": "lookahead.stats"}, client.new_id()))
            time.sleep(0.02)
    assert client.process.wait(20) == 1  # no shutdown came first
    log = client.stderr()
    assert log.count("Traceback") == 0, log[-3000:]
    assert log.count("closed the connection") == 1, log[-3000:]


def test_sigterm_saves_the_index_snapshot(tiny_model_dir: Path, tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / ".git").mkdir(parents=True)
    for i in range(5):
        (root / f"m{i}.py").write_text(f"def f{i}(x):\n    return x + {i}\n")
    cache = tmp_path / "cache"
    client = HostileClient(tmp_path, env={"LOOKAHEAD_LSP_CACHE": str(cache)})
    assert "result" in client.initialize(root, {"model": str(tiny_model_dir), "maxNewTokens": 4})
    assert client.wait_index()["ready"]  # SIGTERM after the index is built: its snapshot is what is saved
    (root / "late.py").write_text("def late():\n    return 1\n")
    time.sleep(1.0)
    client.process.send_signal(signal.SIGTERM)
    assert client.process.wait(20) == 0
    snapshots = [p for p in cache.rglob("*") if p.is_file() and not p.name.endswith(".tmp")]
    assert snapshots, list(cache.rglob("*"))
    assert max(p.stat().st_mtime for p in snapshots) >= (root / "late.py").stat().st_mtime


def test_a_burst_of_pipelined_requests_is_all_answered(daemon: HostileClient) -> None:
    ids = [daemon.new_id() for _ in range(500)]
    daemon.send(b"".join(message("workspace/executeCommand", {"command": "lookahead.stats"}, i) for i in ids))
    for msg_id in ids:
        assert "result" in daemon.response(msg_id, timeout=60)


def test_nul_bytes_and_a_long_line_are_served(daemon: HostileClient) -> None:
    uri = "file:///tmp/hostile/odd.py"
    text = "x = '\x00\x00'\n" + "y = " + "1 + " * 500_000 + "1\n" + "def f():\n    "
    daemon.notify(
        "textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}
    )
    params = {**GOOD_POSITION, "textDocument": {"uri": uri}, "position": {"line": 3, "character": 4}}
    assert "result" in daemon.request("textDocument/inlineCompletion", params, timeout=60)
    daemon.notify("textDocument/didClose", {"textDocument": {"uri": uri}})


def test_requests_before_initialize_get_server_not_initialized(tmp_path: Path) -> None:
    """Every request but ``initialize`` is refused with -32002 before it; notifications are dropped."""
    client = HostileClient(tmp_path)
    early = [("textDocument/inlineCompletion", GOOD_POSITION), ("shutdown", None)]
    early += [("workspace/executeCommand", {"command": c}) for c in ("lookahead.stats", "lookahead.reindex")]
    for method, params in early:
        reply = client.request(method, params, timeout=60)
        assert reply["error"]["code"] == -32002, reply
    client.notify(
        "textDocument/didOpen",
        {"textDocument": {"uri": URI, "languageId": "python", "version": 1, "text": "import os\n"}},
    )
    assert "result" in client.initialize(None, {"enabled": False})
    assert client.stats()["openDocuments"] == 0  # the early didOpen was ignored
    assert client.process.stdin is not None
    client.process.stdin.close()
    assert client.process.wait(10) == 1  # the input ended without shutdown
    assert client.close() == 1
    assert client.garbage == []
    assert "Traceback" not in client.stderr()


def test_unknown_command_is_invalid_params_without_a_traceback(daemon: HostileClient) -> None:
    reply = daemon.request("workspace/executeCommand", {"command": "no.such.command", "arguments": [1]}, timeout=10)
    assert reply["error"]["code"] == -32602, reply
    _still_answers(daemon)
    log = daemon.stderr()
    assert "Traceback" not in log and " ERROR " not in log, log[-3000:]


def test_shutdown_during_start_up_with_progress_unanswered_logs_no_traceback(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """``shutdown`` while the model loads and the client has not answered ``window/workDoneProgress/create``:
    pygls cancels that request's future and the loader is cut off at exit; neither leaves a traceback."""
    client = HostileClient(tmp_path, answer_requests=False)
    assert "result" in client.initialize(None, {"model": str(tiny_model_dir), "indexEnabled": False}, progress=True)
    client.wait_for(lambda m: m.get("method") == "window/workDoneProgress/create", timeout=60)
    assert "result" in client.request("shutdown", None, timeout=10)
    client.notify("exit")
    assert client.process.wait(30) == 0
    assert client.close() == 0
    log = client.stderr()
    assert "Traceback" not in log and " ERROR " not in log, log[-3000:]
