"""What the daemon's memory may hold: freed pages given back, per-shape kernel caches bounded.

Python frees a closed document's objects (its text, line table, snippets, shown completion), but glibc's
allocator keeps the freed pages of its heaps and per-thread arenas, so the daemon's resident size only
grows over a day of opening and closing files. :func:`trim` asks glibc to return free pages
(``malloc_trim``); it is a no-op where that call does not exist (macOS, musl, Windows).

The model's passes run through oneDNN (float linears, bfloat16 prefill), which keeps a kernel for every
shape it has run in two caches: oneDNN's primitive cache and PyTorch's ideep cache, 1024 entries each by
default. A pass's shape includes its number of tokens (every prefill tail length, every lookahead tree
size), so each new length adds an entry per distinct layer shape (about 0.3 MB in each cache, whatever
the layer's size): memory in use, which ``malloc_trim`` cannot give back, growing for hours towards several
hundred MB. :func:`bound_kernel_caches` caps both before the model loads; creating a kernel again costs
far less than a pass on a real model (measured in docs/benchmarks.md, "Memory over rounds").
:func:`bound_allocator` keeps glibc's own slack small (two heaps at most for all threads).

The process's own figures for the memory breakdown (``lsp_server/memory_report.py``): :func:`resident` (from
``/proc/self/smaps_rollup`` and ``/proc/self/status``), :func:`mapped_files` (resident pages of mapped
files, by kind), :func:`allocator` (glibc's heap: in use and free but held) and :func:`mark` /
:data:`MARKS` (the resident size at moments of the start-up, e.g. after the imports).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

KERNEL_CACHE_ENTRIES = 64  # kernels kept per cache: a few pass lengths for each distinct layer shape
KERNEL_CACHE_VARIABLES = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")  # oneDNN's, ideep's


def bound_kernel_caches(entries: int = KERNEL_CACHE_ENTRIES) -> None:
    """Cap oneDNN's and ideep's per-shape kernel caches at ``entries`` each; call before the first pass.

    Both caches read their capacity from the environment when first used; a value the user set wins."""
    for name in KERNEL_CACHE_VARIABLES:
        os.environ.setdefault(name, str(entries))


ARENAS = 2  # glibc heaps at most (default: 8 a core): freed memory of a thread's own heap is slack no other reuses
_M_ARENA_MAX = -8  # mallopt's parameter number (glibc's malloc.h)


def bound_allocator(arenas: int = ARENAS) -> bool:
    """Keep glibc's slack small: at most ``arenas`` heaps, so that the threads that allocate (the model worker,
    the event loop, the loader, torch's) share the free memory of a few heaps instead of each keeping its own
    partly used one. Call before threads start; ``MALLOC_ARENA_MAX`` set by the user wins. Whether glibc took
    it (False where there is no ``mallopt``)."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return True
    mallopt = _libc("mallopt", [ctypes.c_int, ctypes.c_int], ctypes.c_int)
    return mallopt is not None and bool(mallopt(_M_ARENA_MAX, arenas))


def _libc(name: str, argtypes: list[Any], restype: Any) -> Any | None:
    """The C library's function ``name`` typed so, or None where there is no such library or function."""
    library = ctypes.util.find_library("c")
    if library is None:
        return None
    try:
        function = getattr(ctypes.CDLL(library), name)
    except (OSError, AttributeError):
        return None
    function.argtypes, function.restype = argtypes, restype
    return function


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    return _libc("malloc_trim", [ctypes.c_size_t], ctypes.c_int)  # type: ignore[no-any-return]


def trim() -> bool:
    """Return the allocator's free pages to the system, and the pages of mapped model files read so far
    (decoder/weights/mapped_state.py: read again when needed); whether the allocator could be asked."""
    mapped = sys.modules.get("lookahead_lsp.decoder.weights.mapped_state")  # only where a model was loaded
    if mapped is not None:
        mapped.drop_all_pages()
    function = _malloc_trim()
    if function is None:
        return False
    released = bool(function(0))
    log.debug("malloc_trim: %s", "released memory" if released else "nothing to release")
    return True


MB = 1024 * 1024

MARKS: dict[str, int] = {}
"""Resident bytes at named moments of this process's life (the first time each name is marked)."""


def _kilobytes(path: str, keys: tuple[str, ...]) -> dict[str, int]:
    """``key: value kB`` lines of a /proc file as bytes (the keys found; empty where unreadable)."""
    found: dict[str, int] = {}
    try:
        with open(path) as source:
            for line in source:
                key, _, value = line.partition(":")
                if key in keys and value.split():
                    found[key] = int(value.split()[0]) * 1024
    except OSError:
        pass
    return found


def resident() -> dict[str, int]:
    """This process's resident bytes: ``rss``, ``anonymous``, ``file`` (mapped files' pages) and ``peak``
    (VmHWM); empty where /proc is missing."""
    rollup = _kilobytes("/proc/self/smaps_rollup", ("Rss", "Anonymous"))
    status = _kilobytes("/proc/self/status", ("VmRSS", "VmHWM"))
    if "VmRSS" not in status:
        return {}
    rss = status["VmRSS"]
    anonymous = rollup.get("Anonymous", rss)
    return {"rss": rss, "anonymous": anonymous, "file": rss - anonymous, "peak": status.get("VmHWM", rss)}


def mark(name: str) -> None:
    """Record the resident size now under ``name`` (kept from the first call)."""
    MARKS.setdefault(name, resident().get("rss", 0))


def mapped_files(smaps: str = "/proc/self/smaps") -> dict[str, int]:
    """Resident bytes of mapped files: ``libraries`` (shared objects: code and their data) and every other
    file by its path (model caches mapped by safetensors, ...)."""
    totals: dict[str, int] = {}
    path: str | None = None
    try:
        with open(smaps) as source:
            for line in source:
                first = line.split(maxsplit=6)
                if len(first) >= 5 and "-" in first[0] and ":" in first[3]:  # a mapping's header line
                    path = first[5].strip() if len(first) > 5 and first[5].startswith("/") else None
                elif path is not None and line.startswith("Rss:"):
                    name = "libraries" if ".so" in Path(path).name else path
                    totals[name] = totals.get(name, 0) + int(line.split()[1]) * 1024
    except OSError:
        pass
    return totals


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
                     "fordblks", "keepcost")
    ]  # fmt: skip


@functools.cache
def _mallinfo2() -> Callable[[], _MallInfo2] | None:
    return _libc("mallinfo2", [], _MallInfo2)  # type: ignore[no-any-return]


def allocator() -> dict[str, int]:
    """glibc's heap: ``in_use`` (allocated chunks, mmapped ones included) and ``free`` (freed but still held:
    the allocator's slack); empty without ``mallinfo2`` (glibc < 2.33, macOS, musl)."""
    function = _mallinfo2()
    if function is None:
        return {}
    info = function()
    return {"in_use": int(info.uordblks + info.hblkhd), "free": int(info.fordblks)}
