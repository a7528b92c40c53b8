"""Block holes and the one-shot benchmark: real `lookahead-lsp complete` processes over a scratch workspace."""

from __future__ import annotations

from pathlib import Path

import pytest

from lookahead_lsp.evaluation.oneshot import oneshot_markdown, run_oneshot, write_workspace
from lookahead_lsp.evaluation.workloads import BLOCK_LINES, Corpus, make_holes


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return Corpus.load()  # the default: the installed pathspec package


def test_block_holes_leave_an_empty_indented_line_where_6_to_11_lines_were(corpus: Corpus) -> None:
    holes = make_holes(corpus, "block", 6, seed=1)
    assert len(holes) == 6
    for hole in holes:
        assert BLOCK_LINES[0] <= hole.middle.count("\n") + 1 <= BLOCK_LINES[1]
        cursor_line = hole.prefix.rsplit("\n", 1)[-1]
        assert cursor_line and not cursor_line.strip()  # indentation only
        assert hole.suffix.startswith("\n") and hole.file_text == corpus.file(hole.path).text
    assert make_holes(corpus, "block", 6, seed=1) == holes


def test_the_workspace_holds_the_file_as_the_user_has_it(corpus: Corpus, tmp_path: Path) -> None:
    hole = make_holes(corpus, "block", 1)[0]
    file = write_workspace(corpus, hole, tmp_path)
    assert file.read_text(encoding="utf-8") == hole.text_before_typing
    assert len(list(tmp_path.rglob("*.py"))) == len([f for f in corpus.files if f.path.endswith(".py")])


def test_each_run_is_its_own_complete_process(corpus: Corpus, tiny_model_dir: Path) -> None:
    hole = make_holes(corpus, "block", 1, seed=2)[0]
    results = run_oneshot(corpus, [hole], max_new_tokens=8, repeats=2, model=str(tiny_model_dir))
    (result,) = results
    assert {d: len(runs) for d, runs in result.runs.items()} == {"greedy": 2, "lookahead": 2}
    assert result.identical
    assert all(run.stats["new_tokens"] > 0 and run.stats["decode_ms"] > 0 for r in result.runs.values() for run in r)
    assert result.ratio == result.fastest("greedy").decode_ms / result.fastest("lookahead").decode_ms
    table = oneshot_markdown(results)
    assert hole.id in table and "1 holes: lookahead's speed over greedy's median" in table
