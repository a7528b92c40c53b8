"""decoder: plain incremental greedy decoding with a KV cache: the reference lookahead must equal token for token."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch

from lookahead_lsp.decoder.kv import PrefixKV
from lookahead_lsp.decoder.slots import DEFAULT_SLOTS, KVSlots
from lookahead_lsp.decoder.steps import Generation, drive, plain_step, warm
from lookahead_lsp.decoder.types import CancelToken, DecodeRequest, DecodeResult


class GreedyDecoder:
    """One token per forward pass. Reuses the KV entries of the longest prefix a request shares with the last
    call of its slot (:mod:`decoder.slots`: up to ``slots`` caches, one per document)."""

    def __init__(self, model: torch.nn.Module, slots: int = DEFAULT_SLOTS) -> None:
        self.model = model
        self.slots = KVSlots(slots)

    @property
    def kv(self) -> PrefixKV:
        """The cache used last."""
        return self.slots.latest

    def warm(self, prompt_ids: Sequence[int], cancel: CancelToken | None = None, slot: Hashable | None = None) -> int:
        """Prefill a prompt's KV entries in idle time (see :func:`decoder.steps.warm`)."""
        return warm(self.model, self.slots.get(slot), prompt_ids, cancel)

    def reset(self) -> None:
        """Forget every cached prefix: the next call prefills its whole prompt."""
        self.slots.reset()

    def generate(self, request: DecodeRequest) -> DecodeResult:
        kv = self.slots.get(request.slot)
        return drive(self.model, kv, request, lambda gen: _GreedyStep(self.model, kv, gen))


class _GreedyStep:
    def __init__(self, model: torch.nn.Module, kv: PrefixKV, gen: Generation) -> None:
        self.model, self.kv, self.gen = model, kv, gen

    def extend(self, committed: Sequence[int]) -> None:
        pass

    def step(self) -> list[int]:
        return [plain_step(self.model, self.kv, self.gen)]
