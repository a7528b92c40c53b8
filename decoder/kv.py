"""KV cache bookkeeping: which token ids the cache holds, prefix reuse across calls, keeping accepted entries.

The cache is transformers' ``DynamicCache``. Invariant between calls and between decoding steps: the cache
holds the keys and values of ``ids`` exactly, in order, at positions ``0 .. len(ids) - 1``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two id sequences."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class PrefixKV:
    """A ``DynamicCache`` plus the ids it holds; reused by the next call that shares a prefix."""

    def __init__(self) -> None:
        self.cache = DynamicCache()
        self.ids: list[int] = []

    def __len__(self) -> int:
        return len(self.ids)

    def reset(self) -> None:
        self.cache = DynamicCache()
        self.ids = []

    def reuse_for(self, prompt: Sequence[int]) -> int:
        """Crop the cache to the longest prefix it shares with ``prompt`` and return that length.

        At least one prompt token is always left out so that the caller's prefill yields next-token logits.
        """
        keep = min(common_prefix_len(self.ids, prompt), len(prompt) - 1)
        if keep <= 0:
            self.reset()
            return 0
        self.truncate(keep)
        return keep

    def truncate(self, length: int) -> None:
        """Drop the entries past ``length``."""
        extra = len(self.ids) - length
        if extra > 0:
            self.cache.crop(-extra)
            del self.ids[length:]

    def _layers(self) -> list[DynamicLayer]:
        return [cast(DynamicLayer, layer) for layer in self.cache.layers]  # a plain DynamicCache's layers

    def cast(self, dtype: torch.dtype) -> None:
        """Hold the entries in ``dtype`` (a prefill in another precision than decoding reads and writes them)."""
        for layer in self._layers():
            if layer.keys is not None and layer.values is not None and layer.keys.dtype != dtype:
                layer.keys, layer.values = layer.keys.to(dtype), layer.values.to(dtype)

    def restore(self) -> None:
        """Drop the entries past ``len(self)`` that a pass stopped between layers left in some layers."""
        if not self.ids:
            self.reset()
            return
        for layer in self._layers():
            extra = 0 if layer.keys is None or not layer.is_initialized else layer.keys.shape[-2] - len(self.ids)
            if extra > 0:
                layer.crop(-extra)

    def append(self, ids: Sequence[int]) -> None:
        """Record ids whose entries a forward pass has just appended to the cache."""
        self.ids.extend(ids)

    def keep_selected(self, start: int, offsets: Sequence[int], ids: Sequence[int]) -> None:
        """After a pass that appended entries from ``start`` on, keep only ``start + offsets`` (in order).

        ``ids`` are the tokens of the kept entries. Contiguous leading offsets only crop; others are gathered.
        """
        n_appended = self.cache.get_seq_length() - start
        if list(offsets) == list(range(len(offsets))):
            self.cache.crop(-(n_appended - len(offsets)))
        else:
            index = torch.tensor([start + o for o in offsets], dtype=torch.long)
            for any_layer in self.cache.layers:
                layer = cast(DynamicLayer, any_layer)  # a plain DynamicCache holds DynamicLayers only
                keys, values = layer.keys, layer.values
                assert keys is not None and values is not None
                index_dev = index.to(keys.device)
                new_keys = torch.cat([keys[..., :start, :], keys.index_select(-2, index_dev)], dim=-2)
                new_values = torch.cat([values[..., :start, :], values.index_select(-2, index_dev)], dim=-2)
                layer.keys, layer.values = new_keys, new_values
        del self.ids[start:]
        self.ids.extend(ids)
