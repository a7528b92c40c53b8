"""`lookahead-lsp bench idle`: the idle daemon's CPU, inotify watches, overflows and change latency in a workspace
with a virtualenv and node_modules (``evaluation/idle_bench.py``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from lookahead_lsp.evaluation.idle_bench import bench_idle


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repo", type=Path, default=None, help="a real repository to copy (default: click's source)")
    parser.add_argument("--ignored", type=int, default=10_000, help="directories under .venv and node_modules")
    parser.add_argument("--workspace", type=Path, default=None, help="measure this checkout as it is instead")
    parser.add_argument("--model", default="embedded", help="model setting")
    parser.add_argument("--idle-s", type=float, default=30.0, help="seconds of idle measured")


def run(args: argparse.Namespace) -> int:
    repo = args.repo
    if repo is None and args.workspace is None:
        import click  # a real, pure-Python repository installed with the project's dependencies

        repo = Path(click.__file__).parent
    report = bench_idle(repo, args.workspace, args.ignored, args.model, args.idle_s)
    print("\n".join(report.lines()), flush=True)
    return 0
