"""Hostile documents and settings against the real daemon over stdio (the tiny model, the test's own framing).

A bad ``logFile`` is a message, never a failed ``initialize`` or a half-applied change; garbage settings are
one message per change, and a bad include pattern never empties the index; a lone surrogate in a document
and a document with lone ``\\r`` line breaks still get completions.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.hostile_client import HostileClient

URI = "file:///tmp/hostile-docs/"


@pytest.fixture(scope="module")
def daemon(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostileClient]:
    """Started with a logFile in a folder that does not exist."""
    tmp = tmp_path_factory.mktemp("hostile-docs")
    client = HostileClient(tmp)
    options = {
        "model": str(tiny_model_dir),
        "maxNewTokens": 4,
        "indexEnabled": False,
        "logFile": str(tmp / "missing" / "lookahead.log"),
    }
    reply = client.initialize(None, options)
    assert "result" in reply, reply
    assert client.wait_ready()["state"] == "ready"
    yield client
    assert client.close() == 0


def _open(client: HostileClient, name: str, text: str) -> str:
    uri = URI + name
    client.notify(
        "textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}
    )
    return uri


def _inline(client: HostileClient, uri: str, line: int, character: int) -> dict[str, Any]:
    params = {
        "textDocument": {"uri": uri},
        "position": {"line": line, "character": character},
        "context": {"triggerKind": 1},
    }
    return client.request("textDocument/inlineCompletion", params, timeout=60)


def test_bad_log_file_at_initialize_is_a_message(daemon: HostileClient) -> None:
    pop_ups = daemon.pop_ups()
    assert any("logFile" in text and "missing" in text for text in pop_ups), pop_ups
    assert daemon.stats()["settings"]["logFile"] is None  # kept the previous (none)


def test_bad_log_file_with_a_model_change_applies_the_rest(
    daemon: HostileClient, tiny_model_dir: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other-model"
    shutil.copytree(tiny_model_dir, other)
    daemon.notify(
        "workspace/didChangeConfiguration", {"settings": {"lookahead": {"model": str(other), "logFile": str(tmp_path)}}}
    )  # a directory
    deadline = time.monotonic() + 120
    while True:
        stats = daemon.stats()
        model = stats["model"]
        if model.get("spec") == str(other) and model["state"] == "ready" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert stats["settings"]["model"] == str(other)
    assert model["state"] == "ready" and model.get("spec") == str(other), model
    assert stats["settings"]["logFile"] is None
    assert any(str(tmp_path) in text for text in daemon.pop_ups())


def test_lone_surrogate_does_not_break_later_completions(daemon: HostileClient) -> None:
    uri = _open(daemon, "surrogate.py", "def f(x):\n    s = '\ud800'\n    return ")
    for _ in range(3):
        reply = _inline(daemon, uri, 2, 11)
        assert "result" in reply, reply
    daemon.notify(
        "textDocument/didChange",
        {
            "textDocument": {"uri": uri, "version": 2},
            "contentChanges": [
                {
                    "range": {"start": {"line": 2, "character": 11}, "end": {"line": 2, "character": 11}},
                    "text": "\udc00x",
                }
            ],
        },
    )
    reply = _inline(daemon, uri, 2, 13)
    assert "result" in reply, reply


def test_carriage_return_lines_are_lines(daemon: HostileClient) -> None:
    uri = _open(daemon, "old_mac.py", "def f(x):\r    return x\r\rdef g(y):\r    ")
    before = daemon.stats()["totals"]
    reply = _inline(daemon, uri, 4, 4)
    assert "result" in reply, reply
    after = daemon.stats()["totals"]
    assert after.get("invalid", 0) == before.get("invalid", 0)  # the position exists
    assert after.get("completed", 0) == before.get("completed", 0) + 1


GARBAGE_SETTINGS: dict[str, Any] = {
    "window": "big",
    "ngram": True,
    "maxNewTokens": -1,
    "decoder": "beam",
    "device": "tpu",
    "dtype": 3,
    "threads": 0,
    "tokenBudget": "lots",
    "promptLayout": [],
    "enabled": "yes",
    "logFile": 7,
    "remote": 5,
    **{f"noSuchSetting{i}": i for i in range(12)},
    "include": ["["],
    "exclude": ["[z-a]", "*.md"],
}


def test_garbage_settings_are_one_message_per_change_and_keep_the_index(tiny_model_dir: Path, tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / ".git").mkdir(parents=True)
    for i in range(4):
        (root / f"m{i}.py").write_text(f"def f{i}(x):\n    return x + {i}\n")
    (root / "notes.md").write_text("# excluded\n")
    client = HostileClient(tmp_path, env={"LOOKAHEAD_LSP_CACHE": str(tmp_path / "cache")})
    try:
        options = {**GARBAGE_SETTINGS, "model": str(tiny_model_dir), "maxNewTokens": 4}
        assert "result" in client.initialize(root, options)
        index = client.wait_index()
        assert index["ready"] and index["stats"]["files"] == 4, index  # the bad include dropped, *.md excluded
        pop_ups = client.pop_ups()
        assert len(pop_ups) == 1 and re.match(r"lookahead: 2\d problems in the settings: ", pop_ups[0]), pop_ups
        client.notify(
            "workspace/didChangeConfiguration",
            {"settings": {"lookahead": {"window": 0, "ngram": "x", "include": ["[", "*.py"], "bad": 1}}},
        )
        client.wait_for(lambda m: m.get("method") == "window/showMessage", after=len(client.received) - 1)
        assert client.stats()["settings"]["include"] == ["*.py"]
        assert len(client.pop_ups()) == 2, client.pop_ups()
        assert client.close() == 0
    finally:
        if client.alive:
            client.process.kill()
    assert "Traceback" not in client.stderr()
