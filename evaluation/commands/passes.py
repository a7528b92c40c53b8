"""`lookahead-lsp bench-passes`: forward-pass time by tokens in the pass, the daemon's model against the same
weights as transformers loads them (``evaluation/pass_cost.py``)."""

from __future__ import annotations

import argparse

from lookahead_lsp.evaluation.pass_cost import compare


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--context", type=int, default=800, help="tokens in the cache before the passes")
    parser.add_argument("--repeats", type=int, default=9)


def run(args: argparse.Namespace) -> int:
    print(compare(args.model, args.context, args.repeats))
    return 0
