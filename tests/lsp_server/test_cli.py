"""The command line: six commands, ``bench NAME`` and ``eval NAME`` by name, and only the chosen module loaded
(`--help` and `serve` import no evaluation module and no torch)."""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from lookahead_lsp.lsp_server.cli import BENCHMARKS, GROUPS, SUITES, build_parser, command_of, main

ROOT = Path(__file__).resolve().parents[2]
LOADED = (
    "import sys\n"
    "from lookahead_lsp.lsp_server.cli import build_parser, command_of\n"
    "build_parser(*command_of(sys.argv[1:]))\n"
    "tops = {m.removeprefix('lookahead_lsp.').split('.')[0] for m in sys.modules}\n"
    "print(sorted(tops & {'evaluation', 'torch', 'transformers'}))\n"
)
DOCUMENTED = re.compile(r"lookahead-lsp (bench|eval)\b([^`\n]*)")
"""A documented ``lookahead-lsp bench|eval ...`` command, up to the end of its code span or line."""


def loaded_by(*argv: str) -> str:
    done = subprocess.run([sys.executable, "-c", LOADED, *argv], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def cli(*argv: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "lookahead_lsp.lsp_server.cli", *argv]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_the_command_is_the_first_positional_after_the_global_options() -> None:
    assert command_of(["--log-level", "info", "bench", "speed", "--holes", "1"]) == ("bench", "speed")
    assert command_of(["complete", "eval", "--line", "1"]) == ("complete", None)  # a file named "eval"
    assert command_of(["eval", "--list"]) == ("eval", None)
    assert command_of(["bench", "nonsense"]) == ("bench", None)
    assert command_of(["--help"]) == (None, None) and command_of(["nonsense"]) == (None, None)


def test_only_the_chosen_command_module_is_imported() -> None:
    assert loaded_by() == "[]"
    assert loaded_by("serve") == "[]"
    assert loaded_by("bench", "--list") == "[]"
    assert "'evaluation'" in loaded_by("bench", "index")  # the chosen one is (with the tokenizer it loads)


def test_help_lists_six_commands() -> None:
    done = cli("--help")
    assert done.returncode == 0, done.stderr
    assert "{serve,complete,index,model,bench,eval}" in done.stdout
    assert "bench-" not in done.stdout and "eval-" not in done.stdout


@pytest.mark.parametrize("group", list(GROUPS))
def test_list_walks_every_name_and_each_parses_its_own_arguments(group: str) -> None:
    done = cli(group, "--list")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    rows = [line.split(None, 1) for line in done.stdout.splitlines()]
    assert [name for name, _ in rows] == list(GROUPS[group]) and all(text.strip() for _, text in rows)
    for name, _ in rows:
        with pytest.raises(SystemExit) as exit_:
            build_parser(group, name).parse_args([group, name, "--help"])
        assert exit_.value.code == 0
        assert options_of(group, name) > {"-h", "--help"}  # its module added its own


def test_a_group_without_a_name_or_with_an_old_one_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench"]) == 2
    assert "which one? speed, layouts, sessions" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["bench-passes"])
    assert exit_.value.code == 2
    with pytest.raises(SystemExit):
        main(["eval", "infill-old"])


def test_a_command_s_usage_error_run_as_a_module_is_a_message_not_a_traceback() -> None:
    done = cli("model", "--spec", "no-such-model")  # `python -m`: the file runs as __main__, the commands import it
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("lookahead-lsp model: error: 'no-such-model' is not a model name"), done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    done = cli("model", "--prepare", "auto")
    assert done.returncode == 2 and "auto is chosen when a model loads" in done.stderr, done.stderr


def documented_commands() -> list[tuple[str, str, list[str]]]:
    """(document, group, arguments) of every ``lookahead-lsp bench|eval`` command in the README and docs/."""
    found = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for match in DOCUMENTED.finditer(doc.read_text(encoding="utf-8")):
            args = match.group(2).split()
            if args[:1] != ["NAME"]:  # the form itself, `bench NAME`
                found.append((doc.name, match.group(1), args))
    return found


def options_of(group: str, name: str) -> set[str]:
    """The option strings ``lookahead-lsp group name`` takes (argparse keeps its sub-parsers in its actions)."""
    parser = build_parser(group, name)
    for step in (group, name):
        choices = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
        parser = choices[step]
    return {option for action in parser._actions for option in action.option_strings}


def test_every_documented_benchmark_and_suite_runs_under_its_name() -> None:
    """Each documented command names a benchmark or suite, and that command takes every option it is given."""
    commands = documented_commands()
    assert len(commands) > 50 and {group for _, group, _ in commands} == {"bench", "eval"}
    assert {args[0] for _, group, args in commands if group == "bench"} == set(BENCHMARKS)
    assert {args[0] for _, group, args in commands if group == "eval"} == set(SUITES)
    known = {(group, name): options_of(group, name) for group, members in GROUPS.items() for name in members}
    for doc, group, args in commands:
        unknown = [arg for arg in args if arg.startswith("--") and arg.split("=")[0] not in known[group, args[0]]]
        assert unknown == [], f"{doc}: lookahead-lsp {group} {shlex.join(args)}"
