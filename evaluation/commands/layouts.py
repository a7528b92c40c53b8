"""`lookahead-lsp bench layouts`: exact match and keystroke re-prefill cost per prompt layout and budget
(``evaluation/layouts.py``)."""

from __future__ import annotations

import argparse

from lookahead_lsp.decoder.runtime.model import configure_torch_threads, load_model
from lookahead_lsp.evaluation.commands.bench import progress
from lookahead_lsp.evaluation.layouts import HEADERS, measure
from lookahead_lsp.evaluation.report import markdown_table
from lookahead_lsp.evaluation.workloads import Corpus, make_holes
from lookahead_lsp.lsp_server.model_host import chosen_spec


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", default=None, help="directory of code (default: the pathspec package)")
    parser.add_argument("--workload", default="fim")
    parser.add_argument("--holes", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--budgets", default="256,512,1024")
    parser.add_argument("--layouts", default="psm,spm,psm-short")
    parser.add_argument("--model", default="embedded", help="a model setting (auto: as the daemon chooses)")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: physical cores)")


def run(args: argparse.Namespace) -> int:
    configure_torch_threads(args.threads)
    corpus = Corpus.load(args.corpus)
    holes = make_holes(corpus, args.workload, args.holes, args.seed)
    loaded = load_model(chosen_spec(args.model))
    rows = []
    for budget in (int(b) for b in args.budgets.split(",")):
        for layout in args.layouts.split(","):
            row = measure(loaded, corpus, holes, layout, budget, args.max_new_tokens)
            progress(" | ".join(str(c) for c in row.cells()))
            rows.append(row.cells())
    print(f"{corpus.name}, {args.workload} holes: {len(holes)} (seed {args.seed}), {args.max_new_tokens} new tokens")
    print(markdown_table(HEADERS, rows))
    return 0
