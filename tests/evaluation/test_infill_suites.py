"""The infilling suites: what they load, the cursor convention, the scoring rules and pass@1 (no model)."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from lookahead_lsp.evaluation.commands import infill as command
from lookahead_lsp.evaluation.infill_suites import (
    Answer,
    filled_program,
    from_line_start,
    is_exact,
    load_suite,
    report_first_line,
    run_program,
    runtime_missing,
    score_answer,
    similarity,
)
from lookahead_lsp.lsp_server.cli import UsageError


@pytest.mark.parametrize(
    ("suite", "problems"),
    [("humaneval-single", 164), ("humaneval-multi", 164), ("humaneval-js", 154), ("humaneval-java", 137)],
)
def test_each_suite_loads_one_hole_per_problem(suite: str, problems: int) -> None:
    holes = load_suite(suite)
    assert len(holes) == problems
    assert len({h.id for h in holes}) == problems
    assert all(h.tests and h.middle.strip() for h in holes)
    assert len(load_suite(suite, limit=3)) == 3


def test_the_middle_hole_by_order_is_taken() -> None:
    """HumanEval/0 has single-line holes L0..L6 in the data: the middle one is L3."""
    assert load_suite("humaneval-single", 1)[0].id == "humaneval-single:HumanEval/0/L3"


@pytest.mark.parametrize("suite", ["humaneval-single", "humaneval-multi", "humaneval-js", "humaneval-java"])
def test_the_cursor_sits_after_the_typed_indentation(suite: str) -> None:
    for hole in load_suite(suite, limit=20):
        assert hole.prefix.endswith("\n" + hole.indent)  # the editor's line after Enter, indentation typed
        assert hole.line_start.endswith("\n") and hole.prefix == hole.line_start + hole.indent
        assert not hole.middle[:1].isspace()  # the reference starts after the indentation ...
        assert hole.suffix.startswith("\n")  # ... and ends before its line's newline


def test_the_suite_reassembles_the_original_program() -> None:
    hole = load_suite("humaneval-single", 1)[0]
    assert hole.indent == " " * 16 and hole.middle == "distance = abs(elem - elem2)"
    assert (hole.prefix + hole.middle + hole.suffix).count("distance = abs(elem - elem2)\n") == 1


def test_exact_is_the_reports_stripped_first_line_rule() -> None:
    hole = load_suite("humaneval-single", 1)[0]
    assert is_exact(hole, Answer("distance = abs(elem - elem2)  \n                if more:"))
    assert is_exact(hole, Answer("\n                distance = abs(elem - elem2)", at_line_start=True))
    assert is_exact(hole, Answer("   distance = abs(elem - elem2)"))  # stripped: the indentation is not judged
    assert not is_exact(hole, Answer("distance = abs(elem2 - elem)"))
    assert report_first_line(" \nsecond\nthird") == "second" and report_first_line("first\nsecond") == "first"


def test_a_raw_answer_counts_from_the_line_start() -> None:
    hole = load_suite("humaneval-single", 1)[0]
    raw = Answer(hole.indent + hole.middle + "\n" + "more", at_line_start=True)
    assert from_line_start(hole, raw) == hole.indent + hole.middle
    assert from_line_start(hole, Answer(hole.middle)) == hole.indent + hole.middle


def test_multi_line_exact_compares_the_whole_text() -> None:
    hole = load_suite("humaneval-multi", 1)[0]
    assert "\n" in hole.middle
    assert is_exact(hole, Answer(hole.middle + "\n\n"))
    assert not is_exact(hole, Answer(hole.middle.split("\n")[0]))
    assert 0.0 < similarity(hole, Answer(hole.middle.split("\n")[0])) < 1.0


def test_edit_similarity_and_empty_answers() -> None:
    hole = load_suite("humaneval-single", 1)[0]
    assert similarity(hole, Answer(hole.middle)) == 1.0
    assert similarity(hole, Answer("")) == 0.0
    empty = score_answer(hole, Answer("  \n"), run_tests=False)
    assert empty.empty and not empty.exact and empty.passed is None


def test_pass_at_1_runs_a_python_problem_with_its_check() -> None:
    hole = load_suite("humaneval-single", 1)[0]
    assert score_answer(hole, Answer(hole.middle)).passed
    assert not score_answer(hole, Answer("distance = 2 * threshold")).passed  # runs, but the tests fail
    assert not score_answer(hole, Answer("   " + hole.middle)).passed  # exact by the rule, mis-indented


def test_a_program_that_runs_too_long_fails() -> None:
    assert not run_program("python", "while True:\n    pass\n", time_limit_s=0.5)


@pytest.mark.skipif(runtime_missing("javascript") is not None, reason="no `node` on PATH to run JavaScript")
def test_pass_at_1_runs_a_javascript_problem_with_node() -> None:
    hole = load_suite("humaneval-js", 1)[0]
    assert score_answer(hole, Answer(hole.middle)).passed
    wrong = dataclasses.replace(hole, middle="return false;")
    assert not score_answer(hole, Answer(wrong.middle)).passed


def test_a_java_program_closes_its_method_once_before_the_tests_main() -> None:
    """The tests start by closing the method: the filled program's class end goes, and the tests' first line."""
    hole = load_suite("humaneval-java", 1)[0]
    program = filled_program(hole, Answer(hole.middle))
    assert "org.javatuples" not in program  # not installed, and no problem uses it
    assert program.count("public static void main") == 1
    assert program.count("{") == program.count("}")
    assert program.rstrip().endswith("}")


def test_the_daemons_answer_is_what_its_item_inserts_at_the_cursor() -> None:
    """An item whose range starts before the cursor retypes that text, and one that ends after it retypes the
    text it replaces there: neither part is inserted at the cursor."""
    from lookahead_lsp.evaluation.infill import inserted_at_cursor

    text = "def f():\n    ret\n)"
    cursor = text.index("ret") + 3

    def item(insert: str, start: int, end: int) -> dict[str, object]:
        span = {"start": {"line": 1, "character": start}, "end": {"line": 1 + (end < 0), "character": abs(end)}}
        return {"items": [{"insertText": insert, "range": span}]}

    assert inserted_at_cursor(item("urn 1", 7, 7), text, cursor) == "urn 1"
    assert inserted_at_cursor(item("return 1", 4, 7), text, cursor) == "urn 1"  # healed: "ret" retyped
    assert inserted_at_cursor(item("urn (1\n)", 7, -1), text, cursor) == "urn (1"  # replaces "\n)" after it
    assert inserted_at_cursor({"items": []}, text, cursor) == "" and inserted_at_cursor(None, text, cursor) == ""


def test_only_picks_the_named_holes_and_refuses_ids_no_suite_has() -> None:
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    wanted = "humaneval-single:HumanEval/16/L0,humaneval-single:HumanEval/41/L0"
    args = parser.parse_args(["--only", wanted])
    assert [hole.id for hole in command.suite_holes("humaneval-single", args)] == wanted.split(",")
    with pytest.raises(UsageError, match="no hole"):
        command.run(parser.parse_args(["--only", "humaneval-single:HumanEval/999/L0", "--sides", "raw"]))


def test_the_report_names_the_holes_whose_daemon_prompt_held_another_file() -> None:
    holes = load_suite("humaneval-single", limit=3)
    answers = [Answer("x", context=()), Answer("y", context=("HumanEval_0.py",)), Answer("z", context=())]
    scores = [score_answer(hole, answer, run_tests=False) for hole, answer in zip(holes, answers, strict=True)]
    raw = [Answer("x", at_line_start=True)] * 3  # a raw side knows no context: no line for it
    runs = [("humaneval-single", "daemon", holes, answers, scores), ("humaneval-single", "raw", holes, raw, scores)]
    assert command.with_context(runs) == [
        f"- humaneval-single: daemon's prompt held another file's section (1): {holes[1].id}"
    ]
