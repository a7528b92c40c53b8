"""The daemon with ``decoder: "remote"`` against a scripted OpenAI-compatible server; one outage message."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from lookahead_lsp.evaluation.lsp_client import LspClient
from tests.decoder.test_remote import ScriptedServer, stream_text

SHOW = "window/showMessage"


def test_remote_completion_then_outage(tiny_model_dir: Path, tmp_path: Path) -> None:
    engine = ScriptedServer()
    engine.scripts = [stream_text("a * b\n\n\ndef div(a, b):\n")]
    threading.Thread(target=engine.serve_forever, args=(0.02,), daemon=True).start()
    client = LspClient(stderr_path=tmp_path / "server.log")
    try:
        options = {"model": str(tiny_model_dir), "decoder": "remote", "remote": {"url": engine.url, "timeoutS": 2}}
        client.initialize(options=options)
        model = client.wait_model()
        assert model["state"] == "ready" and model["source"] == "hf-dir"
        uri = "file:///tmp/remote/ops.py"
        text = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return "
        client.open(uri, text)
        items = client.inline(uri, 5, 11)["items"]
        assert [item["insertText"] for item in items] == ["a * b"]  # the stop rules cut the streamed text
        _, _, body = engine.requests[-1]
        assert body["stream"] is True and "<|fim_middle|>" in body["prompt"]
        assert client.command("lookahead.stats")["model"]["remote"]["state"] == "up"

        engine.shutdown()
        engine.server_close()
        client.change(
            uri,
            2,
            [{"range": {"start": {"line": 5, "character": 11}, "end": {"line": 5, "character": 11}}, "text": "("}],
        )
        for _ in range(3):
            assert client.inline(uri, 5, 12)["items"] == []
            time.sleep(0.3)
        outages = [m for m in client.notifications_of(SHOW) if "remote engine" in m["message"]]
        assert len(outages) == 1 and outages[0]["type"] == 1
    finally:
        assert client.close() == 0
