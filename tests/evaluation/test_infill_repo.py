"""``eval infill --suite repo``: holes cut from a real repository (pathspec, installed), and the daemon asked on
a copy of it (the tiny model) without a file on disk changing."""

from __future__ import annotations

import re
from pathlib import Path

from lookahead_lsp.context.imports import IDENTIFIER, file_imports
from lookahead_lsp.context.languages import detect_language
from lookahead_lsp.evaluation.infill import raw_window, run_daemon
from lookahead_lsp.evaluation.infill_repo import copy_workspace, repo_holes, xfile_holes
from lookahead_lsp.evaluation.infill_suites import Answer, from_line_start, load_suite, score_answer
from lookahead_lsp.evaluation.workloads import Corpus


def test_half_the_holes_are_whole_lines_at_their_indentation_half_cut_mid_line() -> None:
    corpus = Corpus.load()
    holes = repo_holes(corpus, 10, seed=1)
    assert len(holes) == 10 and len({h.id for h in holes}) == 10
    for hole in holes:
        original = corpus.file(hole.path).text
        assert hole.prefix + hole.middle + hole.suffix == original
        assert hole.file_name == hole.path and hole.language == "python" and not hole.multiline
        assert hole.suffix.startswith("\n") and "\n" not in hole.middle and hole.middle.strip()
    lines, cut = holes[:5], holes[5:]
    for hole in lines:  # the cursor after Enter: the line's indentation typed, nothing else of it
        assert hole.prefix.endswith("\n" + hole.indent) and hole.middle == hole.middle.lstrip()
    for hole in cut:  # code on both sides of the cursor
        assert hole.indent == "" and hole.prefix.rsplit("\n", 1)[-1].strip()
    assert repo_holes(corpus, 10, seed=1) == holes and repo_holes(corpus, 10, seed=2) != holes


def test_a_repository_hole_is_scored_on_its_line_without_tests() -> None:
    hole = repo_holes(Corpus.load(), 2, seed=0)[0]
    right = score_answer(hole, Answer(hole.middle + "\n    more"))
    assert right.exact and right.passed is None and not right.empty
    raw = Answer(hole.indent + hole.middle, at_line_start=True)  # the raw model answers from the line start
    assert from_line_start(hole, raw) == hole.indent + hole.middle and score_answer(hole, raw).exact
    assert not score_answer(hole, Answer(hole.middle[:-1] + "#")).exact and score_answer(hole, Answer("")).empty


def test_the_daemon_is_asked_on_a_copy_whose_files_stay_as_saved(tiny_model_dir: Path, tmp_path: Path) -> None:
    corpus = Corpus.load()
    holes = repo_holes(corpus, 2, seed=0)
    workspace = copy_workspace(corpus, tmp_path / "workspace")
    answers = run_daemon(holes, {"model": str(tiny_model_dir), "maxNewTokens": 6}, workspace)
    assert len(answers) == 2 and all(a.first_ms is not None for a in answers)  # each hole was answered
    for source in corpus.files:  # the holes were in the buffers only
        assert (workspace / source.path).read_text(encoding="utf-8") == source.text


def test_the_raw_prompt_is_a_window_of_a_long_file_and_a_problem_whole() -> None:
    assert raw_window("a\nb\nc\n", "\nx\ny\nz\n", (2, 2)) == ("b\nc\n", "\nx\ny")  # 2 lines before, 2 after
    hole = max(load_suite("humaneval-java"), key=lambda h: h.suffix.count("\n"))
    assert raw_window(hole.line_start, hole.suffix) == (hole.line_start, hole.suffix)
    long = repo_holes(Corpus.load(), 2, seed=0)[0]
    before, after = raw_window(long.line_start + "x\n" * 300, long.suffix + "\ny" * 100)
    assert before.count("\n") == 256 and after.count("\n") == 64 and long.suffix.startswith(after[:10])


def test_a_cross_file_hole_is_cut_just_before_a_name_its_file_imports_from_another_module() -> None:
    corpus = Corpus.load()
    holes = xfile_holes(corpus, 6, seed=0)
    assert len(holes) == 6 and len({h.id for h in holes}) == 6
    for hole in holes:
        assert hole.suite == "xfile" and hole.id.startswith("xfile:") and not hole.multiline
        text = corpus.file(hole.path).text
        assert hole.prefix + hole.middle + hole.suffix == text
        name = IDENTIFIER.match(hole.middle)
        assert name is not None and not re.search(r"[\w.]$", hole.prefix)  # the whole name is the hole's
        imports = file_imports(text, detect_language(path=hole.path), hole.path)
        assert name.group() in {*imports.names, *imports.modules}, (hole.id, name.group())
        assert hole.indent == "" and "\n" not in hole.middle and hole.suffix.startswith("\n")
    assert set(xfile_holes(corpus, 3, seed=0)) < set(holes)  # a larger count keeps a smaller one's holes
