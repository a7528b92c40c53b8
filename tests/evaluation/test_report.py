"""Plot titles name the model as its spec does, never by a machine's cache path."""

from __future__ import annotations

from pathlib import Path

import pytest

from lookahead_lsp.evaluation.report import bench_rows, model_name, peer_lines
from lookahead_lsp.evaluation.speed import Summary


def test_model_name_leaves_out_cache_paths(tmp_path: Path) -> None:
    cached = "embedded (embedded-cache: /root/.cache/lookahead-lsp/converted-v1/1d96)"
    assert model_name({"model": cached}) == "embedded"
    assert model_name({"model": cached, "model_spec": "Qwen/Qwen2.5-Coder-1.5B"}) == "Qwen/Qwen2.5-Coder-1.5B"
    local = tmp_path / "my-model"
    local.mkdir()
    assert model_name({"model_spec": str(local)}) == "my-model"


def test_the_peer_is_its_fastest_configuration_by_tokens_per_second() -> None:
    """Not the one with the fewest passes: a configuration that drafts much and decodes slowly is not the peer."""

    def row(name: str, tokens_per_s: float, passes: float, prefill: float, completion: float) -> Summary:
        return Summary(name, 10, tokens_per_s, 1.0, passes, 1.0, prefill, 0.0, 10, completion_ms=completion)

    lines = peer_lines(
        [
            row("greedy", 30.0, 1.0, 3000.0, 4000.0),
            row("lookahead", 45.0, 0.6, 3000.0, 3600.0),
            row("llama-server", 30.0, 1.0, 6000.0, 7200.0),
            row("llama-server-ngram", 27.0, 0.5, 6000.0, 7300.0),  # fewest passes, slower
            row("llama-server-simple", 36.0, 0.7, 6000.0, 7000.0),
        ]
    )
    assert lines[0].endswith("llama-server-simple (36.0)")
    assert "1.25x" in lines[1]  # 45 / 36
    assert "1.00x" in lines[2] and "2.00x" in lines[3] and "2.00x" in lines[4]  # 7200 / 3600
    assert peer_lines([row("greedy", 30.0, 1.0, 1.0, 1.0)]) == []  # no peer ran
    assert peer_lines([row("greedy", 30.0, 1.0, 1.0, 1.0), row("llama-server", 0.0, 0.0, 1.0, 1.0)]) == []


def test_a_configuration_that_produced_nothing_shows_no_speedup() -> None:
    """A decoder that returned at once with no tokens (transformers' prompt lookup on one CUDA setup) took almost
    no time: its time ratio is not a speedup."""
    done = Summary("lookahead", 10, 40.0, 1.3, 0.6, 1.7, 300.0, 0.0, 10, 1.1, 900.0, 1.2, new_tokens=480)
    empty = Summary("hf-pld", 10, 0.0, 413.0, 0.0, 0.0, 33.0, 0.0, 0, 6.9, 37.0, 52.0, new_tokens=0)
    done_row, empty_row = bench_rows([done, empty])
    assert done_row[3] == "1.30x" and done_row[7] == "1.10x" and done_row[10] == "1.20x"
    assert empty_row[3] == empty_row[7] == empty_row[10] == "no output"


def test_per_hole_ratios_are_greedys_time_over_lookaheads() -> None:
    from lookahead_lsp.decoder.types import DecodeStats
    from lookahead_lsp.evaluation.report import per_hole_markdown
    from lookahead_lsp.evaluation.speed import BenchResult, Run

    def run(hole: str, workload: str, config: str, decode_ms: float, steps: int, first: float) -> Run:
        stats = DecodeStats(steps=steps, decode_ms=decode_ms)
        return Run(hole, workload, config, [1], stats, True, (first, decode_ms))

    result = BenchResult({}, ["greedy", "lookahead"], [])
    result.runs = [
        run("fim:a.py:1:0", "fim", "greedy", 1000.0, 40, 1100.0),
        run("fim:a.py:1:0", "fim", "lookahead", 500.0, 18, 550.0),
        run("fim:b.py:9:4", "fim", "greedy", 900.0, 40, 990.0),
        run("fim:b.py:9:4", "fim", "lookahead", 1000.0, 39, 1100.0),
        run("repo:c.py:3:8", "repo", "greedy", 800.0, 40, 800.0),
        run("repo:c.py:3:8", "repo", "lookahead", 400.0, 12, 1000.0),  # a first round slower than greedy's
    ]
    table = per_hole_markdown(result)
    assert "| fim:a.py:1:0 | 1000 | 500 | 2.00 | 2.00 | 2.00 | 40 / 18 |" in table
    assert "| fim:b.py:9:4 | 900 | 1000 | 0.90 | 0.90 | 0.90 |" in table
    assert "| repo:c.py:3:8 | 800 | 400 | 2.00 | 0.80 | 1.40 |" in table  # rounds 0.80 and 2.00: their median
    assert (
        "- fim: median 1.45x, lowest 0.90x over 2 holes; first round lowest 0.90x, 1 below 0.97x;"
        " paired rounds lowest 0.90x, 1 below 0.97x" in table
    )
    assert (
        "- repo: median 2.00x, lowest 2.00x over 1 holes; first round lowest 0.80x, 1 below 0.97x;"
        " paired rounds lowest 1.40x, 0 below 0.97x" in table
    )


def test_paired_rounds_compare_each_round_with_greedys_in_the_same_round() -> None:
    """A host that slowed between rounds slows both decoders of a round alike: the paired median sees through it
    where the fastest rounds, taken from different minutes, do not."""
    from lookahead_lsp.decoder.types import DecodeStats
    from lookahead_lsp.evaluation.speed import Run

    greedy = Run("fim:a.py:1:0", "fim", "greedy", [1], DecodeStats(decode_ms=400.0), True, (400.0, 600.0, 610.0))
    ours = Run("fim:a.py:1:0", "fim", "lookahead", [1], DecodeStats(decode_ms=420.0), True, (420.0, 630.0, 600.0))
    assert greedy.stats.decode_ms / ours.stats.decode_ms == pytest.approx(0.952, abs=1e-3)
    assert ours.paired_over(greedy) == pytest.approx(600.0 / 630.0)  # the median of 0.952, 0.952 and 1.017
    single = Run("fim:a.py:1:0", "fim", "lookahead", [1], DecodeStats(decode_ms=200.0), True)
    assert single.paired_over(greedy) == pytest.approx(2.0)  # no rounds kept: its one time against greedy's first


def test_first_rounds_are_set_beside_the_fastest() -> None:
    """A peer whose later rounds of a hole draft from its own first (llama.cpp's ngram-mod keeps its table) is
    fastest by its best round; the first rounds, what a user meets, are compared apart."""
    from lookahead_lsp.decoder.types import DecodeStats
    from lookahead_lsp.evaluation.speed import BenchResult, Run, summarize

    rounds = {
        "greedy": (1000.0, 950.0, 990.0),
        "lookahead": (600.0, 560.0, 580.0),
        "llama-server": (1300.0, 1250.0, 1280.0),
        "llama-server-ngram": (1200.0, 500.0, 480.0),  # warm from its first round
    }
    result = BenchResult({}, list(rounds), [])
    result.runs = [
        Run("fim:a.py:1:0", "fim", name, [1], DecodeStats(new_tokens=48, decode_ms=min(ms)), True, ms)
        for name, ms in rounds.items()
    ]
    summaries = summarize(result)
    assert [round(s.first_tokens_per_s, 1) for s in summaries] == [48.0, 80.0, 36.9, 40.0]
    lines = peer_lines(summaries)
    assert lines[0].endswith("llama-server-ngram (100.0)") and "0.86x" in lines[1]  # 48 / 0.56 s against 48 / 0.48 s
    assert lines[-3].endswith("llama-server-ngram (40.0 tokens/s)")
    assert lines[-2].endswith("lookahead / that: 2.00x")  # 80 / 40
    assert lines[-1].endswith("greedy / llama-server plain: 1.30x")  # 48 / 36.9
