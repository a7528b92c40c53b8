"""The one-shot benchmark: ``lookahead-lsp complete --json`` as a new process per hole and decoder.

An editor's first completion, or a script that asks for one completion, runs in a process that has just loaded
the model: no acceptance record yet, the pass-cost table read from the cache (or measured). Each hole's file is
written as the user has it (``prefix + suffix``) into a scratch copy of the corpus, which is the completion's
workspace; ``complete`` then runs once with each decoder per round (the order alternating between rounds, so
that neither always meets the other's after-effects), and each decoder keeps its fastest decode. The ratio per
hole is greedy's decode time over lookahead's (above 1: lookahead faster); the token ids of every run must be
greedy's.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lookahead_lsp.evaluation.report import markdown_table
from lookahead_lsp.evaluation.workloads import Corpus, Hole

DECODERS = ("greedy", "lookahead")
TIMEOUT_S = 900  # one process: model load, start-up tuning, prefill and decode on a busy 2-core machine


@dataclass
class Run:
    """One ``complete --json`` process: its decode statistics and token ids."""

    decoder: str
    token_ids: list[int]
    stats: dict[str, Any]

    @property
    def decode_ms(self) -> float:
        return float(self.stats["decode_ms"])


@dataclass
class HoleResult:
    """Every run of one hole, per decoder."""

    hole: Hole
    runs: dict[str, list[Run]] = field(default_factory=dict)

    def fastest(self, decoder: str) -> Run:
        return min(self.runs[decoder], key=lambda run: run.decode_ms)

    @property
    def ratio(self) -> float:
        """Greedy's fastest decode time over lookahead's (above 1: lookahead faster)."""
        return self.fastest("greedy").decode_ms / max(self.fastest("lookahead").decode_ms, 1e-9)

    @property
    def identical(self) -> bool:
        reference = self.runs["greedy"][0].token_ids
        return all(run.token_ids == reference for runs in self.runs.values() for run in runs)


def write_workspace(corpus: Corpus, hole: Hole, root: Path) -> Path:
    """The corpus under ``root`` with the hole's file as the user has it; returns that file's path."""
    for source in corpus.files:
        path = root / source.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(hole.text_before_typing if source.path == hole.path else source.text, encoding="utf-8")
    return root / hole.path


def complete_command(
    file: Path, hole: Hole, decoder: str, max_new_tokens: int, model: str, workspace: Path
) -> list[str]:
    """The ``lookahead-lsp complete`` command line for ``hole`` (the cursor at its line and column)."""
    return [
        sys.executable,
        "-m",
        "lookahead_lsp.lsp_server.cli",
        "complete",
        str(file),
        "--line",
        str(hole.line),
        "--character",
        str(hole.column),
        "--decoder",
        decoder,
        "--max-new-tokens",
        str(max_new_tokens),
        "--model",
        model,
        "--workspace",
        str(workspace),
        "--json",
    ]


def run_process(command: Sequence[str], decoder: str) -> Run:
    """Run one ``complete --json`` process; RuntimeError with its last words if it fails."""
    done = subprocess.run(list(command), capture_output=True, text=True, timeout=TIMEOUT_S, env=os.environ.copy())
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[3:6])} exited {done.returncode}: {done.stderr.strip()[-400:]}")
    out = json.loads(done.stdout)
    return Run(decoder, list(out["token_ids"]), dict(out["stats"]))


def run_oneshot(
    corpus: Corpus,
    holes: Sequence[Hole],
    max_new_tokens: int,
    repeats: int,
    model: str,
    progress: Callable[[str], None] | None = None,
) -> list[HoleResult]:
    """Every hole with every decoder, ``repeats`` rounds, one process per run."""
    results = []
    for i, hole in enumerate(holes):
        result = HoleResult(hole, {decoder: [] for decoder in DECODERS})
        with tempfile.TemporaryDirectory(prefix="lookahead-oneshot-") as scratch:
            file = write_workspace(corpus, hole, Path(scratch))
            for round_ in range(max(repeats, 1)):
                order = DECODERS if round_ % 2 == 0 else DECODERS[::-1]
                for decoder in order:
                    command = complete_command(file, hole, decoder, max_new_tokens, model, Path(scratch))
                    result.runs[decoder].append(run_process(command, decoder))
        results.append(result)
        if progress is not None:
            progress(f"hole {i + 1}/{len(holes)} {hole.id}: lookahead {result.ratio:.2f}x greedy")
    return results


def oneshot_markdown(results: Sequence[HoleResult]) -> str:
    """Per hole: each decoder's fastest decode, steps and tokens in passes, and the ratio; then the summary."""
    headers = (
        "hole",
        "lines",
        "greedy decode ms",
        "lookahead decode ms",
        "lookahead speed / greedy's",
        "steps greedy / lookahead",
        "tokens in passes (lookahead)",
        "new tokens",
        "identical",
    )
    rows = []
    for r in results:
        greedy, look = r.fastest("greedy"), r.fastest("lookahead")
        rows.append(
            (
                r.hole.id,
                r.hole.middle.count("\n") + 1,
                round(greedy.decode_ms),
                round(look.decode_ms),
                r.ratio,
                f"{greedy.stats['steps']} / {look.stats['steps']}",
                look.stats["tokens_in_passes"],
                look.stats["new_tokens"],
                "yes" if r.identical else "NO",
            )
        )
    table = markdown_table(headers, rows)
    ratios = [r.ratio for r in results]
    if not ratios:
        return table
    geomean = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
    return (
        f"{table}\n\n{len(ratios)} holes: lookahead's speed over greedy's median {statistics.median(ratios):.2f}x, "
        f"geometric mean {geomean:.2f}x, lowest {min(ratios):.2f}x, highest {max(ratios):.2f}x; "
        f"identical {sum(r.identical for r in results)}/{len(results)}"
    )


def oneshot_json(results: Sequence[HoleResult]) -> list[dict[str, Any]]:
    return [
        {
            **r.hole.to_dict(),
            "ratio": round(r.ratio, 4),
            "identical": r.identical,
            "runs": {decoder: [run.stats for run in runs] for decoder, runs in r.runs.items()},
        }
        for r in results
    ]
