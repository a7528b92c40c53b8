"""The watcher on real filesystem events: create, modify, delete, move, directories, ignore rules, debounce."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lookahead_lsp.context.watcher import WorkspaceWatcher
from lookahead_lsp.context.workspace import WorkspaceConfig


class Recorder:
    """Collects ``on_change`` calls and waits for them with a bounded poll."""

    def __init__(self) -> None:
        self.events: list[tuple[Path, str | None]] = []
        self._cond = threading.Condition()

    def __call__(self, path: Path, text: str | None) -> None:
        with self._cond:
            self.events.append((path, text))
            self._cond.notify_all()

    def wait_for(self, predicate: Callable[[list[tuple[Path, str | None]]], bool], timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate(self.events):
                left = deadline - time.monotonic()
                assert left > 0, f"timed out; events so far: {self.events}"
                self._cond.wait(timeout=min(left, 0.05))

    def last(self, path: Path) -> tuple[bool, str | None]:
        """(seen, last text) for ``path``."""
        with self._cond:
            texts = [t for p, t in self.events if p == path]
        return (bool(texts), texts[-1] if texts else None)


def has(path: Path, text: str | None) -> Callable[[list[tuple[Path, str | None]]], bool]:
    return lambda events: (path, text) in events


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[tuple[Path, Recorder]]:
    root = tmp_path.resolve()
    (root / ".gitignore").write_text("*.log\nignored_dir/\n")
    recorder = Recorder()
    watcher = WorkspaceWatcher([root], recorder, WorkspaceConfig(max_file_bytes=1000), debounce_s=0.05)
    watcher.start()
    try:
        yield root, recorder
    finally:
        watcher.stop()


def test_create_modify_delete(watched: tuple[Path, Recorder]) -> None:
    root, rec = watched
    path = root / "a.py"
    path.write_text("one")
    rec.wait_for(has(path, "one"))
    path.write_text("two")
    rec.wait_for(has(path, "two"))
    path.unlink()
    rec.wait_for(has(path, None))


def test_move_is_delete_plus_add(watched: tuple[Path, Recorder]) -> None:
    root, rec = watched
    old, new = root / "old.py", root / "sub" / "new.py"
    old.write_text("body")
    rec.wait_for(has(old, "body"))
    new.parent.mkdir()
    old.rename(new)
    rec.wait_for(lambda events: (old, None) in events and (new, "body") in events)


def test_directory_moved_in_and_away(watched: tuple[Path, Recorder], tmp_path_factory: pytest.TempPathFactory) -> None:
    root, rec = watched
    outside = tmp_path_factory.mktemp("outside").resolve() / "pkg"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "m.py").write_text("m")
    (outside / "x.log").write_text("ignored")
    inside = root / "pkg"
    outside.rename(inside)
    rec.wait_for(has(inside / "deep" / "m.py", "m"))
    inside.rename(root.parent / f"{root.name}-gone")
    rec.wait_for(lambda events: any(p == inside and t is None for p, t in events))
    assert not rec.last(inside / "x.log")[0]


def test_ignored_and_unindexable_files(watched: tuple[Path, Recorder]) -> None:
    root, rec = watched
    (root / "x.log").write_text("ignored by .gitignore")
    (root / "ignored_dir").mkdir()
    (root / "ignored_dir" / "y.py").write_text("ignored dir")
    (root / "node_modules").mkdir()
    (root / "node_modules" / "z.js").write_text("skipped dir")
    (root / "big.py").write_text("x" * 5000)
    (root / "bin.py").write_bytes(b"\0\1\2")
    marker = root / "marker.py"
    marker.write_text("done")
    rec.wait_for(has(marker, "done"))
    rec.wait_for(lambda events: (root / "big.py") in [p for p, _ in events])
    assert rec.last(root / "big.py") == (True, None)  # over the size limit: reported as not indexable
    assert rec.last(root / "bin.py") == (True, None)
    for path in (root / "x.log", root / "ignored_dir" / "y.py", root / "node_modules" / "z.js"):
        assert not rec.last(path)[0]


def test_bursts_are_debounced_to_the_final_content(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    rec = Recorder()
    watcher = WorkspaceWatcher([root], rec, debounce_s=0.3)
    watcher.start()
    try:
        path = root / "burst.py"
        for i in range(20):
            path.write_text(f"v{i}")
        rec.wait_for(has(path, "v19"))
        assert [t for p, t in rec.events if p == path] == ["v19"]
    finally:
        watcher.stop()


def test_a_failing_callback_does_not_stop_the_watcher(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    rec = Recorder()

    def flaky(path: Path, text: str | None) -> None:
        rec(path, text)
        if path.name == "boom.py":
            raise RuntimeError("callback bug")

    watcher = WorkspaceWatcher([root], flaky, debounce_s=0.05)
    watcher.start()
    try:
        (root / "boom.py").write_text("b")
        rec.wait_for(has(root / "boom.py", "b"))
        (root / "after.py").write_text("a")
        rec.wait_for(has(root / "after.py", "a"))
    finally:
        watcher.stop()
