"""``eval infill --sides engine``: the raw side's prompt on this checkout's own engine (the real embedded 0.5B),
which tells the engines' numerics from the daemon's pipeline."""

from __future__ import annotations

from lookahead_lsp.evaluation.infill import run_engine
from lookahead_lsp.evaluation.infill_suites import load_suite, score_answer


def test_the_engine_answers_each_hole_with_one_line_from_its_start() -> None:
    holes = load_suite("humaneval-single", 4)
    answers = run_engine(holes, "embedded")
    assert len(answers) == 4 and all(a.at_line_start for a in answers)
    for answer in answers:  # a line, from the line start (its indentation the model's own), stopped at its end
        assert answer.text.strip() and "\n" not in answer.text.rstrip("\n")
    scores = [score_answer(hole, answer) for hole, answer in zip(holes, answers, strict=True)]
    assert sum(bool(s.passed) for s in scores) >= 2  # a real model on the report's prompt, not noise
