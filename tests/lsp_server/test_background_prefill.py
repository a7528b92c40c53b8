"""Background prefill end to end: ``lookahead-lsp serve`` over stdio with the tiny model.

A settled cursor gets its prompt prefilled in idle time, so the next keystroke there prefills a short tail;
a real request preempts a long background prefill at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lookahead_lsp.evaluation.lsp_client import LspClient
from lookahead_lsp.lsp_server.server import SETTLE_S
from lookahead_lsp.lsp_server.workspace_context import UPDATE_DELAY_S
from tests import slow_passes
from tests.lsp_server.test_server_e2e import STATS, _close_cleanly, _end_of, _start

LINES = "".join(f"def f_{i}(x):\n    return x * {i} + {i % 7}\n\n\n" for i in range(4000))


@pytest.fixture(scope="module")
def server(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LspClient]:
    tmp = tmp_path_factory.mktemp("warm")
    options = {"model": str(tiny_model_dir), "maxNewTokens": 6, "promptLayout": "spm", "tokenBudget": 1024}
    client = _start(tmp, options)
    assert client.wait_model()["state"] == "ready"
    assert client.wait_index()["ready"]
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
    # a long prompt (its prefix leaving the next keys room: context/prompt.py)
    assert not warmed["cancelled"] and warmed["prefilledTokens"] > 400, warmed
    assert (warmed["uri"], warmed["version"]) == (uri, 2), warmed  # which document version was prefilled
    _insert(server, uri, 3, line, character + 1, "i")
    before = len(server.notifications)
    server.inline(uri, line, character + 2)
    stats = server.wait_notification(STATS, after=before)
    assert stats["promptTokens"] > 400 and stats["prefilledTokens"] <= 4, stats


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


SLOW_PASS_MS = 400  # each pass sleeps this long first: a background prefill of 2 chunks takes 0.8 s or more


def test_a_keystroke_that_stops_a_moved_head_s_prefill_keeps_the_head_its_cache_holds(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """The user closes a file whose text on disk differs from the editor's (not saved), the document's snippets
    ranked again in the next pause differ, and that pause's background prefill (a moved head: the whole prompt)
    is stopped half-way by a keystroke. That keystroke's prompt keeps the old head, which its KV cache still
    holds: a short tail prefilled, not the whole prompt again (seconds on a CPU). A later pause's prefill goes
    on and moves the head, and the keystroke after it finds that cached."""
    workspace = tmp_path / "ws"
    (workspace / ".git").mkdir(parents=True)
    (workspace / "shapes.py").write_text(SHAPES + SHAPES.replace("_of", "_of_box"))  # what the disk holds
    server = LspClient([*slow_passes.command(SLOW_PASS_MS), "serve"], stderr_path=tmp_path / "server.log")
    options = {"model": str(tiny_model_dir), "maxNewTokens": 2, "decoder": "greedy", "tokenBudget": 1024}
    server.initialize(root=workspace, options=options)
    try:
        assert server.wait_model()["state"] == "ready"
        _stop_a_moved_head(server, (workspace / "shapes.py").as_uri())
    finally:
        _close_cleanly(server)


def _stop_a_moved_head(server: LspClient, helper: str) -> None:
    server.open(helper, SHAPES)  # the editor's text, not saved
    time.sleep(UPDATE_DELAY_S + SETTLE_S + 0.5)  # in the snippet index
    uri = "file:///tmp/lookahead-race/report.py"
    text = USES + "def report(width, height):\n    area = area_of(width, height)\n    return "
    server.open(uri, text)
    line, character = _end_of(text)
    first = _key(server, uri, 2, line, character, "a")
    _wait_warm(server, _totals(server).get("warmRuns", 0) + 1)  # the cursor's prompt, as the key built it

    cancelled = _totals(server).get("warmCancelled", 0)
    server.notify("textDocument/didClose", {"textDocument": {"uri": helper}})  # the disk's text is indexed
    deadline = time.monotonic() + UPDATE_DELAY_S + SETTLE_S + 20
    while not server.command("lookahead.stats")["workerWarming"]:  # the moved head's prefill, under way
        assert time.monotonic() < deadline, "no background prefill after the context changed"
        time.sleep(0.05)
    stopped = _key(server, uri, 3, line, character + 1, "r")
    print(f"first key {first}\nkey that stopped the prefill {stopped}")
    assert _totals(server)["warmCancelled"] == cancelled + 1
    assert stopped["promptTokens"] <= first["promptTokens"] + 1, (first, stopped)  # the old head, one key on
    assert stopped["prefilledTokens"] <= 4, stopped  # the cache still held it

    settled = _wait_whole_warm(server, lambda warmed: warmed["promptTokens"] > stopped["promptTokens"])
    moved = _key(server, uri, 4, line, character + 2, "e")
    print(f"pause {settled}\nkey after it {moved}")
    assert moved["promptTokens"] == settled["promptTokens"] > stopped["promptTokens"] + 20  # the new snippets
    assert moved["prefilledTokens"] <= 4, moved


def _wait_whole_warm(
    server: LspClient, wanted: Callable[[dict[str, Any]], bool], timeout: float = 30.0
) -> dict[str, Any]:
    """The first background prefill seen that ran to its end and is ``wanted``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        warmed = server.command("lookahead.stats").get("lastWarm") or {}
        if warmed and not warmed["cancelled"] and wanted(warmed):
            return dict(warmed)
        time.sleep(0.05)
    raise AssertionError("no such background prefill ran to its end")


def _key(server: LspClient, uri: str, version: int, line: int, character: int, typed: str) -> dict[str, Any]:
    """Type ``typed`` at the cursor and ask for a completion after it: the completion's stats."""
    _insert(server, uri, version, line, character, typed)
    before = len(server.notifications)
    server.inline(uri, line, character + len(typed))
    return dict(server.wait_notification(STATS, after=before, timeout=60))


USES = "".join(f"def use_{k}(width, height):\n    return area_of(width, height, scale={k})\n\n\n" for k in range(12))
SHAPES = "".join(f"def area_of(width, height, scale={k}):\n    return width * height * scale\n\n\n" for k in range(6))


def test_closing_a_long_file_does_not_leave_the_next_file_without_its_background_prefill(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """Closing a long file puts its text on disk back into the indexes: a second or more. A settle that finds that
    update pending skips its background prefill and waits for the update to settle the document again; that must
    come once the whole update is done (snippets and the workspace index), not between the two, when the
    update still counts as pending and the settle it starts would skip again, leaving no prefill at all."""
    workspace = tmp_path / "ws"
    (workspace / ".git").mkdir(parents=True)
    long_text = (LINES * 3)[:900_000]  # under the index's 1 MB file limit
    (workspace / "long.py").write_text(long_text)
    server = LspClient(stderr_path=tmp_path / "server.log")
    server.initialize(root=workspace, options={"model": str(tiny_model_dir), "maxNewTokens": 2, "tokenBudget": 1024})
    try:
        assert server.wait_model()["state"] == "ready"
        long_uri = (workspace / "long.py").as_uri()
        server.open(long_uri, long_text + "\n# edited\n")
        time.sleep(UPDATE_DELAY_S + SETTLE_S + 3.0)  # its text in the indexes
        runs = _totals(server).get("warmRuns", 0)
        server.notify("textDocument/didClose", {"textDocument": {"uri": long_uri}})
        uri = "file:///tmp/lookahead-warm/next.py"
        text = "def area(width, height):\n    return "
        server.open(uri, text)
        line, character = _end_of(text)
        started = time.monotonic()
        _insert(server, uri, 2, line, character, "w")  # settles while the long file's update is pending
        warmed = _wait_warm(server, runs + 1)
        print(f"background prefill {time.monotonic() - started:.1f} s after the key: {warmed}")
        assert (warmed["uri"], warmed["version"]) == (uri, 2) and not warmed["cancelled"], warmed
    finally:
        _close_cleanly(server)
