"""`bench` and `eval` end to end on the tiny model (real tokenizer), and their pure parts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lookahead_lsp.decoder.backend import LocalBackend
from lookahead_lsp.decoder.lookahead import LookaheadDecoder
from lookahead_lsp.decoder.types import DecodeStats
from lookahead_lsp.evaluation.quality import (
    StepClock,
    edit_similarity,
    levenshtein,
    repeats_suffix,
    runs_past_block,
    stop_point,
    with_deadlines,
)
from lookahead_lsp.evaluation.speed import REFERENCE, BenchResult, Run, parse_decoders, summarize
from lookahead_lsp.evaluation.workloads import Hole
from lookahead_lsp.lsp_server.cli import main
from tests.tiny_model import make_tiny_qwen2


def test_bench_end_to_end_lookahead_equals_greedy(tiny_model_dir: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "bench"
    decoders = "greedy,hf,hf-pld,lookahead,ablations,lookahead-W2N4G2"
    argv = ["bench", "speed", "--model", str(tiny_model_dir), "--workload", "fim,repo", "--holes", "1"]
    assert main([*argv, "--max-new-tokens", "8", "--decoders", decoders, "--out", str(out)]) == 0
    assert "| lookahead-no-workspace |" in capsys.readouterr().out
    assert {p.name for p in out.iterdir()} == {"bench.json", "bench.md", "speedup.png", "accepted.png"}
    data = json.loads((out / "bench.json").read_text())
    assert data["configs"][0] == REFERENCE and len(data["holes"]) == 2
    assert len(data["runs"]) == 2 * len(data["configs"])
    for run in data["runs"]:
        assert run["identical_to_greedy"], run["config"]
        assert run["new_tokens"] == 8, run  # the tiny model's continuation never stops by itself (tests/tiny_model.py)
    overall = {row["config"]: row for row in data["summary"]["all"]}
    assert overall["lookahead"]["identical"] == 2
    assert (out / "speedup.png").read_bytes()[:4] == b"\x89PNG"
    # rounds: still one run per (hole, configuration), each the fastest of its rounds, all identical
    again = tmp_path / "again"
    assert (
        main([*argv, "--max-new-tokens", "8", "--decoders", "greedy,lookahead", "--repeats", "3", "--out", str(again)])
        == 0
    )
    data = json.loads((again / "bench.json").read_text())
    assert data["meta"]["repeats"] == 3 and len(data["runs"]) == 2 * 2
    assert all(run["identical_to_greedy"] for run in data["runs"])
    # every round's decode time kept, the fastest of them the run's
    assert all(len(run["rounds_decode_ms"]) == 3 for run in data["runs"])
    assert all(min(run["rounds_decode_ms"]) == run["decode_ms"] for run in data["runs"])


def test_eval_end_to_end_writes_scored_completions(tiny_model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "eval"
    argv = ["eval", "repo", "--model", str(tiny_model_dir), "--workload", "fim,midline", "--holes", "1"]
    assert main([*argv, "--max-new-tokens", "8", "--out", str(out)]) == 0
    data = json.loads((out / "eval.json").read_text())
    # 2 holes x workspace on/off x 3 variants
    assert len(data["completions"]) == 12
    assert {row["variant"] for row in data["summary"]} == {"raw", "stop", "stop+trim"}
    assert (out / "eval.md").read_text().startswith("## Quality")
    late = tmp_path / "late"
    assert main([*argv, "--max-new-tokens", "8", "--deadlines", "5000", "--out", str(late)]) == 0
    data = json.loads((late / "eval.json").read_text())
    assert len(data["completions"]) == 16 and data["meta"]["deadlines_after_ms"] == 5000
    by_variant: dict[str, list[str]] = {}
    for row in data["completions"]:
        by_variant.setdefault(row["variant"], []).append(row["completion"])
    # 5 s after the key, every completion is out of time at its first step: what the daemon shows is a prefix
    for shown, full in zip(by_variant["stop+trim+deadlines"], by_variant["stop+trim"], strict=True):
        assert full.startswith(shown.rstrip()) or not shown.strip()
    on = tmp_path / "on"
    assert main([*argv, "--max-new-tokens", "8", "--workspace", "on", "--out", str(on)]) == 0
    data = json.loads((on / "eval.json").read_text())
    assert len(data["completions"]) == 6  # 2 holes x workspace on only x 3 variants
    assert {row["workspace"] for row in data["summary"]} == {True}


def test_parse_decoders_puts_greedy_first_and_expands_names() -> None:
    names = [c.name for c in parse_decoders("lookahead,ablations,lookahead-W1N8G3", sweep=True)]
    assert names[0] == "greedy" and len(names) == len(set(names))
    assert "lookahead-no-jacobi" in names and "lookahead-W8N8G8" in names and "lookahead-W1N8G3" in names
    assert parse_decoders("lookahead-no-suffix")[1].sources_off == {"suffix"}
    staked = parse_decoders("lookahead-risk0.75+0.015")[1]
    assert staked.risk == (0.75, 0.015)
    built = staked.build(make_tiny_qwen2(vocab_size=64))
    assert isinstance(built, LocalBackend) and isinstance(built.decoder, LookaheadDecoder)
    assert (built.decoder.config.risk_stake, built.decoder.config.loss_share) == (0.75, 0.015)
    with pytest.raises(ValueError, match="unknown decoder"):
        parse_decoders("beam")


def _run(hole: str, config: str, decode_ms: float, steps: list[int]) -> Run:
    stats = DecodeStats(steps=len(steps), new_tokens=sum(steps) + 1, accepted_per_step=steps, decode_ms=decode_ms)
    return Run(hole, "fim", config, [], stats, True)


def test_speedup_is_the_geometric_mean_of_paired_time_ratios() -> None:
    hole = Hole("fim", "single-line", "a.py", "", "x", "")
    result = BenchResult({}, ["greedy", "fast"], [hole])
    result.runs = [
        _run("h1", "greedy", 100.0, [1] * 8),
        _run("h2", "greedy", 100.0, [1] * 8),
        _run("h1", "fast", 25.0, [4, 4]),  # 4x
        _run("h2", "fast", 100.0, [1] * 8),  # 1x
    ]
    by_config = {s.config: s for s in summarize(result)}
    assert by_config["fast"].speedup == pytest.approx(2.0)
    assert by_config["fast"].mean_accepted == pytest.approx(16 / 10)  # 16 tokens committed in 10 steps
    assert by_config["greedy"].passes_per_token == pytest.approx(16 / 18)


def test_quality_metrics() -> None:
    assert levenshtein("kitten", "sitting") == 3 and levenshtein("", "abc") == 3
    assert edit_similarity("abc  ", "abc") == 1.0 and edit_similarity("abcd", "abce") == 0.75
    assert repeats_suffix("x = 1\n    return x", "\n\n    return x\n")
    assert not repeats_suffix("x = 1", "\n    return x\n")
    block = Hole("fim", "multi-line", "a.py", "def f():\n    ", "a = 1\n    b = 2", "\n")
    assert not runs_past_block("a = 1\n    b = 2", block)
    assert runs_past_block("a = 1\n    b = 2\ndef g():", block)
    line = Hole("fim", "single-line", "a.py", "    ", "a = 1", "\n")
    assert runs_past_block("a = 1\n    b = 2", line) and not runs_past_block("a = 2", line)


def test_stop_point_calls_the_stop_fn_after_each_token() -> None:
    seen: list[int] = []

    def stop(tokens) -> int | None:
        seen.append(len(tokens))
        return 2 if tokens[-1] == 7 else None

    assert stop_point(stop, [1, 2, 3, 7, 9]) == 2 and seen == [1, 2, 3, 4]
    assert stop_point(lambda tokens: None, [1, 2]) == 2


def test_deadlines_are_replayed_over_the_recorded_step_times() -> None:
    from lookahead_lsp.context.postprocess import StopRules, make_stop_fn
    from lookahead_lsp.context.syntax import analyze

    text = "def f():\n    return \n"
    shape = analyze(text, len("def f():\n    return "), "python", "f.py")
    assert shape.kind == "line"
    pieces = ["x", " + comp", "ute", "_total", "(a", ")"]

    def decode(ids) -> str:
        return "".join(pieces[i] for i in ids)

    def make_stop(late, line_end, line_late):
        return make_stop_fn(decode, StopRules(shape, "\n"), "", late, line_end, line_late=line_late)

    tokens = list(range(len(pieces)))
    clock = StepClock([(n, 0.1 * n) for n in range(1, len(pieces) + 1)])  # one token per step, 100 ms each
    kept, line_end = with_deadlines(make_stop, tokens, clock, 0.0, 250, None, 250)
    assert kept == 4 and line_end is not None  # the cap at 300 ms inside "compute": it ends with the word
    assert line_end.apply(decode(tokens[:kept])) == "x + compute_total"
    kept, line_end = with_deadlines(make_stop, tokens, clock, 0.0, 250, None)
    assert kept == len(tokens) and line_end is None  # the line deadline never cuts a line: the whole line
    kept, line_end = with_deadlines(make_stop, tokens, clock, 0.0, None, None)
    assert kept == len(tokens) and line_end is None  # no deadline: the whole line


def test_bench_times_a_missing_pass_cost_table_before_the_peers_start(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table timed while llama-servers load their models rates wide passes too cheap: it is timed first."""
    import argparse
    from contextlib import contextmanager

    from lookahead_lsp.decoder import cost_table
    from lookahead_lsp.decoder.cost_table import table_path
    from lookahead_lsp.decoder.runtime.model import load_model
    from lookahead_lsp.decoder.weights.cache import CACHE_ENV
    from lookahead_lsp.evaluation.commands import bench

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    loaded = load_model(str(tiny_model_dir))
    table = table_path(loaded.model)
    assert not table.is_file()
    seen: list[bool] = []

    @contextmanager
    def peers_starting(*_args: object):  # where the llama-servers would start: is the table there already?
        seen.append(table.is_file())
        yield {}

    monkeypatch.setattr(bench, "started_peers", peers_starting)
    # a table timed on a loaded host is not stored (cost_table.implausible): this test is about when it is timed
    monkeypatch.setattr(cost_table, "implausible", lambda cost: False)
    args = argparse.Namespace(out=None, peer_threads=1, max_new_tokens=4, repeats=1)
    configs = parse_decoders("greedy")
    result = bench.bench_beside_peers(args, loaded, None, [], configs, {}, {}, None)  # type: ignore[arg-type]
    assert seen == [True] and result.meta["cost_table"] == str(table)
