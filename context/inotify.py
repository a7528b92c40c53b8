"""Linux inotify through ctypes: one descriptor, a watch per directory, events read without blocking.

Only what the workspace watcher needs: :class:`Inotify` adds and removes watches (one directory each, never
recursive) and reads the queued events as :class:`InotifyEvent` (watch descriptor, mask, rename cookie, name).
``inotify_add_watch`` failing with ENOSPC (``fs.inotify.max_user_watches`` reached) raises :class:`WatchLimitReached`;
a kernel queue overflow (``fs.inotify.max_queued_events``) arrives as an event with :data:`IN_Q_OVERFLOW`.
:func:`available` says whether this platform has inotify at all.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

IN_ACCESS = 0x00000001
IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_CLOSE_NOWRITE = 0x00000010
IN_OPEN = 0x00000020
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_UNMOUNT = 0x00002000
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_EXCL_UNLINK = 0x04000000
IN_ISDIR = 0x40000000
IN_CLOEXEC = 0o2000000
IN_NONBLOCK = 0o4000

CONTENT_MASK = (
    IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK
)
"""What changes content: a file written and closed, created, deleted, moved in or out; the directory itself gone.
Never opens, reads, closes without a write or attribute changes: reading files produces no event."""

_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len
_READ_BYTES = 1 << 16


class WatchLimitReached(OSError):
    """The kernel refused another watch: ``fs.inotify.max_user_watches`` is reached."""


@dataclass(frozen=True)
class InotifyEvent:
    """One event: the watch it came from (-1 for an overflow), what happened, the rename cookie, the entry name."""

    wd: int
    mask: int
    cookie: int
    name: str

    @property
    def is_dir(self) -> bool:
        return bool(self.mask & IN_ISDIR)


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _libc()


def available() -> bool:
    """Whether inotify can be used here (Linux with a C library that has it)."""
    return _LIBC is not None


def add_watch(fd: int, path: bytes, mask: int) -> int:
    """``inotify_add_watch``: the watch descriptor; OSError with the errno on failure."""
    assert _LIBC is not None
    wd = int(_LIBC.inotify_add_watch(fd, path, mask))
    if wd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), os.fsdecode(path))
    return wd


def parse_events(data: bytes) -> list[InotifyEvent]:
    """The events packed in one ``read`` of an inotify descriptor."""
    events: list[InotifyEvent] = []
    offset = 0
    while offset + _HEADER.size <= len(data):
        wd, mask, cookie, length = _HEADER.unpack_from(data, offset)
        offset += _HEADER.size
        raw = data[offset : offset + length].split(b"\0", 1)[0]
        offset += length
        events.append(InotifyEvent(wd, mask, cookie, os.fsdecode(raw)))
    return events


class Inotify:
    """One inotify descriptor (non-blocking, closed on exec). Not thread-safe: one thread reads and adds."""

    def __init__(self) -> None:
        if _LIBC is None:
            raise OSError(errno.ENOSYS, "inotify is not available on this platform")
        fd = int(_LIBC.inotify_init1(IN_NONBLOCK | IN_CLOEXEC))
        if fd < 0:
            code = ctypes.get_errno()
            raise OSError(code, f"inotify_init1: {os.strerror(code)}")
        self.fd = fd

    def add(self, directory: Path, mask: int = CONTENT_MASK) -> int:
        """Watch one directory; its watch descriptor (the same one again for a directory already watched).
        WatchLimitReached when the kernel refuses more watches; other OSErrors (gone, not a directory) as raised."""
        try:
            return add_watch(self.fd, os.fsencode(directory), mask)
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise WatchLimitReached(exc.errno, "fs.inotify.max_user_watches reached", str(directory)) from exc
            raise

    def remove(self, wd: int) -> None:
        """Stop a watch; a descriptor the kernel already dropped is ignored."""
        if _LIBC is not None:
            _LIBC.inotify_rm_watch(self.fd, wd)

    def read(self) -> list[InotifyEvent]:
        """The events queued now (empty when none)."""
        events: list[InotifyEvent] = []
        while True:
            try:
                data = os.read(self.fd, _READ_BYTES)
            except BlockingIOError:
                return events
            if not data:
                return events
            events += parse_events(data)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
