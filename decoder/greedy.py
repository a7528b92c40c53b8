"""decoder: plain incremental greedy decoding with a KV cache: the reference lookahead must equal token for token."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from lookahead_lsp.decoder.kv import PrefixKV
from lookahead_lsp.decoder.steps import Generation, drive, plain_step, warm
from lookahead_lsp.decoder.types import CancelToken, DecodeRequest, DecodeResult


class GreedyDecoder:
    """One token per forward pass. Reuses the KV entries of the longest prefix shared with the last call."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.kv = PrefixKV()

    def warm(self, prompt_ids: Sequence[int], cancel: CancelToken | None = None) -> int:
        """Prefill a prompt's KV entries in idle time (see :func:`decoder.steps.warm`)."""
        return warm(self.model, self.kv, prompt_ids, cancel)

    def reset(self) -> None:
        """Forget the cached prefix: the next call prefills its whole prompt."""
        self.kv.reset()

    def generate(self, request: DecodeRequest) -> DecodeResult:
        return drive(self.model, self.kv, request, lambda gen: _GreedyStep(self, gen))


class _GreedyStep:
    def __init__(self, decoder: GreedyDecoder, gen: Generation) -> None:
        self.decoder, self.gen = decoder, gen

    def extend(self, committed: Sequence[int]) -> None:
        pass

    def step(self) -> list[int]:
        return [plain_step(self.decoder.model, self.decoder.kv, self.gen)]
