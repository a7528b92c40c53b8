"""The typing replay drives the real daemon (`lookahead-lsp serve` over stdio) on the tiny model."""

from __future__ import annotations

from pathlib import Path

from evaluation.lsp_replay import lsp_position, replay
from evaluation.workloads import Corpus, make_holes


def test_lsp_position_counts_utf16_code_units() -> None:
    assert lsp_position("ab\ncd") == {"line": 1, "character": 2}
    assert lsp_position("x\n\U0001f600y") == {"line": 1, "character": 3}


def test_replay_answers_every_keystroke(tiny_model_dir: Path) -> None:
    corpus = Corpus.load()
    hole = make_holes(corpus, "repo", 1, seed=0)[0]
    result = replay(hole, corpus, str(tiny_model_dir), max_new_tokens=4, keystrokes=2)
    assert [k.typed for k in result.keystrokes] == [0, 1, 2]
    assert all(k.latency_ms > 0 for k in result.keystrokes)
    summary = result.summary()
    assert summary["keystrokes"] == 3 and summary["first_ms"] == round(result.keystrokes[0].latency_ms, 1)
