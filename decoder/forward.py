"""One forward pass through the model's public interface, and chunked prefill.

Both decoders call the model only through these functions, so a one-token lookahead step is numerically
the same call as a greedy step.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from decoder.kv import PrefixKV
from decoder.policy import CostModel
from decoder.types import CancelToken

PREFILL_CHUNK = 128  # tokens per prefill pass: a cancel waits at most one chunk (about 0.6 s on 2 CPU cores)
COST_SIZES = (1, 2, 3, 4, 8, 16)  # tokens per timed pass of the cost model (about a second on 2 CPU cores)
WARM_CHUNK = 64  # idle-time prefill: preempted by a real request within one chunk (about 0.3-0.4 s there)


def forward(
    model: torch.nn.Module,
    kv: PrefixKV,
    tokens: Sequence[int],
    positions: Sequence[int] | None = None,
    mask: torch.Tensor | None = None,
    last_only: bool = False,
) -> torch.Tensor:
    """Run ``tokens`` after the cache's entries; return logits of shape (len(tokens), vocab).

    Without ``positions`` and ``mask`` the tokens are a causal continuation. With them, ``mask`` is the
    (len(tokens), len(tokens)) boolean matrix of which new token may see which (the cache is always visible).
    The cache grows by len(tokens) entries; ``kv.ids`` is left to the caller. ``last_only`` computes the
    logits of the last token only (prefill: the vocabulary projection is a large part of a pass).
    """
    device = next(model.parameters()).device
    input_ids = torch.tensor([list(tokens)], dtype=torch.long, device=device)
    past = kv.cache.get_seq_length()
    kwargs: dict[str, torch.Tensor] = {}
    if positions is not None:
        kwargs["position_ids"] = torch.tensor([list(positions)], dtype=torch.long, device=device)
    else:
        kwargs["position_ids"] = torch.arange(past, past + len(tokens), device=device).unsqueeze(0)
    if mask is not None:
        dtype = model.dtype if isinstance(model.dtype, torch.dtype) else torch.float32
        full = torch.zeros((1, 1, len(tokens), past + len(tokens)), dtype=dtype, device=device)
        blocked = ~mask.to(device)
        full[0, 0, :, past:].masked_fill_(blocked, torch.finfo(dtype).min)
        kwargs["attention_mask"] = full
    with torch.inference_mode():
        out = model(
            input_ids=input_ids,
            past_key_values=kv.cache,
            use_cache=True,
            logits_to_keep=1 if last_only else 0,
            **kwargs,
        )
    return out.logits[0]


def prefill(
    model: torch.nn.Module,
    kv: PrefixKV,
    tokens: Sequence[int],
    cancel: CancelToken | None = None,
    chunk_size: int = PREFILL_CHUNK,
) -> torch.Tensor | None:
    """Append ``tokens`` to the cache in chunks; return the last token's logits (None if cancelled).

    Chunks already prefilled when a cancel arrives stay in the cache: the next request reuses them."""
    logits: torch.Tensor | None = None
    for start in range(0, len(tokens), chunk_size):
        if cancel is not None and cancel.cancelled:
            return None
        chunk = tokens[start : start + chunk_size]
        logits = forward(model, kv, chunk, last_only=True)[-1]
        kv.append(chunk)
    return logits


def masked_pass(model: torch.nn.Module, kv: PrefixKV, n: int) -> None:
    """One pass of ``n`` tokens after the cache's entries, masked as lookahead steps are (a causal mask given
    explicitly), waited for on the device; the cache is left as it was. What it costs is what is timed."""
    past = kv.cache.get_seq_length()
    mask = torch.tril(torch.ones(n, n, dtype=torch.bool))
    tokens = [30 + i % 64 for i in range(n)]  # small ids: in every vocabulary; which ones does not change the time
    forward(model, kv, tokens, list(range(past, past + n)), mask)[-1, 0].item()  # .item() waits for an accelerator
    kv.cache.crop(-n)


def measure_cost(model: torch.nn.Module, sizes: Sequence[int] = COST_SIZES, repeats: int = 1) -> CostModel:
    """Time one :func:`masked_pass` of each size after a short context: the device's cost model for the draft
    policy."""
    kv = PrefixKV()
    forward(model, kv, list(range(10, 26)), last_only=True)
    return CostModel.measure(lambda n: masked_pass(model, kv, n), sizes, repeats)
