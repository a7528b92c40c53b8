"""`bench switch` through the real daemon with the tiny model: back in a file, a KV cache per document prefills
what changed; one shared cache prefills the whole prompt again."""

from __future__ import annotations

from pathlib import Path

import pytest

from lookahead_lsp.evaluation.workloads import Corpus, Hole


def _hole(path: str, n: int) -> Hole:
    return Hole("fim", "single-line", path, "x = " * n, str(n), "\n")


def test_pairs_join_holes_of_two_different_files_each_hole_once() -> None:
    from lookahead_lsp.evaluation.switch_bench import hole_pairs

    holes = [_hole("a.py", 1), _hole("a.py", 2), _hole("b.py", 3), _hole("c.py", 4), _hole("c.py", 5)]
    pairs = hole_pairs(holes, 5)
    assert [(a.path, a.middle, b.path, b.middle) for a, b in pairs] == [
        ("a.py", "1", "b.py", "3"),
        ("a.py", "2", "c.py", "4"),
    ]
    assert hole_pairs(holes, 1) == pairs[:1]


def test_back_in_a_file_one_cache_per_document_prefills_what_changed(
    tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lookahead_lsp.evaluation.lsp_replay import pause_holes
    from lookahead_lsp.evaluation.switch_bench import compare_switches, hole_pairs, switches_markdown

    corpus = Corpus.load()
    pairs = hole_pairs(pause_holes(corpus, 6), 2)
    assert len(pairs) == 2 and all(a.path != b.path for a, b in pairs)
    returns = compare_switches(corpus, pairs, str(tiny_model_dir), 4)
    assert [r.mode for r in returns] == ["kvSlots 2", "kvSlots 1", "kvSlots 1", "kvSlots 2"]  # turns rotate
    for r in returns:
        assert r.prompt_tokens is not None and r.prefilled_tokens is not None, r  # every return is a model run
        if r.mode == "kvSlots 2":
            # from the backspace on: the healed tail and the suffix window after it (psm-short on a CPU)
            assert r.prefilled_tokens <= 48 and 2 * r.prefilled_tokens < r.prompt_tokens, r
        else:
            # the other file took the one cache: all but the few tokens both prompts start with
            assert r.prefilled_tokens > max(100, r.prompt_tokens - 16), r
    table = switches_markdown(returns)
    assert "| kvSlots 2 | 2 | 2 |" in table and "| kvSlots 1 | 2 | 2 |" in table and "kvSlots 1 / kvSlots 2" in table
