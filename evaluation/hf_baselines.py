"""transformers' own ``generate`` as baselines, behind the same ``Decoder`` interface as ours.

``HFGenerateDecoder(model)`` is plain greedy ``generate``; ``HFGenerateDecoder(model, prompt_lookup=7)`` adds
transformers' prompt lookup decoding (``prompt_lookup_num_tokens``; ``max_matching_ngram_size`` left at
transformers' default). Both run ``do_sample=False`` with no repetition penalty, the request's
``max_new_tokens`` and EOS ids, a fresh cache per call (no prefix reuse) and no stop callback: compare them
with the other decoders on raw token ids with stop rules off.

Statistics come from public hooks only: a streamer timestamps each chunk of new tokens (the first chunk
ends the prefill; every later chunk is one decoding step and its size the tokens that step accepted) and a
forward pre-hook counts the passes and the query tokens in them.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from lookahead_lsp.decoder.types import DecodeRequest, DecodeResult, DecodeStats, FinishReason

HF_PROMPT_LOOKUP_TOKENS = 7  # the value of the DESIGN.md anchor


class _StepRecorder:
    """A transformers streamer: the first ``put`` is the prompt, every later one a step's new tokens."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.chunks: list[tuple[float, int]] = []  # (seconds since start, tokens in the chunk)
        self._prompt_seen = False

    def put(self, value: torch.Tensor) -> None:
        if not self._prompt_seen:
            self._prompt_seen = True
            return
        self.chunks.append((time.perf_counter() - self.start, int(value.numel())))

    def end(self) -> None:
        pass


class HFGenerateDecoder:
    """``model.generate`` greedy, optionally with prompt lookup; fills :class:`DecodeStats` like ours."""

    def __init__(self, model: Any, prompt_lookup: int | None = None) -> None:
        self.model = model
        self.prompt_lookup = prompt_lookup

    def generate(self, request: DecodeRequest) -> DecodeResult:
        device = next(self.model.parameters()).device
        input_ids = torch.tensor([list(request.prompt_ids)], dtype=torch.long, device=device)
        eos = sorted(request.eos_ids)
        options: dict[str, Any] = {
            "max_new_tokens": request.max_new_tokens,
            "min_new_tokens": 0,
            "do_sample": False,
            "num_beams": 1,
            "repetition_penalty": 1.0,
            "eos_token_id": eos or None,
            "pad_token_id": eos[0] if eos else 0,
        }
        if self.prompt_lookup is not None:
            options["prompt_lookup_num_tokens"] = self.prompt_lookup
        query_tokens: list[int] = []  # per forward pass: the tokens it ran (the prefill first)

        def count_pass(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            ids = kwargs.get("input_ids", args[0] if args else None)
            query_tokens.append(int(ids.shape[-1]) if ids is not None else 0)

        hook = self.model.register_forward_pre_hook(count_pass, with_kwargs=True)
        recorder = _StepRecorder()
        try:
            with torch.inference_mode():
                output = self.model.generate(
                    input_ids, attention_mask=torch.ones_like(input_ids), streamer=recorder, **options
                )
        finally:
            hook.remove()
        total_s = time.perf_counter() - recorder.start
        tokens = [int(t) for t in output[0, input_ids.shape[1] :]]
        finish: FinishReason = "length"
        if tokens and tokens[-1] in request.eos_ids:  # like ours: the EOS token is not a new token
            tokens.pop()
            finish = "eos"
        return DecodeResult(tokens, _stats(request, recorder, query_tokens, len(tokens), finish, total_s))


def _stats(
    request: DecodeRequest,
    recorder: _StepRecorder,
    query_tokens: list[int],
    new_tokens: int,
    finish: FinishReason,
    total_s: float,
) -> DecodeStats:
    prefill_s = recorder.chunks[0][0] if recorder.chunks else total_s
    return DecodeStats(
        prompt_tokens=len(request.prompt_ids),
        prefilled_tokens=len(request.prompt_ids),
        steps=max(len(query_tokens) - 1, 0),
        new_tokens=new_tokens,
        accepted_per_step=[size for _, size in recorder.chunks[1:]],
        tokens_in_passes=sum(query_tokens[1:]),
        prefill_ms=prefill_s * 1000.0,
        decode_ms=(total_s - prefill_s) * 1000.0,
        finish_reason=finish,
    )
