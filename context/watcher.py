"""Filesystem events -> debounced per-file callbacks ``on_change(path, text_or_None)``.

On Linux the watcher holds one inotify watch per directory the index reads (``context/dir_watches.py``): never a
virtualenv, ``node_modules``, ``.git`` or a gitignored tree, and only for what changes content (a file written and
closed, created, deleted or moved), so reading files costs nothing and an idle project costs no CPU. Elsewhere
(macOS, Windows) watchdog's recursive observer reports the same kinds of events, and those for paths the scan
would leave out (the same :class:`context.workspace.PathFilter` rules) are dropped. Every other event marks its
path dirty; once a path has been quiet for ``debounce_s`` the watcher's thread looks at the disk and reports what
is there now (paths that settle together in one call, with ``on_changes``): the text of a created or modified
file, ``None`` for a deleted one (or one that became binary or too large). A move is a deletion of the old path
and a change of the new one; a directory deleted or moved away is reported once as ``on_change(dir, None)`` (the
consumer drops everything under it) and a directory created or moved in is walked and each of its files reported.

Events can be lost (a burst overflows the kernel's queue; a directory is renamed while its files change),
so the watcher also asks for a rescan (``on_resync``: the index compares the disk with what it holds) after
a directory is moved or deleted, after a ``.gitignore`` changes, after the kernel's queue overflowed, and once
``BURST_PATHS`` paths were marked since the last rescan; from then on until the rescan, paths are no longer
tracked one by one. The rescan runs on the watcher's thread once events have been quiet for ``RESYNC_QUIET_S``,
and brings the watched directories in line with the scan first. Requests that come while one is pending make
one rescan, and a rescan reads files without producing events, so an overflow leads to one rescan, never a loop.

Where the kernel refuses a watch (``fs.inotify.max_user_watches``), the watcher says so once (the log and
``on_limit``) and rescans periodically instead, every ``POLL_FACTOR`` times the last rescan's duration and at
least every ``POLL_MIN_S``: the index stays correct at a bounded cost.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer

from lookahead_lsp.context import inotify
from lookahead_lsp.context.dir_watches import DirectoryWatches
from lookahead_lsp.context.workspace import DEFAULT_CONFIG, PathFilter, WorkspaceConfig, read_source

ChangeFn = Callable[[Path, "str | None"], None]
ChangesFn = Callable[[list[tuple[Path, "str | None"]]], None]
BATCH_PATHS = 256  # settled paths handed to ``on_changes`` in one call at most
BURST_PATHS = 512  # this many paths marked since the last rescan: rescan instead (events may have been lost)
RESYNC_QUIET_S = 0.5  # a rescan waits until events have been quiet this long
POLL_MIN_S = 2.0  # without enough watches: rescan at most this often
POLL_FACTOR = 50.0  # ... and at most once per this many times the last rescan's duration (<= 2% of a core)
LIMIT_MESSAGE = (
    "lookahead: the kernel refused more file watches (fs.inotify.max_user_watches); the workspace index now "
    "rescans every few seconds instead. Raise it with: sudo sysctl fs.inotify.max_user_watches=524288"
)
CONTENT_EVENTS: list[type[FileSystemEvent]] = [
    FileCreatedEvent, FileDeletedEvent, FileModifiedEvent, FileMovedEvent, FileClosedEvent,
    DirCreatedEvent, DirDeletedEvent, DirMovedEvent,
]  # fmt: skip
log = logging.getLogger(__name__)


def _as_str(path: str | bytes) -> str:
    return os.fsdecode(path)


class _Handler(FileSystemEventHandler):
    """watchdog's events (off Linux) as the watcher's marks."""

    def __init__(self, watcher: WorkspaceWatcher) -> None:
        self.watcher = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in ("opened", "closed_no_write"):
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
    ``on_changes`` is given, that once per ``BATCH_PATHS`` settled paths at most (a burst is one update).
    ``on_limit(message)`` is called once if the kernel refuses the watches the roots need."""

    def __init__(
        self,
        roots: Sequence[Path],
        on_change: ChangeFn,
        config: WorkspaceConfig = DEFAULT_CONFIG,
        debounce_s: float = 0.2,
        on_resync: Callable[[], object] | None = None,
        on_changes: ChangesFn | None = None,
        on_limit: Callable[[str], None] | None = None,
    ) -> None:
        self.filters = [PathFilter(Path(r), config) for r in roots]
        self.on_change = on_change
        self.on_changes = on_changes
        self.on_resync = on_resync
        self.on_limit = on_limit
        self._resync_at: float | None = None  # when to rescan (None: not requested)
        self.config = config
        self.debounce_s = debounce_s
        self._pending: dict[Path, float] = {}
        self._marked = 0  # paths marked since the last rescan
        self._wake = threading.Condition()
        self._stopping = False
        self._dirs: DirectoryWatches | None = None  # Linux: the inotify watches
        self._pipe: tuple[int, int] | None = None  # wakes the thread from select() (with _dirs)
        self._observer: Any = None  # elsewhere: watchdog's observer
        self._thread: threading.Thread | None = None
        self.polling = False  # rescanning periodically: the kernel refused the watches needed
        self.overflows = 0  # the kernel's event queue overflowed
        self.rescans = 0

    # --- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> None:
        """Watch the directories the index reads (on the calling thread), then handle events on a thread."""
        if self._thread is not None:
            return
        self._stopping = False
        if inotify.available():
            try:
                self._dirs = DirectoryWatches(self.filters, self.config)
            except OSError as exc:  # fs.inotify.max_user_instances reached
                log.warning("workspace watcher: inotify unavailable (%s); rescanning periodically instead", exc)
                self.polling = True
                self.request_resync(POLL_MIN_S)
            else:
                self._dirs.sync()
                self._pipe = _nonblocking_pipe()
                self._check_limit()
        else:
            observer = Observer()
            handler = _Handler(self)
            for path_filter in self.filters:
                observer.schedule(handler, str(path_filter.root), recursive=True, event_filter=CONTENT_EVENTS)
            observer.daemon = True
            observer.start()
            self._observer = observer
        self._thread = threading.Thread(target=self._run, name="workspace-watcher", daemon=True)
        self._thread.start()

    @property
    def running(self) -> bool:
        """Whether :meth:`start` was called and :meth:`stop` not yet."""
        return self._thread is not None

    def stop(self) -> None:
        """Stop watching and the thread; paths still waiting are left (the thread ends at the next one)."""
        observer, thread = self._observer, self._thread
        self._observer = self._thread = None
        with self._wake:
            self._stopping = True
            self._notify_locked()
        if observer is not None:
            observer.stop()
            observer.join(timeout=5)
        if thread is not None:
            thread.join(timeout=5)
        if self._dirs is not None and (thread is None or not thread.is_alive()):
            self._dirs.close()
            self._dirs = None
        if self._pipe is not None and (thread is None or not thread.is_alive()):
            for fd in self._pipe:
                os.close(fd)
            self._pipe = None

    def describe(self) -> dict[str, Any]:
        """What the watcher holds and has done, for ``lookahead.stats``."""
        backend = "inotify" if self._dirs is not None else "watchdog" if self._observer is not None else "none"
        dirs = self._dirs
        return {
            "backend": backend, "watches": dirs.count if dirs else None, "events": dirs.events_read if dirs else None,
            "polling": self.polling, "overflows": self.overflows, "rescans": self.rescans,
        }  # fmt: skip

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
            self.request_resync()  # what is ignored (and watched) changed
            return
        if path_filter.reason(path, is_dir=is_dir) is not None:
            return
        with self._wake:
            self._marked += 1
            if self.on_resync is not None and self._marked >= BURST_PATHS:
                self._pending.clear()  # a burst (events may be lost, the kernel queue may overflow): rescan
                self._request_resync_locked(RESYNC_QUIET_S)
                return
            if self._resync_at is not None and self.on_resync is not None:
                self._resync_at = max(self._resync_at, time.monotonic() + RESYNC_QUIET_S)
                return  # the coming rescan covers it
            self._pending[path] = time.monotonic() + self.debounce_s
            self._notify_locked()

    def overflowed(self) -> None:
        """The kernel's event queue overflowed: events were lost, so one rescan."""
        self.overflows += 1
        level = logging.WARNING if self.overflows == 1 else logging.INFO
        log.log(level, "workspace watcher: the kernel's event queue overflowed (fs.inotify.max_queued_events); "
                "rescanning the workspace once")  # fmt: skip
        self.request_resync()

    def request_resync(self, delay: float = RESYNC_QUIET_S) -> None:
        """Ask for a rescan (the watches, then ``on_resync``) once events have been quiet for ``delay`` seconds."""
        with self._wake:
            self._request_resync_locked(delay)

    def _request_resync_locked(self, delay: float) -> None:
        at = time.monotonic() + delay
        self._resync_at = at if self._resync_at is None else max(self._resync_at, at)
        self._notify_locked()

    def _notify_locked(self) -> None:
        self._wake.notify_all()
        if self._pipe is not None:
            with contextlib.suppress(OSError):  # full (a wake-up is pending anyway) or closed
                os.write(self._pipe[1], b"x")

    def _check_limit(self) -> None:
        """Rescan periodically once the kernel refused a watch; say so once."""
        if self._dirs is None or not self._dirs.limited or self.polling:
            return
        self.polling = True
        log.warning("workspace watcher: %d directories watched, then the kernel refused more (%s)",
                    self._dirs.count, LIMIT_MESSAGE)  # fmt: skip
        if self.on_limit is not None:
            try:
                self.on_limit(LIMIT_MESSAGE)
            except Exception:
                log.exception("workspace watcher: reporting the watch limit failed")
        self.request_resync(POLL_MIN_S)

    def _due(self) -> tuple[list[Path], bool] | None:
        """Wait for paths whose quiet period is over, and whether the rescan is due; ``None`` when stopping.
        With inotify, the events that come meanwhile are read and handled on this thread."""
        while True:
            with self._wake:
                if self._stopping:
                    return None
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
                wait = max(min(deadlines, default=now + 3600) - now, 0.001)
                if self._dirs is None or self._pipe is None:
                    self._wake.wait(timeout=wait)
                    continue
            self._wait_for_events(self._dirs, self._pipe[0], wait)

    def _wait_for_events(self, dirs: DirectoryWatches, wake: int, timeout: float) -> None:
        """Sleep until an inotify event, a wake-up or ``timeout``; handle the events."""
        readable, _, _ = select.select([dirs.fileno(), wake], [], [], timeout)
        if wake in readable:
            while True:
                try:
                    if not os.read(wake, 4096):
                        break
                except BlockingIOError:
                    break
        if dirs.fileno() in readable:
            dirs.handle(self)
            self._check_limit()

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
            if resync and not self._stopping:
                self._rescan()

    def _rescan(self) -> None:
        """Bring the watches in line with the disk, then ``on_resync``; when polling, schedule the next one."""
        started = time.monotonic()
        try:
            if self._dirs is not None:
                self._dirs.sync()
                self._check_limit()
            if self.on_resync is not None:
                self.on_resync()
        except Exception:
            log.exception("workspace watcher: rescanning failed")
        self.rescans += 1
        if self.polling:
            self.request_resync(max(POLL_MIN_S, POLL_FACTOR * (time.monotonic() - started)))

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


def _nonblocking_pipe() -> tuple[int, int]:
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    os.set_blocking(write_end, False)
    return read_end, write_end
