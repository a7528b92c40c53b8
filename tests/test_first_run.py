"""A newcomer's first run: ``scripts/run.sh complete`` in a fresh copy of the checkout talks while it sets up.

The tracked and new files of this checkout (what a clone has: no .venv, no build outputs) are copied into a
scratch directory, and ``scripts/run.sh complete --json`` runs there once, with the model cache warm (the
user's own, shared): it creates the .venv, installs everything and prepares the model, then completes. stdout
must be the completion's JSON and nothing else; stderr is read line by line, each line timed here, and no
stretch of the run (from its start to its end) may pass :data:`MAX_SILENCE_S` without a line.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.test_docs import ROOT, checkout_files

MAX_SILENCE_S = 10.0
SOURCE = "import os\n\n\ndef add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    "


def copy_checkout(target: Path) -> Path:
    for path in checkout_files(ROOT, ["."]):
        relative = path.relative_to(ROOT)
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target / relative)
    return target


def timed_lines(stream: object, lines: list[tuple[float, str]]) -> None:
    for raw in stream:  # type: ignore[attr-defined]
        lines.append((time.monotonic(), raw.rstrip("\n")))


@pytest.mark.real_model
@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs git and a checkout")
def test_the_first_run_says_what_it_does_and_prints_only_the_completion(tmp_path: Path) -> None:
    checkout = copy_checkout(tmp_path / "checkout")
    assert not (checkout / ".venv").exists() and (checkout / "scripts" / "run.sh").is_file()
    workspace = tmp_path / "ws"
    (workspace / ".git").mkdir(parents=True)
    (workspace / "small.py").write_text(SOURCE)
    env = {key: value for key, value in os.environ.items() if key not in ("VIRTUAL_ENV", "PYTHONPATH")}
    command = ["bash", str(checkout / "scripts" / "run.sh"), "complete", str(workspace / "small.py")]
    command += ["--line", "8", "--character", "4", "--max-new-tokens", "8", "--json"]
    started = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines: list[tuple[float, str]] = []
    reader = threading.Thread(target=timed_lines, args=(process.stderr, lines), daemon=True)
    reader.start()
    try:
        assert process.stdout is not None
        out = process.stdout.read()
        status = process.wait(timeout=1200)
        ended = time.monotonic()
        reader.join(10)
    finally:
        process.kill()
        shutil.rmtree(checkout / ".venv", ignore_errors=True)  # a gigabyte or two
    log = "\n".join(f"[{at - started:6.1f} s] {text}" for at, text in lines)
    assert status == 0, log
    answer = json.loads(out)  # the whole of stdout is one JSON object: the completion
    assert out.count("\n") == 1 and set(answer) == {"text", "token_ids", "stats"} and answer["token_ids"], out
    steps = [text for _, text in lines if text.startswith("setup: ")]
    assert any("installing packages" in text and "minutes" in text for text in steps), log
    assert any("still installing packages" in text for text in steps), log
    times = [started, *(at for at, _ in lines), ended]
    silences = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert max(silences) <= MAX_SILENCE_S, log
