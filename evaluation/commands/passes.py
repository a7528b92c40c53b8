"""`lookahead-lsp bench passes`: forward-pass time by tokens in the pass, the daemon's model against the same
weights as transformers loads them (``evaluation/pass_cost.py``)."""

from __future__ import annotations

import argparse

from lookahead_lsp.evaluation.pass_cost import KINDS, compare
from lookahead_lsp.lsp_server.cli import UsageError
from lookahead_lsp.lsp_server.model_host import chosen_spec


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        default="embedded",
        help="a model (auto: as the daemon chooses), or several comma-separated (interleaved)",
    )
    parser.add_argument("--context", type=int, default=800, help="tokens in the cache before the passes")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument(
        "--only", default=",".join(KINDS), help=f"comma-separated models to time (default: {','.join(KINDS)})"
    )


def run(args: argparse.Namespace) -> int:
    only = tuple(name.strip() for name in args.only.split(",") if name.strip())
    if not only or set(only) - set(KINDS):
        raise UsageError(f"--only: choose among {', '.join(KINDS)}")
    models = ",".join(chosen_spec(model.strip()) for model in args.model.split(","))
    print(compare(models, args.context, args.repeats, only))
    return 0
