"""Helpers for the editor tests: real editors from .tools/ (scripts/get-editors.sh installs them when missing).

A test whose editor cannot be had is skipped with the reason, never passed.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

REPO = Path(__file__).resolve().parents[2]
TOOLS = Path(os.environ.get("LOOKAHEAD_TOOLS") or REPO / ".tools")  # as scripts/get-editors.sh
ARTIFACTS = REPO / ".artifacts"
DAEMON = REPO / ".venv" / "bin" / "lookahead-lsp"

T = TypeVar("T")


def tool(relative: str, target: str) -> Path:
    """``.tools/<relative>``; runs ``scripts/get-editors.sh <target>`` when it is missing and skips the test, with
    the script's reason, when it stays missing."""
    path = TOOLS / relative
    if not path.exists():
        proc = subprocess.run(
            ["bash", str(REPO / "scripts" / "get-editors.sh"), target],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if not path.exists():
            said = " | ".join(proc.stderr.strip().splitlines()[-3:])
            pytest.skip(f"{relative} is not available: scripts/get-editors.sh {target}: {said}")
    return path


def editor_tool(name: str) -> Path:
    """An editor or browser in ``.tools/bin`` (its get-editors.sh target has the same name)."""
    return tool(f"bin/{name}", name)


def daemon_command() -> list[str]:
    if not DAEMON.exists():
        pytest.skip(f"{DAEMON} is missing (pip install -e . into .venv)")
    return [str(DAEMON), "--log-level", "info", "serve"]


def wait_for(predicate: Callable[[], T], timeout: float, what: str) -> T:
    """The first truthy value of ``predicate()``, polled until ``timeout`` seconds; fails naming ``what``."""
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)
