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
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import os
from collections.abc import Callable

log = logging.getLogger(__name__)

KERNEL_CACHE_ENTRIES = 64  # kernels kept per cache: a few pass lengths for each distinct layer shape
KERNEL_CACHE_VARIABLES = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")  # oneDNN's, ideep's


def bound_kernel_caches(entries: int = KERNEL_CACHE_ENTRIES) -> None:
    """Cap oneDNN's and ideep's per-shape kernel caches at ``entries`` each; call before the first pass.

    Both caches read their capacity from the environment when first used; a value the user set wins."""
    for name in KERNEL_CACHE_VARIABLES:
        os.environ.setdefault(name, str(entries))


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
