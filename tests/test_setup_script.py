"""``scripts/setup.sh`` installs both embedded models by default and leaves the 1.5B out with ``--no-1.5b`` or
``LOOKAHEAD_LSP_NO_1_5B=1``; ``--model-1.5b`` is still accepted; a second run with the same choice installs
nothing (the stamp). Run on a copy of the script whose .venv's ``python`` and ``lookahead-lsp`` are small shell
scripts that write down how they were called, so what the script asks pip and the model step for is seen."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.test_docs import ROOT

RECORDER = '#!/usr/bin/env bash\necho "$(basename "$0") $*" >> "$(dirname "$0")/../calls.log"\n'


@pytest.fixture()
def checkout(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "setup.sh", tmp_path / "scripts" / "setup.sh")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("python", "lookahead-lsp"):
        (bin_dir / name).write_text(RECORDER)
        (bin_dir / name).chmod(0o755)
    return tmp_path


def setup(checkout: Path, *args: str, no_large: str | None = None) -> list[str]:
    """Run the copied setup.sh; the calls it made to the recorders."""
    env = {key: value for key, value in os.environ.items() if key != "LOOKAHEAD_LSP_NO_1_5B"}
    if no_large is not None:
        env["LOOKAHEAD_LSP_NO_1_5B"] = no_large
    log = checkout / ".venv" / "calls.log"
    log.unlink(missing_ok=True)
    done = subprocess.run(
        ["bash", str(checkout / "scripts" / "setup.sh"), "--quiet", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return log.read_text().splitlines() if log.exists() else []


def test_both_models_by_default_and_a_second_run_installs_nothing(checkout: Path) -> None:
    calls = setup(checkout)
    assert len(calls) == 2
    assert calls[0].startswith("python -m pip install") and calls[0].endswith(f"-e {checkout}[embedded,dev,model-1.5b]")
    assert calls[1] == "lookahead-lsp model --prepare embedded --prepare embedded-1.5b --quiet"
    assert setup(checkout) == [calls[1]]  # pip skipped: the stamp holds the same pyproject and extras
    assert setup(checkout, "--model-1.5b") == [calls[1]]  # the old flag: accepted, the default already


@pytest.mark.parametrize(("args", "no_large"), [(("--no-1.5b",), None), ((), "1")])
def test_the_opt_out_leaves_the_large_model_out(checkout: Path, args: tuple[str, ...], no_large: str | None) -> None:
    calls = setup(checkout, *args, no_large=no_large)
    assert calls[0].endswith(f"-e {checkout}[embedded,dev]")
    assert calls[1] == "lookahead-lsp model --prepare embedded --quiet"
    assert setup(checkout, *args, no_large=no_large) == [calls[1]]
    assert setup(checkout, no_large="0")[0].endswith("[embedded,dev,model-1.5b]")  # 0 opts back in: pip again


def test_an_unknown_argument_names_the_flags(checkout: Path) -> None:
    done = subprocess.run(["bash", str(checkout / "scripts" / "setup.sh"), "--tiny"], capture_output=True, text=True)
    assert done.returncode == 2 and "use --quiet, --verbose, --no-1.5b" in done.stderr
