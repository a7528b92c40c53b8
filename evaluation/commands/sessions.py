"""`lookahead-lsp bench sessions`: keystroke-to-ghost-text latency of typing sessions through the daemon, with
background prefill and the cache-aware layout on and off (``evaluation/lsp_replay.py``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from lookahead_lsp.evaluation.lsp_replay import compare_sessions, session_holes, sessions_markdown
from lookahead_lsp.evaluation.workloads import Corpus


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", required=True, help="directory of real code (the workspace)")
    parser.add_argument("--file", required=True, help="the large file to type in, relative to the corpus")
    parser.add_argument("--holes", type=int, default=4)
    parser.add_argument("--keys", type=int, default=8, help="keys typed per hole (at least; through a new line)")
    parser.add_argument("--pause", type=float, default=2.0, help="seconds between opening and the first key")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--json", default=None, help="also write every keystroke here")


def run(args: argparse.Namespace) -> int:
    corpus = Corpus.load(args.corpus)
    holes = session_holes(corpus, args.file, args.holes)
    lines = corpus.file(args.file).text.count("\n")
    keys = compare_sessions(corpus, holes, args.model, args.max_new_tokens, args.pause, args.keys)
    holes_text = f"{len(holes)} holes, {args.keys} keys each, pause {args.pause} s"
    print(f"{corpus.name}: {args.file} ({lines} lines), {holes_text}")
    print(sessions_markdown(keys))
    if args.json:
        Path(args.json).write_text(json.dumps([k.__dict__ for k in keys], indent=1), encoding="utf-8")
    return 0
