"""Command line: ``lookahead-lsp serve|complete|index|model`` and the evaluation's ``bench NAME`` and ``eval NAME``.

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
    "bench": ("", "Run a named benchmark: bench NAME [ARGS], bench --list."),
    "eval": ("", "Run a named quality suite: eval NAME [ARGS], eval --list."),
}
"""Subcommand -> (module under ``lookahead_lsp``, help); ``bench`` and ``eval`` name theirs in :data:`GROUPS`."""

BENCHMARKS: dict[str, str] = {
    "speed": "Decoders' speed on fill-in-the-middle holes in real code.",
    "layouts": "Prompt layouts and budgets: exact match against keystroke cost.",
    "sessions": "Typing sessions through the daemon: keystroke latency.",
    "pauses": "After a pause: first ghost text, whole line and block, exact.",
    "remote": "The local decoder against a remote engine, keystroke latency.",
    "index": "The workspace n-gram index at workspace scale.",
    "passes": "Forward-pass time by tokens: ours and transformers'.",
    "oneshot": "Lookahead against greedy, one `complete` process per run.",
    "memory": "The daemon's resident memory over rounds of documents.",
    "idle": "The idle daemon in a workspace with a virtualenv: CPU, watches.",
    "typing": "Typing line after line: what each keystroke re-prefills.",
    "switch": "Back in a file after another: a KV cache per document or one.",
}
SUITES: dict[str, str] = {
    "repo": "Completion quality on fill-in-the-middle holes cut from real code.",
    "infill": "HumanEval infilling (Python, JS, Java): the daemon as an editor shows it beside the raw model.",
}
GROUPS: dict[str, dict[str, str]] = {"bench": BENCHMARKS, "eval": SUITES}
"""Commands that run one of several named modules: name -> help; the module is ``evaluation/commands/<name>.py``
(:data:`MODULE_OF` names the others)."""
MODULE_OF = {"speed": "bench", "repo": "eval"}


def member_module(name: str) -> str:
    """The module (under ``lookahead_lsp``) of a benchmark or suite."""
    return f"evaluation.commands.{MODULE_OF.get(name, name)}"


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


def build_parser(command: str | None = None, name: str | None = None) -> argparse.ArgumentParser:
    """The parser; only the module of ``command`` (of ``name`` for a group) is imported, for its arguments."""
    parser = argparse.ArgumentParser(prog="lookahead-lsp", description=__doc__.splitlines()[0])
    add_global_arguments(parser)
    subparsers = parser.add_subparsers(dest="command", required=True)
    for cmd, (module_name, help_text) in COMMANDS.items():
        sub = subparsers.add_parser(cmd, help=help_text, description=help_text)
        if cmd in GROUPS:
            add_group(sub, GROUPS[cmd], name if cmd == command else None)
        elif cmd == command:
            importlib.import_module(f"lookahead_lsp.{module_name}").add_arguments(sub)
    return parser


def add_group(parser: argparse.ArgumentParser, members: dict[str, str], chosen: str | None) -> None:
    """``--list`` and one sub-command per member; only ``chosen``'s module is imported."""
    parser.add_argument("--list", action="store_true", help="list the names, one line each")
    names = parser.add_subparsers(dest="name", metavar="NAME", title="names")
    for member, help_text in members.items():
        sub = names.add_parser(member, help=help_text, description=help_text)
        if member == chosen:
            importlib.import_module(f"lookahead_lsp.{member_module(member)}").add_arguments(sub)


def listing(members: dict[str, str]) -> str:
    """``NAME  help`` per line, the names aligned."""
    width = max(map(len, members))
    return "\n".join(f"{member:<{width}}  {help_text}" for member, help_text in members.items())


def add_global_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--log-level", default="warning", help="debug, info, warning or error")
    parser.add_argument("--log-file", default=None, help="write logs to this file instead of stderr")


def command_of(argv: Sequence[str]) -> tuple[str | None, str | None]:
    """The subcommand ``argv`` names (its first positional argument after the global options), if any, and for
    ``bench`` or ``eval`` the name that follows it (None when there is none or it is unknown)."""
    pre = argparse.ArgumentParser(add_help=False)
    add_global_arguments(pre)
    pre.add_argument("command", nargs="?")
    known, rest = pre.parse_known_args(argv)
    if known.command not in COMMANDS:
        return None, None
    members = GROUPS.get(known.command, {})
    return known.command, rest[0] if rest and rest[0] in members else None


def module_of(args: argparse.Namespace) -> str:
    """The module that runs the parsed command; a group's name missing is a UsageError."""
    if args.command not in GROUPS:
        return COMMANDS[args.command][0]
    members = GROUPS[args.command]
    if args.name is None:
        raise UsageError(f"which one? {', '.join(members)} (--list says what each does)")
    return member_module(args.name)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(*command_of(argv)).parse_args(argv)
    try:
        configure_logging(args.log_level, args.log_file)
    except OSError as exc:
        print(f"lookahead-lsp: error: --log-file {args.log_file}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    if args.command in GROUPS and args.list:
        print(listing(GROUPS[args.command]))
        return 0
    try:
        return int(importlib.import_module(f"lookahead_lsp.{module_of(args)}").run(args))
    except UsageError as exc:
        print(f"lookahead-lsp {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    # `python -m lookahead_lsp.lsp_server.cli`: this file runs as __main__, while the commands raise the package
    # module's UsageError, another class: main from that module catches them (a usage error, not a traceback)
    sys.exit(importlib.import_module("lookahead_lsp.lsp_server.cli").main())
