"""`lookahead-lsp bench switch`: back in a file after working in another, through the daemon: the first ghost
text with a KV cache per document (``kvSlots 2``, the default) and with one shared cache
(``evaluation/switch_bench.py``)."""

from __future__ import annotations

import argparse

from lookahead_lsp.evaluation.lsp_replay import pause_holes
from lookahead_lsp.evaluation.switch_bench import compare_switches, hole_pairs, switches_markdown
from lookahead_lsp.evaluation.workloads import Corpus


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", required=True, help="directory of real code (the workspace)")
    parser.add_argument("--pairs", type=int, default=10, help="pairs of holes in two different files")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--model", default="embedded")


def run(args: argparse.Namespace) -> int:
    corpus = Corpus.load(args.corpus)
    pairs = hole_pairs(pause_holes(corpus, 2 * args.pairs + 4), args.pairs)
    returns = compare_switches(corpus, pairs, args.model, args.max_new_tokens)
    print(f"{corpus.name}: {len(pairs)} returns to a file after another, max {args.max_new_tokens} new tokens")
    print(switches_markdown(returns))
    return 0
