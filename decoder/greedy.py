"""Plain incremental greedy decoding with a KV cache: the reference that lookahead must equal token for token."""

from __future__ import annotations

import time

import torch

from decoder.forward import forward
from decoder.kv import PrefixKV
from decoder.steps import Generation, begin, pick
from decoder.types import DecodeRequest, DecodeResult


class GreedyDecoder:
    """One token per forward pass. Reuses the KV entries of the longest prefix shared with the last call."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.kv = PrefixKV()

    def generate(self, request: DecodeRequest) -> DecodeResult:
        gen = Generation(request)
        logits = begin(self.model, self.kv, gen)
        if logits is None:
            return DecodeResult(gen.tokens, gen.result_stats())
        t0 = time.perf_counter()
        token = pick(logits, gen.allowed())
        while True:
            gen.commit([token])
            if gen.done() or gen.cancelled():
                break
            logits = forward(self.model, self.kv, [token])[-1]
            self.kv.append([token])
            gen.stats.steps += 1
            gen.stats.tokens_in_passes += 1
            gen.stats.accepted_per_step.append(1)
            token = pick(logits, gen.allowed())
        gen.stats.decode_ms = (time.perf_counter() - t0) * 1000
        return DecodeResult(gen.tokens, gen.result_stats())
