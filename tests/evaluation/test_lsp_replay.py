"""The typing replay drives the real daemon (`lookahead-lsp serve` over stdio) on the tiny model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lookahead_lsp.evaluation.lsp_replay import lsp_position, replay
from lookahead_lsp.evaluation.workloads import Corpus, make_holes
from tests import slow_passes

SLOW_MS = 200  # each forward pass of the baseline's daemon sleeps this long first


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


def test_pauses_are_watched_until_the_run_ends_and_tabled(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lookahead_lsp.evaluation.lsp_replay import (
        compare_pauses,
        pause_holes,
        pauses_from_json,
        pauses_markdown,
        pauses_to_json,
    )
    from lookahead_lsp.lsp_server.cli import main

    corpus = Corpus.load()
    holes = pause_holes(corpus, 2)
    assert [h.workload for h in holes] == ["midline", "fim"] and "\n" in holes[1].middle.strip()
    baseline = [*slow_passes.command(SLOW_MS), "serve"]  # "another build": every pass of it sleeps first
    modes = ["progressive", "no deadlines"]
    pauses = compare_pauses(corpus, holes, str(tiny_model_dir), 6, modes=modes, baseline=baseline)
    assert [(p.hole, p.mode) for p in pauses] == [
        (holes[0], "progressive"),
        (holes[0], "no deadlines"),
        (holes[0], "baseline"),
        (holes[1], "no deadlines"),  # the modes take turns in going first
        (holes[1], "baseline"),
        (holes[1], "progressive"),
    ]
    for pause in pauses:
        times = [t for t, _ in pause.shown]
        assert times and times == sorted(times) and pause.at(times[-1]) == pause.final
        assert pause.prefilled is not None and 0 <= pause.prefilled < 4096  # the key's run, from its stats
    slowed = [p.first_s() for p in pauses if p.mode == "baseline"]
    assert all(s is not None and s >= SLOW_MS / 1000.0 for s in slowed)  # the key's run was the baseline's command's
    assert all(p.run is not None and "prompt" in p.run for p in pauses)  # each key's run, its stages timed
    slow_steps = [p.run for p in pauses if p.mode == "baseline" and p.run and p.run["steps"]]
    assert slow_steps and all(run["decode"] / run["steps"] >= SLOW_MS for run in slow_steps)
    table = pauses_markdown(pauses)
    assert "| progressive | 2 |" in table and "| no deadlines | 2 |" in table and "| baseline | 2 |" in table
    saved = tmp_path / "pauses.json"
    saved.write_text(json.dumps(pauses_to_json(pauses)))
    assert pauses_markdown(pauses_from_json(json.loads(saved.read_text()))) == table
    assert main(["bench", "pauses", "--table", str(saved)]) == 0 and capsys.readouterr().out.strip() == table.strip()
