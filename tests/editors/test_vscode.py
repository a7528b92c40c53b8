"""The VS Code extension in real VS Code (code-server) and headless Chromium, against the real daemon with the
embedded model: type in a real file, ghost text appears, Tab accepts it, the saved file holds it.
A screenshot goes to .artifacts/vscode-ghost.png.

Progressive ghost text, with the tiny model slowed by the slow-pass hook and every deadline passed at once: the
ghost text grows without a keystroke, VS Code's accept-word and the extension's accept-line key take its parts.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from tests import slow_passes
from tests.editors.support import ARTIFACTS, REPO, daemon_command, editor_tool, tool, wait_for

pytestmark = [pytest.mark.editor, pytest.mark.real_model]

EXTENSION = REPO / "editors" / "vscode"
HEADER = '"""Small arithmetic helpers."""\n\n\n'  # the file at the start
TYPED = "def add(a, b):"  # typed at its end: the model completes the body


def run(cmd: list[str], cwd: Path, timeout: float, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    return proc.stdout


def build_vsix(out: Path) -> Path:
    """The extension built and packaged from the working tree (npm ci only when node_modules is missing)."""
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed: the VS Code extension cannot be built")
    if not (EXTENSION / "node_modules").is_dir():
        run(["npm", "ci", "--no-audit", "--no-fund"], EXTENSION, 600)
    run(["npm", "run", "build"], EXTENSION, 300)
    vsix = out / "lookahead-lsp.vsix"
    run(["npx", "vsce", "package", "--skip-license", "--allow-missing-repository", "-o", str(vsix)], EXTENSION, 300)
    return vsix


def squash(text: str) -> str:
    return "".join(text.split())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def code_server_running(code_server: Path, dirs: list[str], project: Path, env: dict[str, str], log: Path):
    """code-server serving ``project`` on a free port (yielded); stopped with its process group afterwards."""
    port = free_port()
    args = ["--auth", "none", "--bind-addr", f"127.0.0.1:{port}", "--disable-telemetry", "--disable-update-check",
            "--disable-workspace-trust", "--disable-getting-started-override"]  # fmt: skip
    with open(log, "wb") as err:
        server = subprocess.Popen(
            [str(code_server), *dirs, *args, str(project)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,  # its own process group: the extension host and the daemon stop with it
        )
        try:
            wait_for(lambda: listening(port), 60, "code-server to listen")
            yield port
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)


def drive(tmp_path: Path, settings: dict, driver: dict[str, str], sample_text: str) -> tuple[dict, Path]:
    """Installs the extension into code-server with ``settings``, opens ``sample.py`` (holding ``sample_text``)
    in headless Chromium and runs vscode_ghost.js with ``driver`` on top of its usual environment; returns its
    JSON line and the sample file."""
    code_server = editor_tool("code-server")
    chromium = editor_tool("chromium")
    playwright = tool("node/node_modules/playwright-core", "playwright")
    vsix = build_vsix(tmp_path)

    home = tmp_path / "home"  # code-server, the daemon and Chromium keep their state here
    env = {
        **os.environ,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
    }
    if "LOOKAHEAD_LSP_CACHE" not in env:  # keep the converted embedded model of the real user cache
        from lookahead_lsp.decoder.weights.cache import cache_root

        env["LOOKAHEAD_LSP_CACHE"] = str(cache_root())
    dirs = ["--user-data-dir", str(tmp_path / "ud"), "--extensions-dir", str(tmp_path / "ext")]
    run([str(code_server), *dirs, "--install-extension", str(vsix)], tmp_path, 300, env)

    log = tmp_path / "daemon.log"
    settings = {
        "lookahead.logFile": str(log),
        "workbench.startupEditor": "none",
        "security.workspace.trust.enabled": False,
        "editor.inlineSuggest.enabled": True,
        **settings,
    }
    (tmp_path / "ud" / "User").mkdir(parents=True, exist_ok=True)
    (tmp_path / "ud" / "User" / "settings.json").write_text(json.dumps(settings))
    project = tmp_path / "project"
    project.mkdir()
    sample = project / "sample.py"
    sample.write_text(sample_text)

    with code_server_running(code_server, dirs, project, env, tmp_path / "code-server.log") as port:
        ARTIFACTS.mkdir(exist_ok=True)
        proc = subprocess.run(
            ["node", str(Path(__file__).with_name("vscode_ghost.js"))],
            env={
                **env,
                "PLAYWRIGHT_CORE": str(playwright),
                "CHROMIUM_BIN": str(chromium),
                "URL": f"http://127.0.0.1:{port}/?folder={project}",
                "FILE": sample.name,
                "TIMEOUT_MS": "300000",
                **driver,
            },
            capture_output=True,
            text=True,
            timeout=600,
        )
    daemon_log = log.read_text()[-3000:] if log.exists() else "(no daemon log)"
    assert proc.returncode == 0, f"{proc.stderr[-4000:]}\n--- daemon log:\n{daemon_log}"
    return json.loads(proc.stdout.strip().splitlines()[-1]), sample


def test_vscode_ghost_text_accepted_and_saved(tmp_path: Path) -> None:
    cmd = daemon_command()
    settings = {
        "lookahead.server.command": cmd[0],
        "lookahead.server.args": cmd[1:],
        "lookahead.model": "embedded",
        "lookahead.maxNewTokens": 24,
        # one ghost text, read then accepted: a continuation growing it in between (the test below) is a race here
        "lookahead.progressive": False,
    }
    screenshot = ARTIFACTS / "vscode-ghost.png"
    result, sample = drive(tmp_path, settings, {"TYPE": TYPED, "SCREENSHOT": str(screenshot)}, HEADER)

    ghost = "".join(result["ghost"]).replace("\xa0", " ")
    saved = sample.read_text()
    print("ghost:", repr(ghost), "status:", result["status"], "saved:", saved, sep="\n")
    assert ghost.strip(), f"empty ghost text: {result}"
    # VS Code renders ghost lines as separate elements: compare without whitespace
    assert squash(saved) == squash(HEADER + TYPED + ghost), f"the saved file is not the typed text plus {ghost!r}"
    assert "tok/s" in result["status"], f"no completion stats in the status bar: {result['status']!r}"
    assert "0.5B" in result["status"], f"no model size in the status bar: {result['status']!r}"
    assert screenshot.stat().st_size > 0


GROWING = {
    "lookahead.maxNewTokens": 40,
    "lookahead.decoder": "greedy",
    "lookahead.indexEnabled": False,
    "lookahead.lineDeadlineMs": 0,
    "lookahead.multilineDeadlineMs": 0,
    "lookahead.lineCapMs": 0,  # every deadline passed at once: the first word end shows, the rest streams in
}
GROWING_TYPED = "total = "


def test_vscode_ghost_text_grows_without_a_keystroke_then_word_and_line_accepts(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    cmd = slow_passes.command(60)
    settings = {
        **GROWING,
        "lookahead.server.command": cmd[0],
        "lookahead.server.args": [*cmd[1:], "--log-level", "info", "serve"],
        "lookahead.model": str(tiny_model_dir),
    }
    screenshot = ARTIFACTS / "vscode-ghost-grown.png"
    driver = {"TYPE": GROWING_TYPED, "SCREENSHOT": str(screenshot), "GROW": "1"}
    result, sample = drive(tmp_path, settings, driver, HEADER)

    first, grown = (squash("".join(result[k]).replace("\xa0", " ")) for k in ("ghost", "grown"))
    after_word = squash("".join(result["afterWord"]).replace("\xa0", " "))
    saved = squash(sample.read_text())
    print("first:", first, "grown:", grown, "after a word:", after_word, "saved:", saved, sep="\n")
    assert grown.startswith(first) and len(grown) > len(first), "the ghost text did not grow by itself"
    # A continuation still streaming grows the ghost between two reads: each later state extends the earlier one.
    # The word taken is the start of ``grown`` whose rest the ghost after it shows (maybe grown further), and the
    # line accepted is that word and the rest of the line of the ghost at that moment: it extends both.
    start = squash(HEADER + GROWING_TYPED)
    assert saved.startswith(start), "the typed text is not in the saved file"
    accepted = saved[len(start) :]
    taken = [k for k in range(1, len(grown)) if after_word.startswith(grown[k:])]  # where the word may end
    assert taken, "accepting a word did not take the ghost text's start"
    assert any(accepted.startswith(grown[:k] + after_word) for k in taken), "accepting the line took less than it"
