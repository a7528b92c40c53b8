"""Progressive ghost text, end to end: the real daemon over stdio, the tiny model slowed by the slow-pass hook so
that every keystroke deadline passes while it decodes.

A cut completion is answered at once, decoding goes on, ``lookahead/completionReady`` follows and the
re-request is answered from the held continuation without a model run; a keystroke that does not type through
the held text cancels it and no stale notification arrives; typing through it keeps it going.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lookahead_lsp.evaluation.lsp_client import LspClient
from tests import slow_passes

READY = "lookahead/completionReady"
STATS = "lookahead/completionStats"
PASS_MS = 60  # each forward pass sleeps this long first: 40 tokens take 2.4 s or more
OPTIONS = {
    "maxNewTokens": 40,
    "decoder": "greedy",
    "lineDeadlineMs": 0,
    "multilineDeadlineMs": 0,
    "lineCapMs": 0,  # every deadline has passed at once: the first word end is shown, the rest streams in
    "backgroundPrefill": False,
    "indexEnabled": False,
}
TEXT = "def area(width, height):\n    return "


@pytest.fixture(scope="module")
def server(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LspClient]:
    tmp = tmp_path_factory.mktemp("progressive")
    (tmp / "ws" / ".git").mkdir(parents=True)
    client = LspClient([*slow_passes.command(PASS_MS), "serve"], stderr_path=tmp / "server.log")
    client.initialize(root=tmp / "ws", options={**OPTIONS, "model": str(tiny_model_dir)})
    assert client.wait_model()["state"] == "ready"
    yield client
    assert client.close() == 0


def _totals(client: LspClient) -> dict[str, Any]:
    return dict(client.command("lookahead.stats")["totals"])


def _cursor() -> tuple[int, int]:
    lines = TEXT.split("\n")
    return len(lines) - 1, len(lines[-1])


def _first_answer(server: LspClient, uri: str) -> tuple[str, str]:
    """The first answer's text and request id."""
    server.open(uri, TEXT)
    result = server.inline(uri, *_cursor())
    assert len(result["items"]) == 1
    item = result["items"][0]
    return str(item["insertText"]), str(item["command"]["arguments"][0])


def test_a_cut_completion_streams_in_and_is_answered_from_the_held_continuation(server: LspClient) -> None:
    uri = "file:///tmp/progressive/grow.py"
    before = len(server.notifications)
    shown, request_id = _first_answer(server, uri)
    ready = server.wait_notification(READY, lambda p: p["uri"] == uri and p["final"], timeout=60, after=before)
    line, character = _cursor()
    assert (
        ready["requestId"] == request_id
        and ready["version"] == 1
        and ready["position"] == {"line": line, "character": character}
    )
    whole = server.wait_notification(STATS, lambda p: p["requestId"] == ready["requestId"], after=before)
    assert whole["finishReason"] != "cancelled" and whole["newTokens"] > 1  # the run went on to its end
    of_run = [m["method"] for m in server.notifications[before:] if m["params"].get("requestId") == request_id]
    assert of_run[-1] == STATS and READY in of_run  # the stats end the run: a client that has them has every ready
    totals = _totals(server)

    again = server.inline(uri, line, character)  # asked again, as the client does on the notification
    grown = again["items"][0]["insertText"]
    assert grown.startswith(shown) and len(grown) > len(shown)
    after = _totals(server)
    assert after["heldAnswers"] == totals.get("heldAnswers", 0) + 1
    assert after["completed"] == totals["completed"] and after["newTokens"] == totals["newTokens"]  # no model run
    assert after["shownEarly"] >= 1


def test_a_keystroke_in_between_cancels_it_and_no_stale_notification_arrives(server: LspClient) -> None:
    uri = "file:///tmp/progressive/stale.py"
    before = len(server.notifications)
    shown, request_id = _first_answer(server, uri)
    line, character = _cursor()
    at = {"line": line, "character": character}
    typed = "q" if not shown.startswith("q") else "z"  # not what is shown: the held text is stale
    server.change(uri, 2, [{"range": {"start": at, "end": at}, "text": typed}])
    time.sleep(40 * PASS_MS / 1000.0 + 1.0)  # longer than the whole run would have taken
    assert [p for p in server.notifications_of(READY, before) if p["uri"] == uri] == []
    ended = [p for p in server.notifications_of(STATS, before) if p["requestId"] == request_id]
    assert ended == []  # cancelled: the run never reached its end (whose stats it would have sent)
    assert not server.command("lookahead.stats")["workerBusy"]


def test_typing_through_the_shown_text_keeps_it_streaming(server: LspClient) -> None:
    uri = "file:///tmp/progressive/typed.py"
    before = len(server.notifications)
    shown, _ = _first_answer(server, uri)
    line, character = _cursor()
    at = {"line": line, "character": character}
    server.change(uri, 2, [{"range": {"start": at, "end": at}, "text": shown[0]}])
    moved = character + len(shown[0].encode("utf-16-le")) // 2
    ready = server.wait_notification(READY, lambda p: p["uri"] == uri and p["final"], timeout=60, after=before)
    assert ready["version"] == 2 and ready["position"] == {"line": line, "character": moved}
    totals = _totals(server)
    again = server.inline(uri, line, moved)
    rest = again["items"][0]["insertText"]
    assert (shown[0] + rest).startswith(shown) and len(shown[0] + rest) > len(shown)
    assert _totals(server)["completed"] == totals["completed"]  # typed through the held text: no model run
