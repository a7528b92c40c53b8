"""`lookahead-lsp complete FILE --line L --character C`: one completion through the daemon's pipeline.

Prints the completion (or, with ``--json``, its text, token ids and statistics). Positions are 0-based
and count UTF-16 code units, as in LSP. The whole completion: no keystroke deadlines, unless
``--deadline-ms`` emulates the daemon's (alone: the daemon's own; with a value: line and block deadlines).
A bad position, an unreadable file or a model that cannot load
is a one-line error with exit status 2. A step that takes a while (loading the model, indexing) says so on
stderr, and "still ..." every 8 s (lsp_server/progress_lines.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from lsprotocol import types
from pygls.uris import from_fs_path

from lookahead_lsp.decoder.runtime.model import ModelLoadError
from lookahead_lsp.decoder.types import CancelToken
from lookahead_lsp.lsp_server import pipeline
from lookahead_lsp.lsp_server.cli import UsageError
from lookahead_lsp.lsp_server.config import Config
from lookahead_lsp.lsp_server.documents import Document
from lookahead_lsp.lsp_server.engine import Engine
from lookahead_lsp.lsp_server.model_host import QuietEvents
from lookahead_lsp.lsp_server.progress_lines import ProgressLines


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help="the file to complete in")
    parser.add_argument("--line", type=int, required=True, help="0-based line of the cursor")
    parser.add_argument("--character", type=int, required=True, help="0-based column (UTF-16 code units)")
    parser.add_argument("--decoder", choices=("lookahead", "greedy"), default="lookahead")
    parser.add_argument(
        "--max-new-tokens", type=int, default=None, help=f"default: the daemon's ({Config.max_new_tokens})"
    )
    parser.add_argument(
        "--model",
        default="embedded",
        help="embedded, embedded-1.5b, auto (as the daemon chooses), an HF id or directory, a .gguf",
    )
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--workspace", type=Path, default=None, help="default: the nearest enclosing repo root")
    parser.add_argument("--no-index", action="store_true", help="no workspace index (drafts from the file only)")
    parser.add_argument("--json", action="store_true", help="print text, token ids and statistics as JSON")
    parser.add_argument(
        "--deadline-ms",
        type=int,
        nargs="?",
        const=DAEMON_DEADLINES,
        default=None,
        metavar="MS",
        help="emulate the daemon's keystroke deadlines (alone: its defaults; MS: line and block deadlines, "
        "counted from the start): shows what the daemon shows first. Default: none, the whole completion",
    )


DAEMON_DEADLINES = -1  # --deadline-ms without a value


def repo_root(path: Path) -> Path:
    """The nearest enclosing directory holding ``.git`` (or the file's own directory)."""
    start = path.resolve().parent
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory
    return start


def with_deadlines(config: Config, deadline_ms: int | None) -> Config:
    """``config`` with the deadlines of ``--deadline-ms``: none without it, the daemon's alone, else both at MS
    (and the daemon's runaway-line cap)."""
    if deadline_ms == DAEMON_DEADLINES:
        return config
    cap = config.line_cap_ms if deadline_ms is not None else None
    return dataclasses.replace(config, line_deadline_ms=deadline_ms, multiline_deadline_ms=deadline_ms, line_cap_ms=cap)


def run(args: argparse.Namespace) -> int:
    path: Path = args.file
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from exc
    doc = Document(uri=from_fs_path(str(path.resolve())) or path.as_uri(), text=text)
    inside = args.line >= 0 and args.character >= 0
    offset = doc.offset_at(types.Position(line=args.line, character=args.character), strict=True) if inside else None
    if offset is None:
        raise UsageError(f"position {args.line}:{args.character} is outside {path} ({doc.line_count} lines)")
    if args.max_new_tokens is not None and args.max_new_tokens < 1:
        raise UsageError("--max-new-tokens must be at least 1")
    if args.deadline_ms is not None and args.deadline_ms < 0 and args.deadline_ms != DAEMON_DEADLINES:
        raise UsageError("--deadline-ms must be at least 0")

    config = dataclasses.replace(
        with_deadlines(Config(), args.deadline_ms),
        model=args.model,
        device=args.device,
        dtype=args.dtype,
        decoder=args.decoder,
        index_enabled=not args.no_index,
        max_new_tokens=args.max_new_tokens or Config.max_new_tokens,
    )
    with ProgressLines("complete", forward=QuietEvents()) as progress:  # a slow step says so on stderr
        engine = Engine(config, [args.workspace or repo_root(path)], progress, watch=False)  # one shot: no watcher
        try:
            progress.step(f"loading the model {config.model}")
            engine.load_now()
        except ModelLoadError as exc:
            raise UsageError(f"cannot load the model: {exc}") from exc
        try:
            progress.step("completing")
            completion = pipeline.complete(pipeline.Snapshot(doc, offset, "cli"), engine, CancelToken())
        finally:
            progress.step("saving the workspace index")
            engine.stop()

    if args.json:
        stats = {
            **completion.decode.to_dict(),
            "latency_ms": completion.latency_ms,
            "request": completion.stats(),
        }
        print(json.dumps({"text": completion.text, "token_ids": completion.token_ids, "stats": stats}))
    else:
        print(completion.text)
    return 0
