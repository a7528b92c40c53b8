"""`lookahead-lsp eval`: completion quality on holes cut from real code (exact match, edit similarity, and
how often completions repeat the suffix or run past the hole's block), with stop rules and trimming on and
off and with workspace context on and off. See ``evaluation/quality.py``."""

from __future__ import annotations

import argparse
from pathlib import Path

from lsp_server.commands.bench import add_workload_arguments, load, load_holes, progress, run_meta


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_workload_arguments(parser, "fim,repo,midline", max_new_tokens=64)
    parser.add_argument("--no-heal", action="store_true", help="no token healing in the prompt")


def run(args: argparse.Namespace) -> int:
    from decoder.lookahead import LookaheadDecoder
    from decoder.model import stop_token_ids
    from evaluation.quality import run_quality
    from evaluation.report import quality_markdown, write_quality
    from evaluation.speed import ContextBuilder

    corpus, holes = load_holes(args)
    loaded = load(args)
    builder = ContextBuilder(corpus, loaded.tokenizer, args.token_budget, heal=not args.no_heal)
    meta = {**run_meta(args, corpus, loaded), "decoder": "lookahead (greedy-identical)", "heal": not args.no_heal}
    result = run_quality(
        LookaheadDecoder(loaded.model),
        builder,
        holes,
        args.max_new_tokens,
        stop_token_ids(loaded.tokenizer),
        meta,
        progress,
    )
    print(quality_markdown(result))
    if args.out:
        for path in write_quality(result, Path(args.out)):
            progress(f"wrote {path}")
    return 0
