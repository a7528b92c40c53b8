"""Inotify watches on exactly the directories the index reads, and their events as the watcher's marks.

:class:`DirectoryWatches` holds one watch per directory that a scan enters (:func:`context.workspace.scan`'s
``dirs``: never ``.git``, a virtualenv, ``node_modules``, a gitignored or excluded directory), each with the
content-only mask (:data:`context.inotify.CONTENT_MASK`), so reading files never produces an event and an
ignored tree costs nothing. :meth:`sync` brings the watches in line with a fresh scan (at start, after a
rescan's cause: an overflow, a ``.gitignore`` change, a directory moved); a directory created or moved in is
watched at once with its subdirectories (:meth:`handle`), one deleted or moved away is dropped, and one that
becomes a virtualenv (a ``pyvenv.cfg`` appears) stops being watched.

Where the kernel refuses a watch (``fs.inotify.max_user_watches``) :attr:`limited` is set and no more are tried
until the next :meth:`sync`; the watcher then keeps the index correct by periodic rescans instead.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol

from lookahead_lsp.context.inotify import (
    IN_CREATE,
    IN_DELETE,
    IN_IGNORED,
    IN_MOVED_FROM,
    IN_MOVED_TO,
    IN_Q_OVERFLOW,
    Inotify,
    InotifyEvent,
    WatchLimitReached,
)
from lookahead_lsp.context.workspace import VENV_MARKER, PathFilter, WorkspaceConfig, scan

log = logging.getLogger(__name__)


class WatchSink(Protocol):
    """What the events become (the :class:`context.watcher.WorkspaceWatcher`)."""

    def mark(self, path: Path, is_dir: bool = False) -> None: ...

    def request_resync(self, delay: float = ...) -> None: ...

    def overflowed(self) -> None: ...


class DirectoryWatches:
    """One inotify descriptor watching the directories a scan of ``filters``' roots reads."""

    def __init__(self, filters: Sequence[PathFilter], config: WorkspaceConfig) -> None:
        self.filters = list(filters)
        self.roots = {f.root for f in self.filters}
        self.config = config
        self.inotify = Inotify()
        self._paths: dict[int, Path] = {}  # watch descriptor -> directory
        self._wds: dict[Path, int] = {}  # directory -> watch descriptor
        self.limited = False  # the kernel refused a watch since the last sync
        self.events_read = 0  # inotify events read so far (reading files must not add to it)

    @property
    def count(self) -> int:
        return len(self._wds)

    def fileno(self) -> int:
        return self.inotify.fd

    def close(self) -> None:
        self.inotify.close()
        self._paths.clear()
        self._wds.clear()

    # --- which directories ---------------------------------------------------------------------------

    def sync(self) -> None:
        """Watch every directory a scan of the roots reads now, and nothing else."""
        wanted: list[Path] = []
        for path_filter in self.filters:
            wanted += scan(path_filter.root, self.config).dirs
        keep = set(wanted)
        for directory in [d for d in self._wds if d not in keep]:
            self._unwatch(directory)
        self.limited = False
        self._watch_all(wanted)

    def watch_tree(self, directory: Path) -> None:
        """Watch a directory that appeared (created or moved in) and its subdirectories the scan would enter."""
        path_filter = self._filter_for(directory)
        if path_filter is None or path_filter.reason(directory, is_dir=True) is not None:
            return
        self._watch_all(_dirs_under(path_filter, directory))
        # A directory that became a virtualenv while it was being watched: its pyvenv.cfg may have been written
        # before its watch existed, so no event will say so. Checked once the watches are in place.
        for watched in self._watched_under(directory):
            if watched in self._wds and path_filter.reason(watched, is_dir=True) is not None:
                self.unwatch_tree(watched)

    def unwatch_tree(self, directory: Path) -> None:
        """Stop watching ``directory`` and everything under it (deleted, moved away, became a virtualenv)."""
        for path in self._watched_under(directory):
            self._unwatch(path)

    def _watched_under(self, directory: Path) -> list[Path]:
        """The watched directories at or under ``directory``, outermost first."""
        prefix = str(directory) + os.sep
        return sorted(p for p in self._wds if p == directory or str(p).startswith(prefix))

    def _watch_all(self, directories: Iterator[Path] | list[Path]) -> None:
        for directory in directories:
            if self.limited:
                return
            if directory in self._wds:
                continue
            try:
                wd = self.inotify.add(directory)
            except WatchLimitReached:
                self.limited = True
                return
            except OSError:
                continue  # gone meanwhile, or not a directory any more: its parent's event says so
            old = self._paths.get(wd)
            if old is not None:  # the same directory by another path (a symlink): keep one
                self._wds.pop(old, None)
            self._paths[wd] = directory
            self._wds[directory] = wd

    def _unwatch(self, directory: Path) -> None:
        wd = self._wds.pop(directory, None)
        if wd is not None:
            self._paths.pop(wd, None)
            self.inotify.remove(wd)

    def _filter_for(self, path: Path) -> PathFilter | None:
        return next((f for f in self.filters if f.root == path or f.root in path.parents), None)

    # --- events --------------------------------------------------------------------------------------

    def handle(self, sink: WatchSink) -> None:
        """Read the queued events and pass them on as marks, rescans and changes to the watches."""
        events = self.inotify.read()
        self.events_read += len(events)
        for event in events:
            self._handle(event, sink)

    def _handle(self, event: InotifyEvent, sink: WatchSink) -> None:
        if event.mask & IN_Q_OVERFLOW:
            sink.overflowed()
            return
        if event.mask & IN_IGNORED:  # the kernel dropped the watch (its directory is gone)
            directory = self._paths.pop(event.wd, None)
            if directory is not None and self._wds.get(directory) == event.wd:
                del self._wds[directory]
            return
        parent = self._paths.get(event.wd)
        if parent is None or not event.name:
            return
        path = parent / event.name
        if event.is_dir:
            if event.mask & (IN_CREATE | IN_MOVED_TO):
                self.watch_tree(path)
            if event.mask & (IN_DELETE | IN_MOVED_FROM):
                self.unwatch_tree(path)
            if event.mask & (IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE):
                sink.request_resync()  # events inside a moving directory name paths that no longer exist
        elif event.name == VENV_MARKER and event.mask & (IN_CREATE | IN_MOVED_TO) and parent not in self.roots:
            self.unwatch_tree(parent)  # a virtualenv now: left out like the scan leaves it
            sink.request_resync()
        sink.mark(path, event.is_dir)


def _dirs_under(path_filter: PathFilter, directory: Path) -> Iterator[Path]:
    """``directory`` and the directories under it that ``path_filter`` admits (its rules, applied top down)."""
    for current, dirs, _ in os.walk(directory):
        base = Path(current)
        yield base
        dirs[:] = sorted(d for d in dirs if path_filter.reason(base / d, is_dir=True) is None)
