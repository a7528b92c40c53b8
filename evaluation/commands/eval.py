"""`lookahead-lsp eval`: completion quality on holes cut from real code (exact match, edit similarity, and
how often completions repeat the suffix or run past the hole's block), with stop rules and trimming on and
off and with workspace context on and off. See ``evaluation/quality.py``."""

from __future__ import annotations

import argparse
from pathlib import Path

from decoder.backend import local_backend
from decoder.model import stop_token_ids
from evaluation.commands.bench import add_workload_arguments, load, load_holes, progress, run_meta
from evaluation.quality import run_quality
from evaluation.report import quality_markdown, write_quality
from evaluation.speed import ContextBuilder


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_workload_arguments(parser, "fim,repo,midline", max_new_tokens=64)
    parser.add_argument("--no-heal", action="store_true", help="no token healing in the prompt")
    parser.add_argument(
        "--deadlines",
        type=float,
        default=None,
        metavar="MS",
        help="also score what the daemon shows with its default deadlines on this machine, had decoding begun "
        "MS milliseconds after the keystroke (its prompt and prefill time: about 120 on a 2-core CPU)",
    )


def run(args: argparse.Namespace) -> int:
    corpus, holes = load_holes(args)
    loaded = load(args)
    builder = ContextBuilder(corpus, loaded.tokenizer, args.token_budget, heal=not args.no_heal)
    meta = {
        **run_meta(args, corpus, loaded),
        "decoder": "lookahead (greedy-identical)",
        "heal": not args.no_heal,
        "deadlines_after_ms": args.deadlines,
    }
    result = run_quality(
        local_backend(loaded.model, "lookahead"),
        builder,
        holes,
        args.max_new_tokens,
        stop_token_ids(loaded.tokenizer),
        meta,
        progress,
        args.deadlines,
    )
    print(quality_markdown(result))
    if args.out:
        for path in write_quality(result, Path(args.out)):
            progress(f"wrote {path}")
    return 0
