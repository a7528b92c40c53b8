"""decoder: what token id sequences share, for the KV caches and the draft tables alike (no torch: the draft
tables are imported where the daemon starts, before the model's libraries)."""

from __future__ import annotations

from collections.abc import Sequence


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two id sequences."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i
