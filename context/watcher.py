"""Filesystem events -> debounced per-file callbacks ``on_change(path, text_or_None)``.

A watchdog ``Observer`` watches each root recursively. Events for paths the scan would leave out (the same
:class:`context.workspace.PathFilter` rules) are dropped. Every other event marks its path dirty; once a path
has been quiet for ``debounce_s`` a worker thread looks at the disk and reports what is there now (paths that
settle together in one call, with ``on_changes``): the text of a created or modified file, ``None`` for a
deleted one (or one that became binary or too large). A move is a deletion of the old path and a change of
the new one; a directory deleted or moved away is reported once as ``on_change(dir, None)`` (the consumer
drops everything under it) and a directory created or moved in is walked and each of its files reported.

Events can be lost (a burst overflows the kernel's queue; a directory is renamed while its files change),
so the watcher also asks for a rescan (``on_resync``: the index compares the disk with what it holds) after
a directory is moved or deleted and once ``BURST_PATHS`` paths were marked since the last rescan (a burst: the
kernel's queue may have overflowed, and watchdog reports no event for that); from then on until the rescan,
paths are no longer tracked one by one. The rescan runs on the watcher's thread once events have been quiet
for ``RESYNC_QUIET_S``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from lookahead_lsp.context.workspace import DEFAULT_CONFIG, PathFilter, WorkspaceConfig, read_source

ChangeFn = Callable[[Path, "str | None"], None]
ChangesFn = Callable[[list[tuple[Path, "str | None"]]], None]
BATCH_PATHS = 256  # settled paths handed to ``on_changes`` in one call at most
BURST_PATHS = 512  # this many paths marked since the last rescan: rescan instead (events may have been lost)
RESYNC_QUIET_S = 0.5  # a rescan waits until events have been quiet this long
log = logging.getLogger(__name__)


def _as_str(path: str | bytes) -> str:
    return os.fsdecode(path)


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: WorkspaceWatcher) -> None:
        self.watcher = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in ("opened", "closed", "closed_no_write"):
            return
        if event.is_directory and event.event_type == "modified":
            return  # a directory's own mtime: its entries get their own events
        self.watcher.mark(Path(_as_str(event.src_path)), event.is_directory)
        if event.event_type == "moved":
            self.watcher.mark(Path(_as_str(event.dest_path)), event.is_directory)
        if event.is_directory and event.event_type in ("moved", "deleted"):
            self.watcher.request_resync()  # events inside a moving directory name paths that no longer exist


class WorkspaceWatcher:
    """Watches ``roots`` and calls ``on_change`` from its own thread, one call per settled path; or, when
    ``on_changes`` is given, that once per ``BATCH_PATHS`` settled paths at most (a burst is one update)."""

    def __init__(
        self,
        roots: Sequence[Path],
        on_change: ChangeFn,
        config: WorkspaceConfig = DEFAULT_CONFIG,
        debounce_s: float = 0.2,
        on_resync: Callable[[], object] | None = None,
        on_changes: ChangesFn | None = None,
    ) -> None:
        self.filters = [PathFilter(Path(r), config) for r in roots]
        self.on_change = on_change
        self.on_changes = on_changes
        self.on_resync = on_resync
        self._resync_at: float | None = None  # when to call on_resync (None: not requested)
        self.config = config
        self.debounce_s = debounce_s
        self._pending: dict[Path, float] = {}
        self._marked = 0  # paths marked since the last rescan
        self._wake = threading.Condition()
        self._stopping = False
        self._observer: Observer | None = None  # type: ignore[valid-type]
        self._thread: threading.Thread | None = None

    # --- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> None:
        if self._observer is not None:
            return
        self._stopping = False
        observer = Observer()
        handler = _Handler(self)
        for path_filter in self.filters:
            observer.schedule(handler, str(path_filter.root), recursive=True)
        observer.daemon = True
        observer.start()
        self._observer = observer
        self._thread = threading.Thread(target=self._run, name="workspace-watcher", daemon=True)
        self._thread.start()

    @property
    def running(self) -> bool:
        """Whether :meth:`start` was called and :meth:`stop` not yet."""
        return self._observer is not None

    def stop(self) -> None:
        """Stop the observer and the thread; paths still waiting are left (the thread ends at the next one)."""
        observer, thread = self._observer, self._thread
        self._observer = self._thread = None
        with self._wake:
            self._stopping = True
            self._wake.notify_all()
        if observer is not None:
            observer.stop()
            observer.join(timeout=5)
        if thread is not None:
            thread.join(timeout=5)

    # --- events --------------------------------------------------------------------------------------

    def _filter_for(self, path: Path) -> PathFilter | None:
        for path_filter in self.filters:
            if path_filter.root in path.parents:
                return path_filter
        return None

    def mark(self, path: Path, is_dir: bool = False) -> None:
        """Note that ``path`` changed; it is looked at once it has been quiet for ``debounce_s``."""
        path_filter = self._filter_for(path)
        if path_filter is None:
            return
        if path.name == ".gitignore":
            path_filter.invalidate()
            self.request_resync()  # what is ignored changed
            return
        if path_filter.reason(path, is_dir=is_dir) is not None:
            return
        with self._wake:
            self._marked += 1
            if self.on_resync is not None and self._marked >= BURST_PATHS:
                self._pending.clear()  # a burst (events may be lost, the kernel queue may overflow): rescan
                self._request_resync_locked(RESYNC_QUIET_S)
                return
            if self._resync_at is not None:
                self._resync_at = max(self._resync_at, time.monotonic() + RESYNC_QUIET_S)
                return  # the coming rescan covers it
            self._pending[path] = time.monotonic() + self.debounce_s
            self._wake.notify_all()

    def request_resync(self, delay: float = RESYNC_QUIET_S) -> None:
        """Ask for ``on_resync`` (a rescan of the roots) once events have been quiet for ``delay`` seconds."""
        if self.on_resync is None:
            return
        with self._wake:
            self._request_resync_locked(delay)

    def _request_resync_locked(self, delay: float) -> None:
        at = time.monotonic() + delay
        self._resync_at = at if self._resync_at is None else max(self._resync_at, at)
        self._wake.notify_all()

    def _due(self) -> tuple[list[Path], bool] | None:
        """Wait for paths whose quiet period is over, and whether the rescan is due; ``None`` when stopping."""
        with self._wake:
            while not self._stopping:
                now = time.monotonic()
                due = [p for p, t in self._pending.items() if t <= now]
                resync = self._resync_at is not None and self._resync_at <= now
                if due or resync:
                    for p in due:
                        del self._pending[p]
                    if resync:
                        self._resync_at, self._marked = None, 0
                    return sorted(due), resync
                deadlines = [*self._pending.values(), *([self._resync_at] if self._resync_at is not None else [])]
                wait = min(deadlines, default=now + 3600) - now
                self._wake.wait(timeout=max(wait, 0.001))
            return None

    def _run(self) -> None:
        while (item := self._due()) is not None:
            due, resync = item
            changes: list[tuple[Path, str | None]] = []
            for path in due:
                if self._stopping:
                    return
                try:
                    for change in self._settle(path):
                        changes.append(change)
                        if len(changes) >= BATCH_PATHS:
                            batch, changes = changes, []
                            self._deliver(batch)
                except Exception:  # a bug must not kill the watcher
                    log.exception("workspace watcher: handling %s failed", path)
            self._deliver(changes)
            if resync and self.on_resync is not None:
                try:
                    self.on_resync()
                except Exception:
                    log.exception("workspace watcher: rescanning failed")

    def _deliver(self, changes: list[tuple[Path, str | None]]) -> None:
        """Hand settled paths to the callback; its bug is logged and must not kill the watcher."""
        if self._stopping or not changes:
            return
        if self.on_changes is not None:
            try:
                self.on_changes(changes)
            except Exception:
                log.exception("workspace watcher: handling %d paths failed", len(changes))
            return
        for path, text in changes:
            try:
                self.on_change(path, text)
            except Exception:
                log.exception("workspace watcher: handling %s failed", path)

    def _settle(self, path: Path) -> Iterator[tuple[Path, str | None]]:
        """What is at ``path`` now: its text (None: gone, or not indexable); every file of a directory."""
        path_filter = self._filter_for(path)
        if path_filter is None:
            return
        if path.is_dir() and not path.is_symlink():
            if path_filter.reason(path, is_dir=True) is None:
                for file in self._files_under(path_filter, path):
                    yield self._read(path_filter, file)
            return
        yield self._read(path_filter, path)

    def _read(self, path_filter: PathFilter, path: Path) -> tuple[Path, str | None]:
        text = None
        if path_filter.reason(path) is None:
            text, _ = read_source(path, self.config.max_file_bytes)
        return path, text

    def _files_under(self, path_filter: PathFilter, directory: Path) -> Iterator[Path]:
        for current, dirs, files in os.walk(directory):
            base = Path(current)
            dirs[:] = [d for d in dirs if path_filter.reason(base / d, is_dir=True) is None]
            yield from (base / f for f in sorted(files) if path_filter.reason(base / f) is None)
