"""What this run's scripts share: `lookahead-lsp bench`'s arguments read, its holes and model loaded, the daemon's
prompt builder for them."""

import argparse
from collections.abc import Sequence
from typing import Any

from lookahead_lsp.evaluation.commands import bench
from lookahead_lsp.evaluation.speed import ContextBuilder


def load(argv: Sequence[str]) -> tuple[argparse.Namespace, list[Any], Any, ContextBuilder]:
    """(arguments, holes, the loaded model, the prompt builder) from `bench`'s arguments in ``argv``."""
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    args = parser.parse_args(list(argv))
    corpus, holes = bench.load_holes(args)
    loaded = bench.load(args)
    return args, holes, loaded, ContextBuilder(corpus, loaded.tokenizer, args.token_budget)
