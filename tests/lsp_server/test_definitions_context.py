"""The daemon's definitions from the workspace (context/definitions.py): a function of another file, never opened
in the editor, reaches the prompt for a call of it; an edit of that file on disk reaches the prompt within 2 s;
an unrelated file written beside it changes nothing; deleting the file takes its definition out. The real daemon
over stdio, the tiny model, real files and filesystem events. The completion's stats name the file."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from lookahead_lsp.evaluation.lsp_client import LspClient

HELPERS = '''def scale_vector(vector, factor):
    """The vector with each coordinate multiplied by factor."""
    result = []
    for coordinate in vector:
        result.append(coordinate * factor)
    return result
'''
EDITED = HELPERS.replace("(vector, factor)", "(vector, factor, rounding_mode_for_every_single_coordinate=None)")
UNRELATED = "def below_zero(operations):\n    balance = 0\n    for op in operations:\n        balance += op\n"
MAIN = "from geometry.helpers import scale_vector\n\n\ndef stretch(points, factor):\n    return "


def _prompt_after(client: LspClient, after: dict[str, Any] | None, limit_s: float) -> dict[str, Any] | None:
    """The first whole background prefill (built in idle time: its context chosen afresh) after ``after`` whose
    prompt differs in size from it; else the last one seen within ``limit_s`` (``after`` if none)."""
    deadline = time.monotonic() + limit_s
    seen = after
    while time.monotonic() < deadline:
        warm = client.command("lookahead.stats")["lastWarm"]
        if warm is not None and not warm["cancelled"] and (after is None or warm["requestId"] != after["requestId"]):
            seen = warm
            if after is None or warm["promptTokens"] != after["promptTokens"]:
                return warm
        time.sleep(0.05)
    return seen


def test_a_definition_on_disk_reaches_the_prompt_and_follows_its_edits(tiny_model_dir: Path, tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / ".git").mkdir(parents=True)
    (root / "geometry").mkdir()
    helpers = root / "geometry" / "helpers.py"
    helpers.write_text(HELPERS)
    (root / "main.py").write_text(MAIN)
    client = LspClient(stderr_path=tmp_path / "server.log")
    try:
        options: dict[str, Any] = {"model": str(tiny_model_dir), "maxNewTokens": 4}
        options.update(lineDeadlineMs=None, lineCapMs=None)
        client.initialize(root=root, options=options)
        assert client.wait_model()["state"] == "ready"
        assert client.wait_index()["ready"]
        uri = (root / "main.py").as_uri()
        client.open(uri, MAIN)
        client.inline(uri, 4, len("    return "), timeout=120)  # the cursor: its document settles, prefilled
        stats = client.wait_notification("lookahead/completionStats", timeout=60)
        assert stats["contextFiles"] == ["geometry/helpers.py"], stats  # what the editor can show as the context
        first = _prompt_after(client, None, limit_s=10.0)
        assert first is not None

        written = time.monotonic()
        helpers.write_text(EDITED)  # the signature grows by a long parameter
        edited = _prompt_after(client, first, limit_s=10.0)
        took = time.monotonic() - written
        assert edited is not None and edited["promptTokens"] > first["promptTokens"] + 5, (first, edited)
        assert took <= 2.0, took

        (root / "bank.py").write_text(UNRELATED)  # shares no name with main.py's cursor
        unrelated = _prompt_after(client, edited, limit_s=2.0)
        assert unrelated is not None and unrelated["promptTokens"] == edited["promptTokens"], (edited, unrelated)

        helpers.unlink()  # the definition leaves the prompt
        gone = _prompt_after(client, unrelated, limit_s=10.0)
        assert gone is not None and gone["promptTokens"] < first["promptTokens"], (first, edited, gone)
    finally:
        assert client.close(timeout=60) == 0
