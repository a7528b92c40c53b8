"""An idle workspace costs nothing: the real inotify watcher on generated trees with a virtualenv, node_modules
and gitignored directories; reading produces no events; an overflow makes one rescan; the watch limit."""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lookahead_lsp.context import inotify
from lookahead_lsp.context.watcher import POLL_MIN_S, WorkspaceWatcher
from lookahead_lsp.context.workspace import WorkspaceConfig, scan
from lookahead_lsp.context.workspace_index import WorkspaceIndex
from lookahead_lsp.evaluation.idle_bench import inotify_watches

pytestmark = pytest.mark.skipif(not inotify.available(), reason="inotify is Linux's; elsewhere watchdog watches")


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def fd_watches() -> int:
    """The inotify watches this process holds, as the kernel counts them (``/proc/self/fdinfo``)."""
    return inotify_watches(os.getpid())


def project(root: Path, ignored_dirs: int = 300) -> Path:
    """A project with code in a few packages, and many directories the index never reads: a virtualenv found
    by its ``pyvenv.cfg`` under a name no rule knows, ``node_modules``, ``.git`` and a gitignored build tree."""
    for package in ("app", "app/core", "app/web", "tests"):
        (root / package).mkdir(parents=True, exist_ok=True)
        (root / package / "__init__.py").write_text(f"# {package}\n")
    (root / ".gitignore").write_text("generated/\n")
    (root / "env").mkdir()
    (root / "env" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    for n in range(ignored_dirs):
        for parent in ("env/lib/site-packages", "node_modules", ".git/objects", "generated"):
            directory = root / parent / f"d{n // 20}" / f"e{n}"
            directory.mkdir(parents=True, exist_ok=True)
            (directory / "mod.py").write_text(f"x = {n}\n")
    return root


class Counter:
    """Counts calls (the rescans) and records settled paths, from the watcher's thread."""

    def __init__(self) -> None:
        self.calls = 0
        self.changes: list[tuple[Path, str | None]] = []

    def rescan(self) -> None:
        self.calls += 1

    def changed(self, path: Path, text: str | None) -> None:
        self.changes.append((path, text))


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[tuple[Path, WorkspaceWatcher, Counter]]:
    root = project(tmp_path.resolve() / "ws")
    counter = Counter()
    watcher = WorkspaceWatcher([root], counter.changed, WorkspaceConfig(), debounce_s=0.05, on_resync=counter.rescan)
    watcher.start()
    try:
        yield root, watcher, counter
    finally:
        watcher.stop()


def test_only_the_directories_the_index_reads_are_watched(watched: tuple[Path, WorkspaceWatcher, Counter]) -> None:
    root, watcher, _ = watched
    read = scan(root).dirs
    assert sorted(read) == sorted([root, *(root / p for p in ("app", "app/core", "app/web", "tests"))])
    assert watcher.describe()["watches"] == len(read) == fd_watches()


def test_ignored_trees_produce_no_index_work(watched: tuple[Path, WorkspaceWatcher, Counter]) -> None:
    root, watcher, counter = watched
    for parent in ("env/lib/site-packages/d0/e0", "node_modules/d1", ".git/objects/d2", "generated/d3"):
        for n in range(50):
            (root / parent / f"new{n}.py").write_text("changed = True\n")
        (root / parent / "sub").mkdir()
    time.sleep(1.0)
    assert watcher.describe()["events"] == 0
    assert counter.changes == [] and counter.calls == 0
    (root / "app" / "fresh.py").write_text("fresh = 1\n")  # the watcher is alive: an admitted change arrives
    wait_until(lambda: (root / "app" / "fresh.py", "fresh = 1\n") in counter.changes)


def test_reading_files_produces_no_events(watched: tuple[Path, WorkspaceWatcher, Counter]) -> None:
    root, watcher, counter = watched
    for _ in range(3):
        for directory in scan(root).dirs:
            for entry in os.scandir(directory):
                if entry.is_file():
                    Path(entry.path).read_bytes()
                    os.stat(entry.path)
    time.sleep(0.5)
    assert watcher.describe()["events"] == 0
    assert counter.changes == [] and counter.calls == 0


def test_new_directories_are_watched_and_a_new_virtualenv_is_not(
    watched: tuple[Path, WorkspaceWatcher, Counter],
) -> None:
    root, watcher, counter = watched
    before = watcher.describe()["watches"]
    (root / "app" / "api" / "v1").mkdir(parents=True)
    (root / "app" / "api" / "v1" / "routes.py").write_text("routes = []\n")
    wait_until(lambda: (root / "app" / "api" / "v1" / "routes.py", "routes = []\n") in counter.changes)
    wait_until(lambda: watcher.describe()["watches"] == before + 2)  # added a directory at a time, as they came
    assert fd_watches() == before + 2
    venv = root / "app" / "venv2"  # `python -m venv`: directories first, then pyvenv.cfg, then the packages
    (venv / "lib").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    wait_until(lambda: watcher.describe()["watches"] == before + 2)
    (venv / "lib" / "site.py").write_text("site = 1\n")
    time.sleep(0.5)
    assert all(venv not in path.parents for path, _ in counter.changes)


def test_a_gitignore_change_that_admits_a_directory_starts_watching_it(
    watched: tuple[Path, WorkspaceWatcher, Counter],
) -> None:
    root, watcher, counter = watched
    before = watcher.describe()["watches"]
    (root / ".gitignore").write_text("# nothing ignored here now\n")
    admitted = len(scan(root).dirs)
    assert admitted > before
    # the watches are added one directory at a time: wait for the last, then count what the kernel holds
    wait_until(lambda: watcher.describe()["watches"] == admitted, timeout=30)
    assert fd_watches() == admitted
    target = root / "generated" / "d0" / "e1" / "late.py"
    target.write_text("late = 1\n")
    wait_until(lambda: (target, "late = 1\n") in counter.changes)


def test_an_overflow_makes_exactly_one_rescan(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The consumer is busy (its callback blocks) while a burst larger than the kernel's queue lands: the queue
    overflows; once free, the watcher rescans once, and the rescan (reading every file) starts no other."""
    queue = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    if queue > 200_000:
        pytest.skip(f"fs.inotify.max_queued_events is {queue}: a burst to overflow it would take too long here")
    root = project(tmp_path.resolve() / "ws", ignored_dirs=2)
    entered, release = threading.Event(), threading.Event()
    rescans: list[float] = []

    def busy(changes: list[tuple[Path, str | None]]) -> None:
        entered.set()
        release.wait(60)

    def rescan() -> None:
        for scanned in scan(root).files:  # what the index does: read what it holds
            scanned.path.read_bytes()
        rescans.append(time.monotonic())

    caplog.set_level(logging.INFO, logger="lookahead_lsp.context.watcher")
    watcher = WorkspaceWatcher([root], lambda p, t: None, debounce_s=0.05, on_resync=rescan, on_changes=busy)
    watcher.start()
    try:
        (root / "app" / "first.py").write_text("first = 1\n")
        assert entered.wait(10)
        burst = root / "app" / "burst"
        burst.mkdir()  # watched on its event, which waits in the queue: its files are found by the rescan
        for n in range(queue // 2 + 1000):  # each file: created, closed after writing
            os.close(os.open(root / "app" / f"b{n}.py", os.O_CREAT | os.O_WRONLY, 0o644))
        release.set()
        wait_until(lambda: watcher.overflows == 1 and len(rescans) == 1, timeout=60)
        time.sleep(3.0)
        assert watcher.overflows == 1 and len(rescans) == 1 == watcher.rescans
        assert watcher.describe()["watches"] == len(scan(root).dirs) == fd_watches()
    finally:
        release.set()
        watcher.stop()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "overflowed" in r.getMessage()]
    assert len(warnings) == 1


@pytest.fixture
def refusing_after(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], None]:
    """Make ``inotify_add_watch`` refuse with ENOSPC (the watch limit) after ``n`` new watches."""

    def install(n: int) -> None:
        real = inotify.add_watch
        granted: set[bytes] = set()

        def add_watch(fd: int, path: bytes, mask: int) -> int:
            if path not in granted and len(granted) >= n:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.fsdecode(path))
            granted.add(path)
            return real(fd, path, mask)

        monkeypatch.setattr(inotify, "add_watch", add_watch)

    return install


def test_at_the_watch_limit_the_index_stays_correct_and_says_so_once(
    tmp_path: Path, tokenizer, refusing_after: Callable[[int], None], caplog: pytest.LogCaptureFixture
) -> None:
    root = project(tmp_path.resolve() / "ws", ignored_dirs=2)
    refusing_after(2)  # the root and one package: app/core, app/web and tests are never watched
    said: list[str] = []
    caplog.set_level(logging.WARNING, logger="lookahead_lsp.context.watcher")
    ws = WorkspaceIndex.for_tokenizer([root], tokenizer, WorkspaceConfig(), debounce_s=0.05, on_watch_limit=said.append)
    ws.build()
    heard: list[tuple[str, str | None]] = []
    ws.add_listener(lambda path, text: heard.append((path, text)))
    ws.start_watching()
    try:
        state = ws.watching()
        assert state is not None and state["polling"] and state["watches"] == 2 == fd_watches()
        unwatched = root / "tests" / "test_late.py"
        unwatched.write_text("def test_late():\n    assert compute_late_marker() == 1\n")
        wait_until(lambda: str(unwatched) in ws.index.paths(), timeout=POLL_MIN_S * 5)
        unwatched.unlink()
        (root / "app" / "core" / "__init__.py").write_text("# core, edited\n")
        wait_until(lambda: str(unwatched) not in ws.index.paths(), timeout=POLL_MIN_S * 5)
        wait_until(lambda: (str(root / "app" / "core" / "__init__.py"), "# core, edited\n") in heard)
        rescans = ws.watching()["rescans"]  # type: ignore[index]
        time.sleep(2 * POLL_MIN_S + 0.5)
        assert ws.watching()["rescans"] - rescans <= 3  # type: ignore[index]  # periodic, not a busy loop
    finally:
        ws.stop()
    assert len(said) == 1 and "fs.inotify.max_user_watches" in said[0]
    assert len([r for r in caplog.records if "max_user_watches" in r.getMessage()]) == 1
