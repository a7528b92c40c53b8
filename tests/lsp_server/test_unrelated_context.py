"""The daemon's context from other files: a definition the cursor's code uses reaches the prompt; an unrelated
open file changes nothing (the relevance bar, ``context/snippets.py``). The real daemon over stdio, the tiny
model, real files on disk, opened in the editor as neighbouring tabs."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from lookahead_lsp.evaluation.lsp_client import LspClient

STATS = "lookahead/completionStats"
MAIN = '''from helpers import scale_vector

DOUBLE = 2.0


def doubled(vector):
    return scale_vector(vector, DOUBLE)


def stretch(points, factor):
    """Every point scaled by factor."""
    scaled = []
    for point in points:
        '''  # the cursor on line 13: the snippets are ranked against lines 0-7 (context/snippets.py: query_window)
HELPERS = '''def scale_vector(vector, factor):
    """The vector with each coordinate multiplied by factor."""
    return [coordinate * factor for coordinate in vector]
'''
UNRELATED = {  # files sharing only common words with main.py (points, factor, for ... in ...)
    "bank.py": "def below_zero(operations):\n    balance = 0\n    for op in operations:\n        balance += op\n"
    "        if balance < 0:\n            return True\n    return False\n",
    "weights.js": "function totalWeight(points, factor) {\n  let sum = 0;\n  for (const p of points) {\n"
    "    sum += p.weight;\n  }\n  return sum;\n}\n",
}


def _completion(tmp: Path, tiny_model_dir: Path, files: dict[str, str]) -> Any:
    """One daemon on a workspace of ``files`` plus main.py, all of them open: complete at main.py's end; the
    completion's text and its stats."""
    root = tmp / "ws"
    (root / ".git").mkdir(parents=True)
    for name, text in {**files, "main.py": MAIN}.items():
        (root / name).write_text(text)
    client = LspClient(stderr_path=tmp / "server.log")
    try:
        options = {"model": str(tiny_model_dir), "maxNewTokens": 8, "lineDeadlineMs": None, "lineCapMs": None}
        client.initialize(root=root, options=options)
        assert client.wait_model()["state"] == "ready"
        assert client.wait_index()["ready"]
        for name, text in files.items():
            client.open((root / name).as_uri(), text, "javascript" if name.endswith(".js") else "python")
        uri = (root / "main.py").as_uri()
        client.open(uri, MAIN)
        time.sleep(1.0)  # the open documents' texts reach the snippet index in the background
        before = len(client.notifications)
        lines = MAIN.split("\n")
        result = client.inline(uri, len(lines) - 1, len(lines[-1]), timeout=120)
        stats = client.wait_notification(STATS, after=before, timeout=60)
        return (result["items"][0]["insertText"] if result["items"] else ""), stats
    finally:
        assert client.close(timeout=60) == 0


def test_unrelated_files_do_not_change_a_completion_and_a_used_definition_gets_in(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    alone_text, alone = _completion(tmp_path / "alone", tiny_model_dir, {})
    with_helpers_text, with_helpers = _completion(tmp_path / "helpers", tiny_model_dir, {"helpers.py": HELPERS})
    crowded_text, crowded = _completion(tmp_path / "crowded", tiny_model_dir, {"helpers.py": HELPERS, **UNRELATED})
    # the definition of scale_vector, which main.py imports, is in the prompt's context
    assert with_helpers["promptTokens"] > alone["promptTokens"] + 20, (alone, with_helpers)
    # the unrelated files, open beside it, add nothing: the same prompt, the same completion
    assert crowded["promptTokens"] == with_helpers["promptTokens"], (with_helpers, crowded)
    assert crowded_text == with_helpers_text
