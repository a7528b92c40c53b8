"""`lookahead-lsp bench oneshot`: lookahead against greedy where each completion is a new process
(``lookahead-lsp complete --json``), on block holes of a corpus (``evaluation/oneshot.py``)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lookahead_lsp.evaluation.oneshot import oneshot_json, oneshot_markdown, run_oneshot
from lookahead_lsp.evaluation.report import machine_description
from lookahead_lsp.evaluation.workloads import Corpus, make_holes
from lookahead_lsp.lsp_server.cli import UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", required=True, help="directory of real code (each hole's workspace)")
    parser.add_argument("--workload", default="block", help="the holes' workload (default: block)")
    parser.add_argument("--holes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=3, help="rounds per hole; each decoder keeps its fastest")
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--json", default=None, help="also write every run's statistics here")


def run(args: argparse.Namespace) -> int:
    try:
        corpus = Corpus.load(args.corpus)
        holes = make_holes(corpus, args.workload, args.holes, args.seed)
    except (FileNotFoundError, ValueError) as exc:
        raise UsageError(str(exc)) from exc
    if not holes:
        raise UsageError(f"no {args.workload} holes in {args.corpus}")
    results = run_oneshot(corpus, holes, args.max_new_tokens, args.repeats, args.model, print_progress)
    machine = machine_description()
    print(
        f"{corpus.name}: {len(holes)} {args.workload} holes, {args.max_new_tokens} new tokens at most, "
        f"{args.repeats} rounds, one process per run; {machine['cpu']} ({machine['cpu_flags']}), "
        f"native kernel {machine['native_kernel_isa']}"
    )
    print(oneshot_markdown(results))
    if args.json:
        Path(args.json).write_text(json.dumps(oneshot_json(results), indent=1), encoding="utf-8")
    return 0


def print_progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
