"""decoder: the KV caches a decoder keeps for the documents it serves, one per key, the least recently used given up.

A typist moves between files: each file's prompt starts with its own text, so one cache would hold only the last
file's entries and every return to a file would prefill its whole prompt again (0.5-1 s for 512 tokens of the
0.5B on a 2-core CPU, several seconds for the 1.5B). :class:`KVSlots` keeps up to ``capacity`` caches
(:class:`~decoder.kv.PrefixKV`), each under an opaque key the caller chooses (the daemon: the document's path).
A request without a key (the benchmarks, ``complete``) uses the key ``None`` like any other. A key not held takes
a new cache while there is room, else the least recently used cache, as it is: the longest prefix the new
prompt shares with it is still reused, so with ``capacity`` 1 this is the single cache of before.

One more cache, the spare (:meth:`KVSlots.spare`), takes an idle-time prefill that departs from what a key's cache
holds (``decoder/steps.py``: :func:`~decoder.steps.warm_slot`): the daemon's prefill of a prompt whose head moved
(snippets ranked again), which a keystroke may stop half-way. The key's cache stays as it was for that keystroke,
whose prompt keeps the old head; a later prefill of the new head goes on from what the spare holds, and once
whole the spare takes the key's place (:meth:`KVSlots.promote`), as it does for a request whose prompt it shares
more of (:meth:`KVSlots.for_prompt`). There is one spare at most, for the key that asked last.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence

from lookahead_lsp.decoder.ids import common_prefix_len
from lookahead_lsp.decoder.kv import PrefixKV

DEFAULT_SLOTS = 2  # the file being edited and the one before it: flipping between two files is the common case


class KVSlots:
    """Up to ``capacity`` :class:`PrefixKV`, each under a key; most recently used last."""

    def __init__(self, capacity: int = DEFAULT_SLOTS) -> None:
        if capacity < 1:
            raise ValueError(f"KV slots: capacity must be at least 1, not {capacity}")
        self.capacity = capacity
        self._slots: OrderedDict[Hashable, PrefixKV] = OrderedDict()
        self._spare: tuple[Hashable, PrefixKV] | None = None

    def get(self, key: Hashable | None) -> PrefixKV:
        """The cache of ``key``, now the most recently used; a key not held takes a fresh cache while there is
        room, else the least recently used one with its entries (see the module docstring)."""
        kv = self._slots.pop(key, None)
        if kv is None:
            kv = self._make_room()
        if kv is None:
            kv = PrefixKV()  # room left: a fresh cache
        self._slots[key] = kv
        return kv

    def _make_room(self) -> PrefixKV | None:
        """Let go of the least recently used cache where the slots are full, and return it (None: room left)."""
        if len(self._slots) < self.capacity:
            return None
        return self._slots.popitem(last=False)[1]

    def for_prompt(self, key: Hashable | None, prompt: Sequence[int]) -> PrefixKV:
        """The cache a request for ``prompt`` continues: ``key``'s (:meth:`get`), or its spare where that shares
        more of the prompt (promoted: the key's cache from now on)."""
        kv = self.get(key)
        spare = self._spare
        if spare is None or spare[0] != key:
            return kv
        if common_prefix_len(spare[1].ids, prompt) <= common_prefix_len(kv.ids, prompt):
            return kv
        self.promote(key)
        return spare[1]

    def spare(self, key: Hashable | None) -> PrefixKV:
        """``key``'s spare cache (see the module docstring): as a prefill left it, or empty where the spare
        was another key's (whose partial prefill is given up)."""
        if self._spare is None or self._spare[0] != key:
            self._spare = (key, PrefixKV())
        return self._spare[1]

    def promote(self, key: Hashable | None) -> None:
        """``key``'s spare becomes its cache (the most recently used); the cache it replaces is let go."""
        if self._spare is None or self._spare[0] != key:
            raise KeyError(f"KV slots: no spare cache for {key!r}")
        _, kv = self._spare
        self._spare = None
        if self._slots.pop(key, None) is None:
            self._make_room()
        self._slots[key] = kv

    def holds(self, key: Hashable | None, prompt: Sequence[int]) -> bool:
        """Whether ``key``'s cache holds ``prompt`` (all but its last token at least, as a prefill leaves it)."""
        kv = self._slots.get(key)
        return kv is not None and kv.holds(prompt)

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
        self._spare = None
