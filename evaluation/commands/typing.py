"""`lookahead-lsp bench typing`: typing line after line without a model, what each keystroke re-prefills with the
prompt's slow parts chosen afresh and kept per document (``evaluation/typing_drift.py``)."""

from __future__ import annotations

import argparse

from lookahead_lsp.decoder.runtime.model import load_model
from lookahead_lsp.evaluation.speed import ContextBuilder
from lookahead_lsp.evaluation.typing_drift import MODES, completer, markdown, merge, type_file
from lookahead_lsp.evaluation.workloads import Corpus
from lookahead_lsp.lsp_server.commands.index import load_tokenizer
from lookahead_lsp.lsp_server.config import Config
from lookahead_lsp.lsp_server.model_host import chosen_spec


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", required=True, help="directory of real code (the workspace)")
    parser.add_argument("--files", type=int, default=6, help="the largest files of the corpus typed in")
    parser.add_argument("--first-line", type=int, default=60, help="the first line typed in each file")
    parser.add_argument("--lines", type=int, default=96, help="lines typed in each file")
    parser.add_argument("--device", default="cpu", help="the device whose prompt layout and budget apply")
    parser.add_argument("--model", default="embedded", help="the model whose tokenizer counts")
    parser.add_argument("--complete-every", type=int, default=0, help="also complete every N-th line's start (model)")
    parser.add_argument("--max-new-tokens", type=int, default=48)


def run(args: argparse.Namespace) -> int:
    corpus = Corpus.load(args.corpus)
    layout, budget = Config().prompt_settings(args.device, chosen_spec(args.model))  # the daemon's "auto"
    anchored = args.device == "cpu"  # as the daemon: prefixes follow the anchors on a CPU
    tokenizer = load_tokenizer(args.model)
    context = ContextBuilder(corpus, tokenizer, budget, heal=True, layout=layout, anchored=anchored)  # type: ignore[arg-type]
    files = sorted((f for f in corpus.files if f.text.count("\n") > args.first_line), key=lambda f: -len(f.text))
    files = files[: args.files]
    loaded = load_model(chosen_spec(args.model)) if args.complete_every > 0 else None
    rows = []
    for mode in MODES:
        complete = completer(loaded, args.max_new_tokens) if loaded is not None else None
        every = max(args.complete_every, 1)
        rows.append(merge([type_file(context, f, args.first_line, args.lines, mode, complete, every) for f in files]))
    print(f"{corpus.name}: {len(files)} files, lines {args.first_line}.. ({args.lines} each), {layout} {budget} tokens")
    print(markdown(rows))
    return 0
