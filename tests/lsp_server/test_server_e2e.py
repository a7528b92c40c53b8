"""End to end: ``lookahead-lsp serve`` as a real subprocess, spoken to over stdio with the tiny model (whose
continuation is forced by construction, tests/tiny_model.py: every completion here has text)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lookahead_lsp.evaluation.lsp_client import LspClient, ResponseError, frame, session_processes

STATS = "lookahead/completionStats"
SOURCE = '''"""A small module."""


def add(a, b):
    return a + b


def mul(a, b):
    return a * b


def area(width, height):
    '''


def _workspace(root: Path) -> Path:
    (root / ".git").mkdir(parents=True)
    (root / "util.py").write_text("def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n")
    (root / "main.py").write_text(SOURCE)
    return root


def _start(tmp: Path, options: dict[str, Any], inline: bool = True) -> LspClient:
    tmp.mkdir(parents=True, exist_ok=True)
    client = LspClient(stderr_path=tmp / "server.log")
    client.initialize(root=_workspace(tmp / "ws"), options=options, inline=inline)
    return client


def _close_cleanly(client: LspClient) -> None:
    session = client.process.pid
    status = client.close()
    assert status == 0
    deadline = time.monotonic() + 5
    while session_processes(session) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert session_processes(session) == []


def _end_of(text: str) -> tuple[int, int]:
    lines = text.split("\n")
    return len(lines) - 1, len(lines[-1].encode("utf-16-le")) // 2


@pytest.fixture(scope="module")
def server(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LspClient]:
    tmp = tmp_path_factory.mktemp("lsp")
    client = _start(tmp, {"model": str(tiny_model_dir), "maxNewTokens": 12, "decoder": "lookahead"})
    model = client.wait_model()
    assert model["state"] == "ready", model
    yield client
    _close_cleanly(client)


def _uri(name: str) -> str:
    return f"file:///tmp/lookahead-e2e/{name}"


def test_initialize_advertises_inline_completion(server: LspClient) -> None:
    server.open(_uri("caps.py"), "x = 1\n")
    assert server.inline(_uri("caps.py"), 0, 5) is not None  # handled (maybe empty)


def test_completion_then_kv_prefix_reuse(server: LspClient) -> None:
    uri = _uri("main.py")
    server.open(uri, SOURCE)
    before = len(server.notifications)
    result = server.inline(uri, *_end_of(SOURCE))
    assert len(result["items"]) == 1
    first = server.wait_notification(STATS, after=before)
    assert first["promptTokens"] > 0 and first["newTokens"] > 0 and first["steps"] > 0
    assert set(first["latencyMs"]) >= {"queue", "prompt", "prefill", "decode", "postprocess", "total"}
    assert {"acceptedPerStep", "tokensPerSecond", "hitsBySource", "prefilledTokens"} <= set(first)
    for item in result["items"]:
        assert item["command"]["command"] == "lookahead.accepted"
        assert item["command"]["arguments"] == [first["requestId"]]
        assert item["range"]["start"] == {"line": 12, "character": 4}

    # Type a character the completion did not start with: a new model run over the same prefix.
    shown = result["items"][0]["insertText"]
    typed = "z" if not shown.startswith("z") else "q"
    line, character = _end_of(SOURCE)
    position = {"line": line, "character": character}
    server.change(uri, 2, [{"range": {"start": position, "end": position}, "text": typed}])
    before = len(server.notifications)
    server.inline(uri, line, character + 1)
    second = server.wait_notification(STATS, after=before)
    assert second["promptTokens"] > 0
    assert second["prefilledTokens"] < second["promptTokens"], (first, second)
    print(
        f"KV reuse: first prefilled {first['prefilledTokens']}/{first['promptTokens']}, "
        f"second {second['prefilledTokens']}/{second['promptTokens']}"
    )


def test_typed_through_answers_without_the_model(server: LspClient) -> None:
    uri = _uri("typed.py")
    text = "def area(width, height):\n    return "
    server.open(uri, text)
    result = server.inline(uri, *_end_of(text))
    shown = result["items"][0]["insertText"]
    assert len(shown) >= 2, result
    line, character = _end_of(text)
    position = {"line": line, "character": character}
    server.change(uri, 2, [{"range": {"start": position, "end": position}, "text": shown[0]}])
    completed = server.command("lookahead.stats")["totals"].get("completed", 0)
    again = server.inline(uri, line, character + len(shown[0].encode("utf-16-le")) // 2)
    assert again["items"][0]["insertText"] == shown[1:]
    stats = server.command("lookahead.stats")["totals"]
    assert stats.get("completed", 0) == completed and stats["typedThrough"] >= 1


def test_utf16_positions_with_emoji(server: LspClient) -> None:
    uri = _uri("emoji.py")
    text = 's = "héllo 😀"\nt = s + '
    server.open(uri, text)
    # Insert after the emoji: character 12 in UTF-16 units (the emoji takes two).
    server.change(
        uri, 2, [{"range": {"start": {"line": 0, "character": 12}, "end": {"line": 0, "character": 12}}, "text": "!"}]
    )
    result = server.inline(uri, 1, 8)
    for item in result["items"]:
        assert item["range"]["start"] == {"line": 1, "character": 8}
    stats = server.command("lookahead.stats")
    assert stats["openDocuments"] >= 1
    # The edit landed after the emoji: a request right after it is in range (line 0 has 14 units now).
    assert server.inline(uri, 0, 14)["items"] is not None


def test_burst_of_requests_newest_wins(server: LspClient) -> None:
    uri = _uri("burst.py")
    text = "def scale(values, factor):\n    return "
    server.open(uri, text)
    server.command("lookahead.stats")
    totals_before = server.command("lookahead.stats")["totals"]
    line, character = _end_of(text)
    futures = []
    probe_ms = []
    for i in range(200):
        position = {"line": line, "character": character + i}
        server.change(uri, i + 2, [{"range": {"start": position, "end": position}, "text": "xy"[i % 2]}])
        futures.append(
            (
                time.monotonic(),
                server.request_async(
                    "textDocument/inlineCompletion", server.inline_params(uri, line, character + i + 1)
                )[1],
            )
        )
        if i % 50 == 25:
            t0 = time.monotonic()
            server.command("lookahead.stats", timeout=5)
            probe_ms.append((time.monotonic() - t0) * 1000)
        time.sleep(0.01)
    results = [future.result(60) for _, future in futures]
    assert all(isinstance(r["items"], list) for r in results)
    totals = server.command("lookahead.stats")["totals"]
    ran = totals.get("completed", 0) - totals_before.get("completed", 0)
    cancelled = totals.get("cancelled", 0) - totals_before.get("cancelled", 0)
    typed = totals.get("typedThrough", 0) - totals_before.get("typedThrough", 0)
    print(f"burst: {ran} model runs, {cancelled} cancelled, {typed} typed through; stats probe ms {probe_ms}")
    assert ran + cancelled + typed == 200
    assert 1 <= ran < 100 and cancelled > 100
    assert max(probe_ms) < 1000


def test_cancel_request_answers_empty_not_error(server: LspClient) -> None:
    server.open(_uri("busy.py"), SOURCE)
    server.open(_uri("cancel.py"), "def f():\n    ")
    # Keep the worker busy with a long generation, then queue and cancel a request on another document.
    server.notify("workspace/didChangeConfiguration", {"settings": {"lookahead": {"maxNewTokens": 200}}})
    _, busy = server.request_async(
        "textDocument/inlineCompletion", server.inline_params(_uri("busy.py"), *_end_of(SOURCE))
    )
    msg_id, future = server.request_async(
        "textDocument/inlineCompletion", server.inline_params(_uri("cancel.py"), 1, 4)
    )
    server.notify("$/cancelRequest", {"id": msg_id})
    t0 = time.monotonic()
    assert future.result(10) == {"items": []}
    assert time.monotonic() - t0 < 5
    assert isinstance(busy.result(60)["items"], list)
    server.notify("workspace/didChangeConfiguration", {"settings": {"lookahead": {"maxNewTokens": 12}}})


def test_bad_input_is_answered_and_the_daemon_goes_on(server: LspClient) -> None:
    uri = _uri("robust.py")
    server.open(uri, "x = 1\n")
    server.send_raw(frame(b"{this is not json"))
    server.send_raw(
        frame(
            json.dumps(
                {"jsonrpc": "2.0", "id": 9999, "method": "textDocument/inlineCompletion", "params": {"bogus": True}}
            ).encode()
        )
    )
    with pytest.raises(ResponseError) as unknown:
        server.request("lookahead/noSuchMethod", {})
    assert unknown.value.code == -32601
    server.notify("lookahead/noSuchNotification", {})
    assert server.inline(uri, 99, 0) == {"items": []}  # line past the end
    assert server.inline("file:///nowhere/unknown.py", 0, 0) == {"items": []}
    assert isinstance(server.inline(uri, 0, 999)["items"], list)  # past the line's end: its end (LSP)
    assert server.command("lookahead.stats")["model"]["state"] == "ready"


def test_five_megabyte_document(server: LspClient) -> None:
    uri = _uri("big.py")
    block = "def f_{i}(x):\n    return x + {i}\n\n\n"
    text = "".join(block.format(i=i) for i in range(5_000_000 // len(block.format(i=0)) + 1))
    assert len(text) >= 5_000_000
    server.open(uri, text)
    middle = text.count("\n", 0, len(text) // 2)
    position = {"line": middle, "character": 0}
    server.change(uri, 2, [{"range": {"start": position, "end": position}, "text": "y = "}])
    t0 = time.monotonic()
    result = server.inline(uri, middle, 4, timeout=60)
    assert isinstance(result["items"], list)
    assert server.command("lookahead.stats", timeout=10)["openDocuments"] >= 1
    print(f"5 MB document: completion answered in {time.monotonic() - t0:.2f} s")
    server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})


def test_invalid_configuration_is_shown_and_previous_values_stay(server: LspClient) -> None:
    before = len(server.notifications)
    server.notify("workspace/didChangeConfiguration", {"settings": {"lookahead": {"window": "big", "ngram": 6}}})
    message = server.wait_notification("window/showMessage", lambda p: "window" in p["message"], after=before)
    assert "lookahead.window must be an integer" in message["message"]
    settings = server.command("lookahead.stats")["settings"]
    assert settings["window"] == 1 and settings["ngram"] == 6
    server.notify("workspace/didChangeConfiguration", {"settings": {"lookahead": {"ngram": 8}}})


def test_commands(server: LspClient) -> None:
    stats = server.command("lookahead.stats")
    assert {"totals", "recent", "model", "settings"} <= set(stats)
    assert stats["model"]["index"]["enabled"] is True
    recent = stats["recent"]
    if recent:
        assert server.command("lookahead.accepted", recent[-1]["requestId"]) == {"known": True}
        assert server.command("lookahead.stats")["totals"]["accepted"] >= 1
    assert server.command("lookahead.accepted", "nope") == {"known": False}
    assert server.command("lookahead.reindex") == {"started": True}


def test_progress_was_reported(server: LspClient) -> None:
    created = [r for r in server.server_requests if r["method"] == "window/workDoneProgress/create"]
    assert created
    progress = server.notifications_of("$/progress")
    kinds = [p["value"]["kind"] for p in progress]
    assert "begin" in kinds and "end" in kinds


def test_model_failure_and_completion_fallback(tiny_model_dir: Path, tmp_path: Path) -> None:
    failing = _start(tmp_path / "a", {"model": str(tmp_path / "no-such-model")})
    try:
        assert failing.wait_model()["state"] == "failed"
        message = failing.wait_notification("window/showMessage", lambda p: "cannot load model" in p["message"])
        assert message["type"] == 1
        failing.open("file:///tmp/f.py", "x = ")
        assert failing.inline("file:///tmp/f.py", 0, 4) == {"items": []}
    finally:
        _close_cleanly(failing)

    (tmp_path / "b").mkdir()
    fallback = LspClient(stderr_path=tmp_path / "b" / "server.log")
    try:
        result = fallback.initialize(
            root=_workspace(tmp_path / "b"), options={"model": str(tiny_model_dir), "maxNewTokens": 8}, inline=False
        )
        fallback.open("file:///tmp/g.py", "def f(a):\n    return ")
        position = {"textDocument": {"uri": "file:///tmp/g.py"}, "position": {"line": 1, "character": 11}}
        t0 = time.monotonic()
        early = fallback.request("textDocument/completion", position)  # the model is still loading
        assert time.monotonic() - t0 < 5 and early["items"] == []
        assert fallback.command("lookahead.stats")["totals"]["notReady"] == 1
        capabilities = result["capabilities"]
        assert "completionProvider" in capabilities and "inlineCompletionProvider" in capabilities
        assert capabilities["textDocumentSync"]["change"] == 2  # incremental
        assert fallback.wait_model()["state"] == "ready"
        completion = fallback.request("textDocument/completion", position)
        assert completion["isIncomplete"] is True and len(completion["items"]) == 1
        for item in completion["items"]:
            assert item["label"].startswith("⇥ lookahead")
            assert item["textEdit"]["range"]["start"] == {"line": 1, "character": 11}
    finally:
        _close_cleanly(fallback)
