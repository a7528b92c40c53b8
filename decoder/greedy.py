"""decoder: plain incremental greedy decoding with a KV cache: the reference lookahead must equal token for token."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from lookahead_lsp.decoder.kv import PrefixKV
from lookahead_lsp.decoder.slots import DEFAULT_SLOTS
from lookahead_lsp.decoder.steps import Generation, SlotDecoder, drive, plain_step
from lookahead_lsp.decoder.types import DecodeRequest, DecodeResult


class GreedyDecoder(SlotDecoder):
    """One token per forward pass. Reuses the KV entries of the longest prefix a request shares with the last
    call of its slot (:mod:`decoder.slots`: up to ``slots`` caches, one per document)."""

    def __init__(self, model: torch.nn.Module, slots: int = DEFAULT_SLOTS) -> None:
        super().__init__(model, slots)

    def generate(self, request: DecodeRequest) -> DecodeResult:
        kv = self.slots.for_prompt(request.slot, request.prompt_ids)
        return drive(self.model, kv, request, lambda gen: _GreedyStep(self.model, kv, gen))


class _GreedyStep:
    def __init__(self, model: torch.nn.Module, kv: PrefixKV, gen: Generation) -> None:
        self.model, self.kv, self.gen = model, kv, gen

    def extend(self, committed: Sequence[int]) -> None:
        pass

    def step(self) -> list[int]:
        return [plain_step(self.model, self.kv, self.gen)]
