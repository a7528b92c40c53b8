"""decoder: the KV caches a decoder keeps for the documents it serves, one per key, the least recently used given up.

A typist moves between files: each file's prompt starts with its own text, so one cache would hold only the last
file's entries and every return to a file would prefill its whole prompt again (0.5-1 s for 512 tokens of the
0.5B on a 2-core CPU, several seconds for the 1.5B). :class:`KVSlots` keeps up to ``capacity`` caches
(:class:`~decoder.kv.PrefixKV`), each under an opaque key the caller chooses (the daemon: the document's path).
A request without a key (the benchmarks, ``complete``) uses the key ``None`` like any other. A key not held takes
a new cache while there is room, else the least recently used cache, as it is: the longest prefix the new
prompt shares with it is still reused, so with ``capacity`` 1 this is the single cache of before.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable

from lookahead_lsp.decoder.kv import PrefixKV

DEFAULT_SLOTS = 2  # the file being edited and the one before it: flipping between two files is the common case


class KVSlots:
    """Up to ``capacity`` :class:`PrefixKV`, each under a key; most recently used last."""

    def __init__(self, capacity: int = DEFAULT_SLOTS) -> None:
        if capacity < 1:
            raise ValueError(f"KV slots: capacity must be at least 1, not {capacity}")
        self.capacity = capacity
        self._slots: OrderedDict[Hashable, PrefixKV] = OrderedDict()

    def get(self, key: Hashable | None) -> PrefixKV:
        """The cache of ``key``, now the most recently used; a key not held takes a fresh cache while there is
        room, else the least recently used one with its entries (see the module docstring)."""
        kv = self._slots.pop(key, None)
        if kv is None:
            if len(self._slots) < self.capacity:
                kv = PrefixKV()
            else:
                _, kv = self._slots.popitem(last=False)
        self._slots[key] = kv
        return kv

    @property
    def latest(self) -> PrefixKV:
        """The most recently used cache (a new empty one where none is held yet)."""
        if not self._slots:
            return self.get(None)
        return next(reversed(self._slots.values()))

    def keys(self) -> list[Hashable]:
        """The keys held, least recently used first."""
        return list(self._slots)

    def reset(self) -> None:
        """Forget every cache: the next prompt of any key is prefilled whole."""
        for kv in self._slots.values():
            kv.reset()
        self._slots.clear()
