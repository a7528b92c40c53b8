"""The daemon with the remote backend, end to end: ``lookahead-lsp serve`` completing through llama.cpp's llama-server.

Skips until the server has the remote wiring (``lsp_server.config.Config.remote``) and where the engine
could not be installed (``scripts/get-engine.sh``), printing why.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest

from lookahead_lsp.evaluation.lsp_client import LspClient
from lookahead_lsp.lsp_server.config import Config
from tests.decoder.test_remote import engine_server  # noqa: F401 - the shared real-engine fixture
from tests.lsp_server.test_server_e2e import SOURCE, STATS, _end_of, _start

if "remote" not in {f.name for f in dataclasses.fields(Config)}:
    pytest.skip(
        "the server has no remote backend wiring yet (no lsp_server.config.Config.remote)", allow_module_level=True
    )

SHOW_MESSAGE = "window/showMessage"
URI = "file:///tmp/lookahead-remote/main.py"


def _outage_messages(client: LspClient) -> list[str]:
    return [m["message"] for m in client.notifications_of(SHOW_MESSAGE) if "remote engine" in m["message"]
            and "failed" in m["message"]]  # fmt: skip


def _items(client: LspClient, uri: str = URI) -> list[Any]:
    items: list[Any] = client.inline(uri, *_end_of(SOURCE))["items"]
    return items


def _fresh_items(client: LspClient, name: str) -> list[Any]:
    """A request the engine must answer: in a newly opened document (the daemon reuses an answer it already
    gave for the same text and cursor)."""
    uri = f"file:///tmp/lookahead-remote/{name}.py"
    client.open(uri, SOURCE)
    return _items(client, uri)


def test_completions_outage_and_recovery_through_the_daemon(engine_server: Any, tmp_path: Path) -> None:  # noqa: F811
    from lookahead_lsp.evaluation.remote_bench import LLAMA_SERVER_GREEDY

    remote = {"url": engine_server.url, "timeoutS": 60, "extra": LLAMA_SERVER_GREEDY}
    client = _start(tmp_path, {"decoder": "remote", "remote": remote, "maxNewTokens": 16, "indexEnabled": False})
    try:
        assert client.wait_model()["state"] == "ready"
        client.open(URI, SOURCE)
        before = len(client.notifications)
        items = _items(client)
        stats = client.wait_notification(STATS, after=before)
        print(f"remote completion: {[i['insertText'] for i in items]} {stats}")
        assert items and stats["newTokens"] > 0 and stats["latencyMs"]["total"] > 0

        engine_server.stop()
        try:
            for i in range(3):
                assert _fresh_items(client, f"outage{i}") == []
                time.sleep(0.6)  # past the client's first backoff steps
            assert len(_outage_messages(client)) == 1, client.notifications_of(SHOW_MESSAGE)
        finally:
            engine_server.start()
        deadline = time.monotonic() + 30
        tries = 0
        while not _fresh_items(client, f"back{tries}"):
            tries += 1
            assert time.monotonic() < deadline, "completions did not resume after the engine came back"
            time.sleep(0.2)
        back = client.wait_notification(
            SHOW_MESSAGE, lambda m: m["message"].endswith(" is back") and "failed" not in m["message"], timeout=10
        )
        print(f"outage: {_outage_messages(client)}; recovery: {back['message']}")
        assert len(_outage_messages(client)) == 1
    finally:
        client.close()
