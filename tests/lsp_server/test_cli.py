"""The command line loads only the chosen command: `--help` and `serve` import no evaluation module and no torch."""

from __future__ import annotations

import subprocess
import sys

from lookahead_lsp.lsp_server.cli import command_of

LOADED = (
    "import sys\n"
    "from lookahead_lsp.lsp_server.cli import build_parser, command_of\n"
    "build_parser(command_of(sys.argv[1:]))\n"
    "tops = {m.removeprefix('lookahead_lsp.').split('.')[0] for m in sys.modules}\n"
    "print(sorted(tops & {'evaluation', 'torch', 'transformers'}))\n"
)


def loaded_by(*argv: str) -> str:
    done = subprocess.run([sys.executable, "-c", LOADED, *argv], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_command_is_the_first_positional_after_the_global_options() -> None:
    assert command_of(["--log-level", "info", "bench", "--holes", "1"]) == "bench"
    assert command_of(["complete", "eval", "--line", "1"]) == "complete"  # a file named "eval"
    assert command_of(["--help"]) is None and command_of(["nonsense"]) is None


def test_only_the_chosen_command_module_is_imported() -> None:
    assert loaded_by() == "[]"
    assert loaded_by("serve") == "[]"
    assert "'evaluation'" in loaded_by("bench-index")  # the chosen one is (with the tokenizer it loads)
