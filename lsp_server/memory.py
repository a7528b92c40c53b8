"""Giving freed memory back to the operating system once documents are closed.

Python frees a closed document's objects (its text, line table, snippets, shown completion), but glibc's
allocator keeps the freed pages of its heaps and per-thread arenas, so the daemon's resident size only
grows over a day of opening and closing files. :func:`trim` asks glibc to return free pages
(``malloc_trim``); it is a no-op where that call does not exist (macOS, musl, Windows).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        function = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_size_t]
    function.restype = ctypes.c_int
    return function  # type: ignore[no-any-return]


def trim() -> bool:
    """Return the allocator's free pages to the system; whether anything could be done."""
    function = _malloc_trim()
    if function is None:
        return False
    released = bool(function(0))
    log.debug("malloc_trim: %s", "released memory" if released else "nothing to release")
    return True
