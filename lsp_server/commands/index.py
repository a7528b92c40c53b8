"""`lookahead-lsp index DIR`: build or refresh the workspace n-gram index and its snapshot, print its figures.

Loads only the tokenizer (never model weights): the embedded default's converted directory for
``--model embedded``, else a local directory or a Hugging Face id through ``AutoTokenizer``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from transformers import AutoTokenizer

from lookahead_lsp.context.workspace import WorkspaceConfig
from lookahead_lsp.context.workspace_index import WorkspaceIndex
from lookahead_lsp.decoder.runtime.tokenizer import converted_tokenizer
from lookahead_lsp.decoder.weights.embedded import embedded_parts, ensure_converted
from lookahead_lsp.lsp_server.cli import UsageError

BAR_WIDTH = 30


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", nargs="+", help="workspace root(s) to index")
    parser.add_argument("--model", default="embedded", help="whose tokenizer: 'embedded', a directory or an HF id")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON on stdout")
    parser.add_argument("--max-file-bytes", type=int, default=1_000_000, help="skip files larger than this")
    parser.add_argument("--exclude", action="append", default=[], help="gitignore-style glob to leave out")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def load_tokenizer(spec: str) -> Any:
    """The tokenizer of a model spec, without its weights."""
    parts = embedded_parts(spec)
    if parts is not None:
        return converted_tokenizer(ensure_converted(parts=parts))
    if spec.endswith(".gguf"):
        raise UsageError("--model: for a .gguf, pass the converted directory (see `lookahead-lsp model`)")
    try:
        return AutoTokenizer.from_pretrained(spec)
    except (OSError, ValueError) as exc:
        raise UsageError(f"--model {spec}: no tokenizer there ({str(exc).splitlines()[0]})") from exc


def progress_bar(message: str, fraction: float | None) -> None:
    """One self-overwriting line on stderr."""
    done = int(BAR_WIDTH * (fraction or 0.0))
    line = f"\r[{'#' * done}{' ' * (BAR_WIDTH - done)}] {100 * (fraction or 0.0):5.1f}% {message[:40]:<40}"
    sys.stderr.write(line + ("\n" if fraction == 1.0 else ""))
    sys.stderr.flush()


def format_stats(stats: dict[str, Any]) -> str:
    skipped = ", ".join(f"{k} {v}" for k, v in stats["skipped"].items()) or "none"
    return "\n".join(
        [
            f"files:              {stats['files']} ({stats['reused_files']} from the snapshot, "
            f"{stats['tokenized_files']} tokenized)",
            f"tokens:             {stats['tokens']}",
            f"bytes per token:    {stats['bytes_per_token']}",
            f"build seconds:      {stats['build_seconds']}",
            f"tokenize seconds:   {stats['tokenize_seconds']}",
            f"skipped:            {skipped}",
            f"snapshot:           {stats['snapshot_path']}",
        ]
    )


def run(args: argparse.Namespace) -> int:
    roots = [Path(d) for d in args.dir]
    for root in roots:
        if not root.is_dir():
            raise UsageError(f"{root}: not a directory")
    tokenizer = load_tokenizer(args.model)
    config = WorkspaceConfig(max_file_bytes=args.max_file_bytes, exclude=tuple(args.exclude))
    workspace = WorkspaceIndex.for_tokenizer(roots, tokenizer, config)
    stats = workspace.build(progress=None if args.no_progress else progress_bar).to_dict()
    print(json.dumps(stats, indent=2) if args.json else format_stats(stats))
    return 0
