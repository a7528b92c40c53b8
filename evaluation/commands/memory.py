"""`lookahead-lsp bench memory`: the daemon's resident memory over rounds of documents opened, typed into and
closed, where it goes (the daemon's own breakdown) and llama-server's beside it (``evaluation/memory_rounds.py``)."""

from __future__ import annotations

import argparse

from lookahead_lsp.evaluation.memory_rounds import run_rounds


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="embedded", help="model setting (a directory, e.g. the tiny test model)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--docs", type=int, default=20)
    parser.add_argument("--keys", type=int, default=21)
    parser.add_argument("--complete-every", type=int, default=4, help="a completion after each key in every Nth doc")
    parser.add_argument("--no-peer", action="store_true", help="no llama-server beside the daemon")


def run(args: argparse.Namespace) -> int:
    return run_rounds(args.model, args.rounds, args.docs, args.keys, args.complete_every, not args.no_peer)
