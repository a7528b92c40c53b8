"""decoder: KV cache bookkeeping: which token ids the cache holds, prefix reuse across calls, keeping accepted entries.

The cache is a transformers ``DynamicCache`` whose layers grow in place (:class:`GrowingLayer`): transformers'
own layer concatenates the whole cache with the new entries on every pass (a copy of every layer's keys and
values per token: 7% of a one-token pass at 600 cached tokens here, more as the context grows); this one
writes the new entries into spare capacity and hands attention a view (the native pass asks for the room alone,
:meth:`GrowingCache.make_room`, and writes the entries itself). Invariant between calls and between
decoding steps: the cache holds the keys and values of ``ids`` exactly, in order, at positions
``0 .. len(ids) - 1``.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import cast

import torch
from transformers import DynamicCache
from transformers.cache_utils import Cache, DynamicLayer

from lookahead_lsp.decoder.ids import common_prefix_len

MIN_CAPACITY = 256  # entries a layer's buffer holds at first, and the least spare room it keeps when it grows
GROWTH = 4  # a full buffer grows to what it must hold plus a quarter (at least MIN_CAPACITY): copies stay rare
# (amortised: each entry copied about four times at most), the spare room small (doubling kept up to as much
# again as the prompt: 49 MB for a 2,000-token prompt of the 0.5B model in float32)


class GrowingLayer(DynamicLayer):
    """A ``DynamicLayer`` whose keys and values are views of buffers with spare capacity.

    ``update`` writes the new entries after the current ones (growing the buffers when full) instead of
    concatenating. ``crop`` (inherited) narrows the views, so the capacity stays for the next pass. Where
    something else assigned ``keys``/``values`` (a gather, a cast), the next ``update`` copies them into fresh
    buffers first."""

    _key_buffer: torch.Tensor | None = None
    _value_buffer: torch.Tensor | None = None

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: object, **kwargs: object
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        keys, values = self.keys, self.values
        assert keys is not None and values is not None
        held = keys.shape[-2] if keys.dim() == 4 else 0
        needed = held + key_states.shape[-2]
        if not self._views_of_buffers(keys, values, key_states, needed):
            capacity = needed + max(MIN_CAPACITY, needed // GROWTH)
            self._key_buffer = _buffer_like(key_states, capacity, keys if held else None)
            self._value_buffer = _buffer_like(value_states, capacity, values if held else None)
        assert self._key_buffer is not None and self._value_buffer is not None
        self._key_buffer[..., held:needed, :] = key_states
        self._value_buffer[..., held:needed, :] = value_states
        return self._widen(needed)

    def extend(self, room: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The keys and values grown by ``room``'s entries (shaped as ``update``'s states), left for the caller
        to write: the views widened over the buffers' spare room, nothing copied. None where there is not room
        enough (or the views are not this layer's buffers'): ``update`` grows them."""
        keys, values = self.keys, self.values
        if keys is None or values is None or keys.dim() != 4:
            return None
        needed = keys.shape[-2] + room.shape[-2]
        if not self._views_of_buffers(keys, values, room, needed):
            return None
        return self._widen(needed)

    def _widen(self, needed: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The keys and values as the buffers' first ``needed`` entries (views: nothing copied)."""
        assert self._key_buffer is not None and self._value_buffer is not None
        self.keys = self._key_buffer[..., :needed, :]
        self.values = self._value_buffer[..., :needed, :]
        return self.keys, self.values

    def _views_of_buffers(self, keys: torch.Tensor, values: torch.Tensor, new: torch.Tensor, needed: int) -> bool:
        """Whether ``keys``/``values`` are still the leading views of this layer's buffers, with room enough."""
        kb, vb = self._key_buffer, self._value_buffer
        if kb is None or vb is None or keys.dim() != 4 or kb.dtype != new.dtype or kb.shape[-2] < needed:
            return False
        return (
            keys.data_ptr() == kb.data_ptr()
            and values.data_ptr() == vb.data_ptr()
            and keys.stride() == kb.stride()
            and values.stride() == vb.stride()
        )

    def reset(self) -> None:
        self._key_buffer = self._value_buffer = None
        super().reset()


def _buffer_like(new: torch.Tensor, capacity: int, held: torch.Tensor | None) -> torch.Tensor:
    """A buffer of ``capacity`` entries shaped like ``new``, starting with the ``held`` entries."""
    batch, heads, _, dim = new.shape
    buffer = torch.empty(batch, heads, capacity, dim, dtype=new.dtype, device=new.device)
    if held is not None:
        buffer[..., : held.shape[-2], :] = held
    return buffer


class GrowingCache(DynamicCache):
    """A ``DynamicCache`` of :class:`GrowingLayer` layers (created as the model's layers first write)."""

    def __init__(self) -> None:
        Cache.__init__(self, layer_class_to_replicate=GrowingLayer)
        _LIVE_CACHES.add(self)

    def make_room(self, layer: int, room: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer ``layer``'s keys and values with ``room``'s count of entries after them (``room`` shaped as a
        pass's key states), which the caller then writes in place: a layer with spare room widens its views (no
        copy); a layer not there yet, or one that must grow, takes ``room`` through ``update``."""
        if layer < len(self.layers):
            held = self.layers[layer]
            grown = held.extend(room) if isinstance(held, GrowingLayer) else None
            if grown is not None:
                return grown
        return self.update(room, room, layer)

    @property
    def nbytes(self) -> int:
        """Bytes its layers hold (buffer capacity, not just the entries in use), each storage counted once."""
        storages = {}
        for layer in self.layers:
            names = ("keys", "values", "_key_buffer", "_value_buffer")  # a GrowingLayer's views and buffers
            for tensor in (getattr(layer, name, None) for name in names):
                if isinstance(tensor, torch.Tensor) and tensor.numel():
                    storage = tensor.untyped_storage()
                    storages[storage.data_ptr()] = storage.nbytes()
        return sum(storages.values())


_LIVE_CACHES: weakref.WeakSet[GrowingCache] = weakref.WeakSet()


def kv_cache_bytes() -> int:
    """Bytes held by every live :class:`GrowingCache` of this process (the memory breakdown's KV cache)."""
    return sum(cache.nbytes for cache in list(_LIVE_CACHES))


class PrefixKV:
    """A :class:`GrowingCache` plus the ids it holds; reused by the next call that shares a prefix.

    It also keeps the next-token logits that the last prefill ended with (:meth:`remember`): a call whose
    prompt is exactly that prefix (an editor asking again, a benchmark's repeat) starts from those logits and
    the same entries, with no pass at all, so it decodes bit for bit as the first call did; without them the
    prompt's last token would be run again alone, whose numbers differ slightly from the prefill's."""

    def __init__(self) -> None:
        self.cache: DynamicCache = GrowingCache()
        self.ids: list[int] = []
        self.prompt_logits: tuple[int, torch.Tensor] | None = None  # (prefix length, next-token logits)

    def __len__(self) -> int:
        return len(self.ids)

    def reset(self) -> None:
        self.cache = GrowingCache()
        self.ids = []
        self.prompt_logits = None

    def remember(self, logits: torch.Tensor) -> None:
        """The next-token logits after every entry the cache holds now (the end of a prefill)."""
        self.prompt_logits = (len(self.ids), logits)

    def reuse_for(self, prompt: Sequence[int]) -> int:
        """Crop the cache to the longest prefix it shares with ``prompt`` and return that length.

        At least one prompt token is left out so that the caller's prefill yields next-token logits, unless
        the whole prompt is the prefix whose logits were remembered (:meth:`logits_for` gives them)."""
        shared = common_prefix_len(self.ids, prompt)
        if self.prompt_logits is not None and self.prompt_logits[0] == len(prompt) <= shared:
            self.truncate(len(prompt))
            return len(prompt)
        keep = min(shared, len(prompt) - 1)
        if keep <= 0:
            self.reset()
            return 0
        self.truncate(keep)
        return keep

    def holds(self, prompt: Sequence[int]) -> bool:
        """Whether the cache holds ``prompt``: all but its last token at least, as a prefill leaves it."""
        return common_prefix_len(self.ids, prompt) >= len(prompt) - 1

    def logits_for(self, prompt: Sequence[int]) -> torch.Tensor | None:
        """The remembered next-token logits when the cache holds exactly ``prompt``, else None."""
        held = self.prompt_logits
        if held is None or held[0] != len(prompt) or len(self.ids) != len(prompt):
            return None
        return held[1] if self.ids == list(prompt) else None

    def truncate(self, length: int) -> None:
        """Drop the entries past ``length`` (and the remembered logits of a longer prefix)."""
        extra = len(self.ids) - length
        if extra > 0:
            self.cache.crop(-extra)
            del self.ids[length:]
        if self.prompt_logits is not None and self.prompt_logits[0] > length:
            self.prompt_logits = None

    def copy_prefix(self, source: PrefixKV, length: int) -> None:
        """Hold a copy of ``source``'s first ``length`` entries and ids, in place of what this cache held."""
        self.reset()
        entries = [(layer.keys, layer.values) for layer in source._layers()]
        if length <= 0 or not entries or any(k is None or v is None or k.dim() != 4 for k, v in entries):
            return  # nothing held to copy: this cache stays empty
        with torch.inference_mode():  # the entries are inference tensors (written by forward passes)
            for index, (keys, values) in enumerate(entries):
                assert keys is not None and values is not None
                self.cache.update(keys[..., :length, :], values[..., :length, :], index)
        self.ids = list(source.ids[:length])

    def _layers(self) -> list[DynamicLayer]:
        return [cast(DynamicLayer, layer) for layer in self.cache.layers]  # GrowingLayers (DynamicLayers)

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
        if self.prompt_logits is not None and self.prompt_logits[0] > start:
            self.prompt_logits = None
        if list(offsets) != list(range(len(offsets))):  # move the kept entries to the front, in place
            index = torch.tensor([start + o for o in offsets], dtype=torch.long)
            with torch.inference_mode():  # the entries are inference tensors (written by forward passes)
                self._move_to(start, index)
        self.cache.crop(-(n_appended - len(offsets)))
        del self.ids[start:]
        self.ids.extend(ids)

    def _move_to(self, start: int, index: torch.Tensor) -> None:
        for layer in self._layers():
            keys, values = layer.keys, layer.values
            assert keys is not None and values is not None
            index_dev = index.to(keys.device)
            keys[..., start : start + len(index), :] = keys.index_select(-2, index_dev)
            values[..., start : start + len(index), :] = values.index_select(-2, index_dev)
