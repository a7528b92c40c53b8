"""`lookahead-lsp bench index`: the workspace n-gram index at workspace scale (``evaluation/index_bench.py``)."""

from __future__ import annotations

import argparse
import json

from lookahead_lsp.evaluation.index_bench import run_index_bench


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tokens", type=int, default=10_000_000)
    parser.add_argument("--corpus-chars", type=int, default=4_000_000, help="real text to tokenize (~1M tokens)")
    parser.add_argument("--mutate", type=float, default=0.03)
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--max-len", type=int, default=7)
    parser.add_argument("--max-count", type=int, default=8)
    parser.add_argument("--update-rounds", type=int, default=50)
    parser.add_argument("--model", default="embedded", help="whose tokenizer: 'embedded', a directory or an HF id")
    parser.add_argument("--seed", type=int, default=0)


def run(args: argparse.Namespace) -> int:
    print(json.dumps(run_index_bench(args), indent=2))
    return 0
