"""`lookahead-lsp bench pauses`: what a typist sees after a pause, through the daemon (progressive ghost text):
the first ghost text, the whole line, the whole block, exact at 1 s and 3 s, per mode (``evaluation/lsp_replay.py``:
progressive, deadlines, no deadlines, the old word cut)."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

from lookahead_lsp.evaluation.lsp_replay import (
    DEADLINE_MODES,
    PAUSE_MODES,
    compare_pauses,
    pause_holes,
    pauses_from_json,
    pauses_markdown,
    pauses_to_json,
)
from lookahead_lsp.evaluation.workloads import Corpus
from lookahead_lsp.lsp_server.cli import UsageError
from lookahead_lsp.lsp_server.config import Config
from lookahead_lsp.lsp_server.model_host import chosen_spec


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", default=None, help="directory of real code (the workspace)")
    parser.add_argument("--pauses", type=int, default=8, help="pauses: half lines from a random column, half blocks")
    parser.add_argument(
        "--modes", default=",".join(DEADLINE_MODES), help=f"comma-separated, of: {', '.join(PAUSE_MODES)}"
    )
    parser.add_argument("--max-new-tokens", type=int, default=Config.max_new_tokens, help="default: the daemon's")
    parser.add_argument("--model", default="embedded", help="a model setting (auto: as the daemon chooses, named)")
    parser.add_argument("--json", default=None, help="also write every pause's shown texts here")
    parser.add_argument(
        "--baseline-command",
        default=None,
        metavar="CMD",
        help="also another build's daemon (a shell-quoted command that serves LSP on stdio) with its own defaults, "
        "as the mode 'baseline', taking turns with the others",
    )
    parser.add_argument("--table", default=None, help="instead: the table of the JSON an earlier run wrote")


def run(args: argparse.Namespace) -> int:
    if args.table:
        print(pauses_markdown(pauses_from_json(json.loads(Path(args.table).read_text(encoding="utf-8")))))
        return 0
    if not args.corpus:
        raise UsageError("--corpus is needed (or --table)")
    corpus = Corpus.load(args.corpus)
    holes = pause_holes(corpus, args.pauses)
    baseline = shlex.split(args.baseline_command) if args.baseline_command else None
    model = chosen_spec(args.model)  # "auto": the model the daemon would load, named in the report
    pauses = compare_pauses(corpus, holes, model, args.max_new_tokens, args.modes.split(","), baseline)
    print(f"{corpus.name}: {len(holes)} pauses, model {model}, max {args.max_new_tokens} new tokens")
    print(pauses_markdown(pauses))
    if args.json:
        Path(args.json).write_text(json.dumps(pauses_to_json(pauses), indent=1), encoding="utf-8")
    return 0
