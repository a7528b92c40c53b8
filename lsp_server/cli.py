"""Command line: ``lookahead-lsp serve|complete|index|model`` and the evaluation commands ``bench|eval|bench-*``.

Each subcommand lives in a module with ``add_arguments(parser)`` and ``run(args) -> int``: the daemon's in
``lsp_server/commands/<name>.py``, the evaluation's in ``evaluation/commands/<name>.py``. Modules are named
here as strings and only the chosen command's is imported: ``lsp_server`` never imports ``evaluation`` (the
package graph in docs/architecture.md), ``--help`` is fast, and a command module imports what it needs at its
top. Logs go to stderr or a file, never to stdout: in stdio mode stdout carries the protocol.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("lsp_server.commands.serve", "Run the LSP daemon (stdio by default)."),
    "complete": ("lsp_server.commands.complete", "Complete at a position in a file and print the completion."),
    "index": ("lsp_server.commands.index", "Build or refresh the workspace n-gram index."),
    "model": ("lsp_server.commands.model", "Prepare or inspect the model (assemble and convert the embedded default)."),
    "bench": ("evaluation.commands.bench", "Benchmark decoders on fill-in-the-middle holes in real code."),
    "eval": ("evaluation.commands.eval", "Measure completion quality on fill-in-the-middle holes."),
    "bench-layouts": ("evaluation.commands.layouts", "Prompt layouts and budgets: exact match against keystroke cost."),
    "bench-sessions": ("evaluation.commands.sessions", "Typing sessions through the daemon: keystroke latency."),
    "bench-pauses": ("evaluation.commands.pauses", "After a pause: first ghost text, whole line and block, exact."),
    "bench-remote": ("evaluation.commands.remote", "The local decoder against a remote engine, keystroke latency."),
    "bench-index": ("evaluation.commands.index", "The workspace n-gram index at workspace scale."),
    "bench-passes": ("evaluation.commands.passes", "Forward-pass time by tokens: ours and transformers'."),
    "bench-oneshot": ("evaluation.commands.oneshot", "Lookahead against greedy, one `complete` process per run."),
    "bench-memory": ("evaluation.commands.memory", "The daemon's resident memory over rounds of documents."),
    "bench-idle": ("evaluation.commands.idle", "The idle daemon in a workspace with a virtualenv: CPU, watches."),
    "bench-typing": ("evaluation.commands.typing", "Typing line after line: what each keystroke re-prefills."),
    "bench-switch": ("evaluation.commands.switch", "Back in a file after another: a KV cache per document or one."),
    "eval-infill": (
        "evaluation.commands.infill",
        "Infilling suites (HumanEval FIM, Python/JS/Java): the daemon as the editor shows it beside the raw model.",
    ),
}
"""Subcommand -> (module under ``lookahead_lsp``, help)."""


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


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; only ``command``'s module is imported (for its arguments): the others are not loaded."""
    parser = argparse.ArgumentParser(prog="lookahead-lsp", description=__doc__.splitlines()[0])
    add_global_arguments(parser)
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name, (module_name, help_text) in COMMANDS.items():
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        if name == command:
            importlib.import_module(f"lookahead_lsp.{module_name}").add_arguments(sub)
    return parser


def add_global_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--log-level", default="warning", help="debug, info, warning or error")
    parser.add_argument("--log-file", default=None, help="write logs to this file instead of stderr")


def command_of(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names (its first positional argument after the global options), if any."""
    pre = argparse.ArgumentParser(add_help=False)
    add_global_arguments(pre)
    pre.add_argument("command", nargs="?")
    known, _ = pre.parse_known_args(argv)
    return known.command if known.command in COMMANDS else None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(command_of(argv)).parse_args(argv)
    try:
        configure_logging(args.log_level, args.log_file)
    except OSError as exc:
        print(f"lookahead-lsp: error: --log-file {args.log_file}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"lookahead_lsp.{COMMANDS[args.command][0]}")
    try:
        return int(module.run(args))
    except UsageError as exc:
        print(f"lookahead-lsp {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
