"""Command line: ``lookahead-lsp serve|complete|index|bench|eval|model``.

Each subcommand lives in ``lsp_server/commands/<name>.py`` with ``add_arguments(parser)`` and
``run(args) -> int``; heavy imports (torch, transformers) happen inside ``run`` so that ``--help`` is fast.
Logs go to stderr or a file, never to stdout: in stdio mode stdout carries the protocol.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

COMMANDS: dict[str, str] = {
    "serve": "Run the LSP daemon (stdio by default).",
    "complete": "Complete at a position in a file and print the completion.",
    "index": "Build or refresh the workspace n-gram index.",
    "bench": "Benchmark decoders on fill-in-the-middle holes in real code.",
    "eval": "Measure completion quality on fill-in-the-middle holes.",
    "model": "Prepare or inspect the model (assemble and convert the embedded default).",
}


class UsageError(Exception):
    """A bad argument or input: printed as one line, exit status 2."""


def configure_logging(level: str, log_file: str | None) -> None:
    """Log to ``log_file`` (or stderr); an OSError (a bad path) leaves the previous logging as it was."""
    handler: logging.Handler = logging.FileHandler(log_file) if log_file else logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    old, root.handlers[:] = list(root.handlers), [handler]
    for previous in old:
        previous.close()
    root.setLevel(level.upper())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lookahead-lsp", description=__doc__.splitlines()[0])
    parser.add_argument("--log-level", default="warning", help="debug, info, warning or error")
    parser.add_argument("--log-file", default=None, help="write logs to this file instead of stderr")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name, help_text in COMMANDS.items():
        module = importlib.import_module(f"lsp_server.commands.{name}")
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        configure_logging(args.log_level, args.log_file)
    except OSError as exc:
        print(f"lookahead-lsp: error: --log-file {args.log_file}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"lsp_server.commands.{args.command}")
    try:
        return int(module.run(args))
    except UsageError as exc:
        print(f"lookahead-lsp {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
