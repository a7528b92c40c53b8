"""What an idle daemon costs in a real project with a virtualenv and node_modules beside the code.

``lookahead-lsp bench idle`` copies a real repository into a scratch workspace, adds ``--ignored`` directories
under ``.venv`` (with its ``pyvenv.cfg``) and ``node_modules`` (both in the ``.gitignore``, as in most projects),
starts the daemon over stdio with the real model and, once the workspace index is built, prints: the daemon's
CPU-seconds over ``--idle-s`` seconds of idle, the inotify watches it holds (``/proc/PID/fdinfo``), the directories
the index reads (the watches' floor), the overflow warnings in its log, and how long a file created, modified and
deleted in an indexed directory takes to show in the index (``lookahead.stats``). ``--workspace DIR`` measures an
existing checkout as it is instead (it writes and removes one probe file in DIR's root, nothing else).
A benchmark that prints figures; it asserts nothing.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lookahead_lsp.context.workspace import scan
from lookahead_lsp.evaluation.lsp_client import LspClient

PROBE = "lookahead_bench_idle_probe.py"
PROBE_TEXT = "def probe_{n}(value):\n    return value * {n}\n"


@dataclass(frozen=True)
class IdleReport:
    """The figures of one run."""

    workspace: str
    indexed_dirs: int
    indexed_files: int
    ignored_dirs: int
    build_s: float
    idle_cpu_s: float
    idle_s: float
    watches: int
    overflow_warnings: int
    created_s: float | None
    modified_s: float | None
    deleted_s: float | None

    def lines(self) -> list[str]:
        def seconds(value: float | None) -> str:
            return "not seen" if value is None else f"{value:.2f} s"

        return [
            f"workspace: {self.workspace}",
            f"indexed: {self.indexed_files} files in {self.indexed_dirs} directories "
            f"(plus {self.ignored_dirs} ignored directories); index built and watching after {self.build_s:.1f} s",
            f"idle CPU: {self.idle_cpu_s:.2f} CPU-s over {self.idle_s:.0f} s",
            f"inotify watches held: {self.watches} (directories the index reads: {self.indexed_dirs})",
            f"overflow warnings logged: {self.overflow_warnings}",
            f"reflected in the index: created {seconds(self.created_s)}, modified {seconds(self.modified_s)}, "
            f"deleted {seconds(self.deleted_s)}",
        ]


def make_workspace(repo: Path, target: Path, ignored: int) -> Path:
    """A copy of ``repo`` (its own ignored trees left out) plus ``ignored`` directories, half under a virtualenv
    ``.venv`` and half under ``node_modules``, each holding a small source file; returns the workspace."""
    workspace = target / repo.name
    shutil.copytree(repo, workspace, ignore=shutil.ignore_patterns(".git", ".venv", "node_modules", "__pycache__"))
    with (workspace / ".gitignore").open("a") as gitignore:
        gitignore.write("\n.venv/\nnode_modules/\n")
    venv = workspace / ".venv"
    site = venv / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\ninclude-system-site-packages = false\n")
    for n in range(ignored):
        parent = site / f"pkg{n // 50}" / f"mod{n}" if n % 2 == 0 else workspace / "node_modules" / f"pkg{n // 50}"
        directory = parent / f"lib{n}"
        directory.mkdir(parents=True, exist_ok=True)
        (directory / ("index.js" if n % 2 else "__init__.py")).write_text(f"// {n}\n" if n % 2 else f"# {n}\n")
    return workspace


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process, all its threads (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def inotify_watches(pid: int) -> int:
    """The inotify watches a process holds, over all its inotify descriptors."""
    count = 0
    for info in Path(f"/proc/{pid}/fdinfo").iterdir():
        try:
            count += sum(line.startswith("inotify wd:") for line in info.read_text().splitlines())
        except OSError:
            continue  # closed meanwhile
    return count


def index_stats(client: LspClient) -> dict[str, Any] | None:
    index: dict[str, Any] = client.command("lookahead.stats")["model"].get("index") or {}
    return index.get("stats") if index.get("ready") else None


def wait_until(check: Callable[[], bool], timeout: float, step: float = 0.02) -> float | None:
    """Seconds until ``check()`` held (polled), or None after ``timeout``."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if check():
            return time.monotonic() - start
        time.sleep(step)
    return None


def probe_changes(client: LspClient, directory: Path, timeout: float) -> tuple[float | None, ...]:
    """Seconds for a created, then modified, then deleted file in ``directory`` to show in the index's stats."""

    def files_tokens() -> tuple[int, int]:
        stats = index_stats(client) or {}
        return int(stats.get("files", 0)), int(stats.get("tokens", 0))

    probe = directory / PROBE
    files, tokens = files_tokens()
    probe.write_text(PROBE_TEXT.format(n=1))
    created = wait_until(lambda: files_tokens()[0] == files + 1, timeout)
    _, tokens = files_tokens()
    probe.write_text("".join(PROBE_TEXT.format(n=n) for n in range(1, 40)))
    modified = wait_until(lambda: files_tokens()[1] > tokens, timeout)
    probe.unlink()
    deleted = wait_until(lambda: files_tokens()[0] == files, timeout)
    return created, modified, deleted


def run_idle(workspace: Path, model: str, idle_s: float, ignored: int) -> IdleReport:
    """Start the daemon on ``workspace``, wait for its index, then measure it idle and following changes."""
    indexed_dirs = len(scan(workspace).dirs)
    with tempfile.TemporaryDirectory() as tmp:
        log_path = Path(tmp) / "server.log"
        client = LspClient(stderr_path=log_path)
        try:
            start = time.monotonic()
            client.initialize(workspace, {"model": model})
            if client.wait_model(timeout=600)["state"] != "ready":
                raise RuntimeError(f"the model did not load; see the log:\n{log_path.read_text()[-2000:]}")
            if wait_until(lambda: index_stats(client) is not None, 600, 0.2) is None:
                raise RuntimeError("the workspace index was not built within 600 s")
            build_s = time.monotonic() - start
            time.sleep(3.0)  # the first rescan after the build
            pid = client.process.pid
            before = cpu_seconds(pid)
            time.sleep(idle_s)
            idle_cpu = cpu_seconds(pid) - before
            watches = inotify_watches(pid)
            stats = index_stats(client) or {}
            created, modified, deleted = probe_changes(client, workspace, timeout=10.0)
            overflows = sum("overflow" in line.lower() for line in log_path.read_text(errors="replace").splitlines())
        finally:
            client.close()
    return IdleReport(
        str(workspace), indexed_dirs, int(stats.get("files", 0)), ignored, build_s, idle_cpu, idle_s, watches,
        overflows, created, modified, deleted,
    )  # fmt: skip


def bench_idle(repo: Path | None, workspace: Path | None, ignored: int, model: str, idle_s: float) -> IdleReport:
    """Measure an existing ``workspace`` as it is, or a scratch copy of ``repo`` with ``ignored`` directories."""
    if workspace is not None:
        return run_idle(workspace.resolve(), model, idle_s, 0)
    assert repo is not None
    with tempfile.TemporaryDirectory(prefix="bench-idle-") as tmp:
        return run_idle(make_workspace(repo.resolve(), Path(tmp), ignored), model, idle_s, ignored)
