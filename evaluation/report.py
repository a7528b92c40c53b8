"""Reports for ``bench`` and ``eval``: Markdown tables, JSON files and PNG plots (matplotlib, Agg backend).

Also the run's description (machine, versions, command) that every report starts with.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import transformers

from lookahead_lsp.decoder.kernels.isa import ISA_ENV, chosen_level, cpu_flag_set, requested_level
from lookahead_lsp.evaluation.quality import QualityResult, summarize_quality
from lookahead_lsp.evaluation.speed import BenchResult, Summary, summarize

# The CPU flags a figure depends on, named beside it.
NAMED_FLAGS = frozenset(
    {"avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "amx_bf16"}
)


def machine_description() -> dict[str, Any]:
    """CPU model, cores and the library versions that the numbers depend on."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            cpu = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), cpu)
    except OSError:
        pass
    flags = cpu_flag_set()
    return {
        "cpu": cpu,
        "cpu_flags": " ".join(sorted(flags & NAMED_FLAGS)) or None,
        "native_kernel_isa": chosen_level() + (f" (forced by {ISA_ENV})" if requested_level() else ""),
        "logical_cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "platform": platform.platform(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "command": " ".join(["lookahead-lsp", *sys.argv[1:]]),
    }


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(value: Any) -> str:
        return f"{value:.2f}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines.extend("| " + " | ".join(cell(v) for v in row) + " |" for row in rows)
    return "\n".join(lines)


def meta_lines(meta: dict[str, Any]) -> str:
    return "\n".join(f"- {key}: {value}" for key, value in meta.items() if value not in (None, ""))


# --- bench ---------------------------------------------------------------------------------------------

LOSS_BOUND = 0.97  # lookahead's speed over greedy's that a hole's first round should not fall below (issue 74)

_BENCH_HEADERS = (
    "configuration",
    "holes",
    "tokens/s",
    "speedup vs greedy",
    "passes/token",
    "accepted/step",
    "prefill ms",
    "prefill vs greedy",
    "decode ms",
    "completion ms",
    "completion vs greedy",
    "identical to greedy",
)


def bench_rows(summaries: Sequence[Summary]) -> list[list[Any]]:
    """The bench table's rows, one per configuration (its columns are ``_BENCH_HEADERS``)."""

    def ratio(s: Summary, value: float) -> str:  # a configuration that produced no token has no speedup
        return f"{value:.2f}x" if s.new_tokens else "no output"

    return [
        [
            s.config,
            s.holes,
            s.tokens_per_s,
            ratio(s, s.speedup),
            s.passes_per_token,
            s.mean_accepted,
            round(s.prefill_ms),
            ratio(s, s.prefill_speedup),
            round(s.decode_ms),
            round(s.completion_ms),
            ratio(s, s.completion_speedup),
            f"{s.identical}/{s.holes}",
        ]
        for s in summaries
    ]


def peer_lines(summaries: Sequence[Summary], ours: str = "lookahead") -> list[str]:
    """Ours beside llama.cpp's configurations (the ``llama-server*`` rows): its fastest by decode tokens/s in
    this run, and our greedy against its plain decoding, ``ours`` against the fastest, prefill and whole
    completion against the plain one (the same prompt for both); then the same speeds from every hole's first
    round (what a user meets: a peer's later rounds of a hole may draft from its own first). Empty where no peer
    ran or decoded anything."""
    rows = {s.config: s for s in summaries if s.tokens_per_s > 0}
    peers = [s for s in rows.values() if s.config.startswith("llama-server")]
    greedy, plain = rows.get("greedy"), rows.get("llama-server")
    if not peers or greedy is None:
        return []
    fastest = max(peers, key=lambda s: s.tokens_per_s)
    lines = [f"- llama.cpp's fastest configuration by tokens/s: {fastest.config} ({fastest.tokens_per_s:.1f})"]
    if ours in rows:
        lines.append(f"- our {ours} / that: {rows[ours].tokens_per_s / fastest.tokens_per_s:.2f}x tokens/s")
    if plain is not None:
        lines += [
            f"- our greedy / llama-server plain: {greedy.tokens_per_s / plain.tokens_per_s:.2f}x tokens/s",
            f"- prefill: llama-server's time / ours: {plain.prefill_ms / max(greedy.prefill_ms, 1e-9):.2f}x",
        ]
        if ours in rows:
            ratio = plain.completion_ms / max(rows[ours].completion_ms, 1e-9)
            lines.append(f"- whole completion: llama-server's time / our {ours}'s: {ratio:.2f}x")
    first = max(peers, key=lambda s: s.first_tokens_per_s)
    best = first.first_tokens_per_s
    if best > 0:
        lines.append(f"- first rounds only: llama.cpp's fastest {first.config} ({best:.1f} tokens/s)")
        if ours in rows:
            lines.append(f"- first rounds: our {ours} / that: {rows[ours].first_tokens_per_s / best:.2f}x")
        if plain is not None and plain.first_tokens_per_s > 0:
            speed = greedy.first_tokens_per_s / plain.first_tokens_per_s
            lines.append(f"- first rounds: our greedy / llama-server plain: {speed:.2f}x")
    return lines


def bench_markdown(result: BenchResult) -> str:
    """A table per workload and one over all holes, each with ours beside the peer's fastest where it ran; then
    lookahead's speed over greedy's per hole."""
    parts = ["## Speed", "", meta_lines(result.meta), ""]
    groups: list[str | None] = [*result.workloads, None]
    for workload in groups:
        summaries = summarize(result, workload)
        parts.append(f"### {workload or 'all workloads'}")
        parts.append("")
        parts.append(markdown_table(_BENCH_HEADERS, bench_rows(summaries)))
        parts.append("")
        lines = peer_lines(summaries)
        parts.extend([*lines, ""] if lines else [])
    if "lookahead" in result.configs:
        parts += ["### lookahead per hole", "", per_hole_markdown(result), ""]
    return "\n".join(parts)


def per_hole_markdown(result: BenchResult, config: str = "lookahead") -> str:
    """Per hole: greedy's and ``config``'s decode times (each its fastest round), the ratio (greedy's time over
    ``config``'s: its speed over greedy's), the same ratio in the first round (what a user meets) and the median
    of the rounds' ratios, each round's pair run back to back (:meth:`Run.paired_over`: the measure of a hole's
    loss that the host's minute-to-minute drift disturbs least), steps and tokens in passes; then per workload the
    median and the lowest ratio, the lowest in the first round and by paired rounds, and how many fell below
    ``LOSS_BOUND``."""
    greedy = {r.hole_id: r for r in result.runs_of("greedy")}
    rows = []
    ratios: dict[str, list[float]] = {}
    firsts: dict[str, list[float]] = {}
    paired: dict[str, list[float]] = {}
    for run in result.runs_of(config):
        base = greedy[run.hole_id]
        ratio = base.stats.decode_ms / max(run.stats.decode_ms, 1e-9)
        first = base.first_ms / max(run.first_ms, 1e-9)
        ratios.setdefault(run.workload, []).append(ratio)
        pair = run.paired_over(base)
        firsts.setdefault(run.workload, []).append(first)
        paired.setdefault(run.workload, []).append(pair)
        rows.append(
            (
                run.hole_id,
                round(base.stats.decode_ms),
                round(run.stats.decode_ms),
                ratio,
                first,
                pair,
                f"{base.stats.steps} / {run.stats.steps}",
                run.stats.tokens_in_passes,
                "yes" if run.identical else "NO",
            )
        )
    headers = (
        "hole",
        "greedy ms",
        f"{config} ms",
        "speed / greedy's",
        "first round",
        "paired rounds",
        "steps greedy / ours",
        "tokens in passes",
        "identical",
    )
    summary = [
        f"- {workload}: median {statistics.median(values):.2f}x, lowest {min(values):.2f}x over {len(values)} holes;"
        f" first round lowest {_below(firsts[workload])}; paired rounds lowest {_below(paired[workload])}"
        for workload, values in ratios.items()
    ]
    return "\n".join([markdown_table(headers, rows), "", *summary])


def _below(ratios: Sequence[float]) -> str:
    """The lowest of per-hole ratios and how many fell below ``LOSS_BOUND``."""
    return f"{min(ratios):.2f}x, {sum(v < LOSS_BOUND for v in ratios)} below {LOSS_BOUND}x"


def bench_json(result: BenchResult) -> dict[str, Any]:
    return {
        "meta": result.meta,
        "configs": result.configs,
        "holes": [h.to_dict() for h in result.holes],
        "summary": {
            workload or "all": [s.to_dict() for s in summarize(result, workload)]
            for workload in [*result.workloads, None]
        },
        "runs": [r.to_dict() for r in result.runs],
    }


def write_bench(result: BenchResult, out_dir: Path) -> list[Path]:
    """bench.json, bench.md, speedup.png and accepted.png in ``out_dir``; returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [
        _write_text(out_dir / "bench.json", json.dumps(bench_json(result), indent=1)),
        _write_text(out_dir / "bench.md", bench_markdown(result)),
    ]
    written.append(plot_speedups(result, out_dir / "speedup.png"))
    written.append(plot_accepted(result, out_dir / "accepted.png"))
    return written


def _write_text(path: Path, text: str) -> Path:
    path.write_text(text + "\n", encoding="utf-8")
    return path


def _pyplot() -> Any:
    """matplotlib's pyplot on the file-only backend (deferred: a second to import, and only plots need it)."""
    import matplotlib

    matplotlib.use("Agg")  # before pyplot's import: no display
    import matplotlib.pyplot as plt

    return plt


def model_name(meta: dict[str, Any]) -> str:
    """The model as its spec names it ("embedded", an id, a file name): no machine's cache path in a title."""
    spec = str(meta.get("model_spec") or str(meta.get("model", "")).split(" (", 1)[0])
    return Path(spec).name if "/" in spec and Path(spec).exists() else spec


def plot_speedups(result: BenchResult, path: Path) -> Path:
    """Grouped bars: the speedup over plain greedy of each configuration, one group per workload."""
    plt = _pyplot()
    workloads = result.workloads
    configs = list(result.configs)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(configs) * max(1, len(workloads)) / 2), 4.5))
    width = 0.8 / max(1, len(workloads))
    for j, workload in enumerate(workloads):
        speedups = {s.config: s.speedup for s in summarize(result, workload)}
        xs = [i + (j - (len(workloads) - 1) / 2) * width for i in range(len(configs))]
        ax.bar(xs, [speedups.get(c, 0.0) for c in configs], width, label=workload)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(configs)), configs, rotation=35, ha="right")
    ax.set_ylabel("speedup vs plain greedy (geometric mean)")
    ax.set_title(f"decode speedup, {model_name(result.meta)}, {result.meta.get('max_new_tokens')} new tokens")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_accepted(result: BenchResult, path: Path) -> Path:
    """Per configuration, the share of decoding steps that committed 1, 2, ... tokens."""
    plt = _pyplot()
    configs = [c for c in result.configs if any(r.stats.accepted_per_step for r in result.runs_of(c))]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    width = 0.8 / max(1, len(configs))
    top = max((n for r in result.runs for n in r.stats.accepted_per_step), default=1)
    for j, config in enumerate(configs):
        steps = [n for r in result.runs_of(config) for n in r.stats.accepted_per_step]
        shares = [steps.count(n) / len(steps) for n in range(1, top + 1)]
        xs = [n + (j - (len(configs) - 1) / 2) * width for n in range(1, top + 1)]
        ax.bar(xs, shares, width, label=config)
    ax.set_xlabel("tokens committed by a decoding step")
    ax.set_ylabel("share of steps")
    ax.set_xticks(range(1, top + 1))
    ax.set_title("accepted tokens per step (all holes)")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# --- eval ----------------------------------------------------------------------------------------------

_QUALITY_HEADERS = (
    "workload",
    "workspace",
    "stop rules / trim",
    "holes",
    "exact match",
    "edit similarity",
    "repeats suffix",
    "past block",
)


def quality_markdown(result: QualityResult) -> str:
    rows = [
        [
            s.workload,
            "on" if s.workspace else "off",
            s.variant,
            s.holes,
            f"{s.exact}/{s.holes}",
            s.similarity,
            f"{s.repeats_suffix}/{s.holes}",
            f"{s.past_block}/{s.holes}",
        ]
        for s in summarize_quality(result)
    ]
    return "\n".join(["## Quality", "", meta_lines(result.meta), "", markdown_table(_QUALITY_HEADERS, rows), ""])


def write_quality(result: QualityResult, out_dir: Path) -> list[Path]:
    """eval.json and eval.md in ``out_dir``; returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    data = {
        "meta": result.meta,
        "holes": [h.to_dict() for h in result.holes],
        "summary": [s.to_dict() for s in summarize_quality(result)],
        "completions": [s.to_dict() for s in result.scored],
    }
    return [
        _write_text(out_dir / "eval.json", json.dumps(data, indent=1)),
        _write_text(out_dir / "eval.md", quality_markdown(result)),
    ]
