"""Background prefill end to end: ``lookahead-lsp serve`` over stdio with the tiny model.

A settled cursor gets its prompt prefilled in idle time, so the next keystroke there prefills a short tail;
a real request preempts a long background prefill at once.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lookahead_lsp.evaluation.lsp_client import LspClient
from lookahead_lsp.lsp_server.server import SETTLE_S
from lookahead_lsp.lsp_server.workspace_context import UPDATE_DELAY_S
from tests.lsp_server.test_server_e2e import STATS, _close_cleanly, _end_of, _start

LINES = "".join(f"def f_{i}(x):\n    return x * {i} + {i % 7}\n\n\n" for i in range(4000))


@pytest.fixture(scope="module")
def server(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LspClient]:
    tmp = tmp_path_factory.mktemp("warm")
    options = {"model": str(tiny_model_dir), "maxNewTokens": 6, "promptLayout": "spm", "tokenBudget": 1024}
    client = _start(tmp, options)
    assert client.wait_model()["state"] == "ready"
    deadline = time.monotonic() + 60
    while not client.command("lookahead.stats")["model"]["index"]["ready"] and time.monotonic() < deadline:
        time.sleep(0.2)
    yield client
    _close_cleanly(client)


def _totals(client: LspClient) -> dict[str, Any]:
    return dict(client.command("lookahead.stats")["totals"])


def _wait_warm(client: LspClient, runs: int, timeout: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        report = client.command("lookahead.stats")
        if report["totals"].get("warmRuns", 0) >= runs:
            return dict(report["lastWarm"])
        time.sleep(0.1)
    raise AssertionError("no background prefill ran")


def _insert(client: LspClient, uri: str, version: int, line: int, character: int, text: str) -> None:
    position = {"line": line, "character": character}
    client.change(uri, version, [{"range": {"start": position, "end": position}, "text": text}])


def test_keystroke_after_background_prefill_prefills_a_short_tail(server: LspClient) -> None:
    uri = "file:///tmp/lookahead-warm/typing.py"
    text = LINES[:20_000] + "def area(width, height):\n    return "
    server.open(uri, text)
    line, character = _end_of(text)
    runs = _totals(server).get("warmRuns", 0)
    _insert(server, uri, 2, line, character, "w")  # the cursor settles after "w": prefilled in idle time
    warmed = _wait_warm(server, runs + 1)
    assert not warmed["cancelled"] and warmed["prefilledTokens"] > 500, warmed
    assert (warmed["uri"], warmed["version"]) == (uri, 2), warmed  # which document version was prefilled
    _insert(server, uri, 3, line, character + 1, "i")
    before = len(server.notifications)
    server.inline(uri, line, character + 2)
    stats = server.wait_notification(STATS, after=before)
    assert stats["promptTokens"] > 500 and stats["prefilledTokens"] <= 4, stats


def test_typing_line_after_line_pays_for_a_moved_prompt_head_in_the_pauses(server: LspClient) -> None:
    """Lines typed one after another, a pause after each: the prompt's prefix outgrows its start every few
    lines, and each move re-prefills the whole prefix. The document's anchor (``context/anchors.py``) keeps the
    start while the prefix fits and moves it ahead of need in the pauses' background prefill, so no keystroke
    pays for a moved head. Another open document with a cursor is not prefilled when this one's text reaches
    the snippet index: that would take a KV cache (``kvSlots``) and cost the CPU this one's keystrokes need."""
    other = "file:///tmp/lookahead-warm/other_tab.py"
    other_text = LINES[20_000:24_000] + "def volume(a, b, c):\n    return "
    server.open(other, other_text)
    before = len(server.notifications)
    server.inline(other, *_end_of(other_text))  # a cursor there: it was the active document
    server.wait_notification(STATS, after=before)
    uri = "file:///tmp/lookahead-warm/lines.py"
    text = LINES[:20_000]
    server.open(uri, text)
    version, keystrokes, pauses = 1, [], []
    for k in range(16):
        line, character = _end_of(text)
        typed = f"\ndef g_{k}(y):" if k % 2 == 0 else f"\n    return y * {k} - {k % 5}\n"
        runs = _totals(server).get("warmRuns", 0)
        version += 1
        _insert(server, uri, version, line, character, typed)
        text += typed
        before = len(server.notifications)
        server.inline(uri, *_end_of(text))
        keystrokes.append(server.wait_notification(STATS, after=before)["prefilledTokens"])
        pauses.append(_wait_warm(server, runs + 1)["prefilledTokens"])
        if k % 4 == 3:  # a longer pause: the text rests and reaches the snippet index (a context change)
            time.sleep(UPDATE_DELAY_S + SETTLE_S + 0.5)
    print(f"keystrokes prefilled {keystrokes}, pauses {pauses}")
    assert max(keystrokes[1:]) <= 40, keystrokes  # a typed line and the healed tail, never the whole prefix
    assert max(pauses) > 100, pauses  # the prefix's start moved in a pause


def test_real_request_preempts_a_long_background_prefill(server: LspClient) -> None:
    server.notify("workspace/didChangeConfiguration", {"settings": {"lookahead": {"tokenBudget": 32768}}})
    big = "file:///tmp/lookahead-warm/big.py"
    small = "file:///tmp/lookahead-warm/small.py"
    server.open(small, "def scale(values, factor):\n    return ")
    server.open(big, LINES)
    line = LINES.count("\n") // 2
    before_totals = _totals(server)
    _insert(server, big, 2, line, 0, "y = ")  # settles: a background prefill of about 30k tokens
    deadline = time.monotonic() + SETTLE_S + 30
    while not server.command("lookahead.stats")["workerWarming"]:
        assert time.monotonic() < deadline, "the background prefill did not start"
        time.sleep(0.05)
    before = len(server.notifications)
    t0 = time.monotonic()
    server.inline(small, 1, 11)
    latency = time.monotonic() - t0
    stats = server.wait_notification(STATS, after=before)
    _wait_warm(server, before_totals.get("warmRuns", 0) + 1)
    totals = _totals(server)
    print(f"request during background prefill: {latency * 1000:.0f} ms (queue {stats['latencyMs']['queue']} ms)")
    assert totals["completed"] == before_totals.get("completed", 0) + 1  # the request ran
    # the long warm was preempted (a warm started for the small file meanwhile may be cancelled too)
    assert totals["warmCancelled"] >= before_totals.get("warmCancelled", 0) + 1
    assert stats["latencyMs"]["queue"] < 2000
    server.notify("workspace/didChangeConfiguration", {"settings": {"lookahead": {"tokenBudget": 1024}}})


def test_no_background_prefill_of_a_prompt_whose_context_is_about_to_change(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """Closing one file and typing in another at once (switching files): the closed file's text leaves the
    snippet index only after it rests (``UPDATE_DELAY_S``), and with it the new file's prompt changes. The
    background prefill waits for it: one prefill, of the prompt the next keystroke asks for, not one of a prompt
    about to go stale and then another. (A daemon of its own: no other open document settles meanwhile.)"""
    server = _start(tmp_path, {"model": str(tiny_model_dir), "maxNewTokens": 6, "tokenBudget": 1024})
    try:
        assert server.wait_model()["state"] == "ready"
        _switch_files(server)
    finally:
        _close_cleanly(server)


def _switch_files(server: LspClient) -> None:
    helper = "file:///tmp/lookahead-warm/shapes.py"
    server.open(helper, "def area_of(width, height):\n    return width * height\n\n\ndef perimeter(width, height):\n"
                        "    return 2 * (width + height)\n")  # fmt: skip
    time.sleep(UPDATE_DELAY_S + SETTLE_S + 0.5)  # in the snippet index
    uri = "file:///tmp/lookahead-warm/switch.py"
    text = "def area(width, height):\n    return "
    runs = _totals(server).get("warmRuns", 0)
    server.notify("textDocument/didClose", {"textDocument": {"uri": helper}})
    server.open(uri, text)
    line, character = _end_of(text)
    _insert(server, uri, 2, line, character, "w")  # settles at once, while the closed file's update waits
    warmed = _wait_warm(server, runs + 1)
    time.sleep(UPDATE_DELAY_S + SETTLE_S + 1.0)  # any second background prefill would have run by now
    assert _totals(server)["warmRuns"] == runs + 1, "a background prefill ran before the context settled"
    assert not warmed["cancelled"], warmed
    _insert(server, uri, 3, line, character + 1, "i")
    before = len(server.notifications)
    server.inline(uri, line, character + 2)
    stats = server.wait_notification(STATS, after=before)
    assert stats["prefilledTokens"] <= 4, stats  # the keystroke's prompt is the one prefilled in idle time
