"""decoder: one forward pass through the model's public interface, and chunked prefill.

Both decoders call the model only through these functions, so a one-token lookahead step is numerically
the same call as a greedy step.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch

from lookahead_lsp.decoder.kernels.woq_native import WoqKernel, native_kernel
from lookahead_lsp.decoder.kv import PrefixKV
from lookahead_lsp.decoder.runtime.native_pass import head_dim, native_pass
from lookahead_lsp.decoder.runtime.prefill import prefill_model
from lookahead_lsp.decoder.runtime.row_attention import plan_keys, plan_rows
from lookahead_lsp.decoder.types import CancelToken

PREFILL_CHUNK = 256  # tokens per prefill pass (a cancel stops a pass between layers: it need not be small)
TIMING_CONTEXT = 128  # entries before the start-up timings' passes (real prompts hold hundreds: live passes correct it)


class Preempted(Exception):
    """A pass stopped between layers because its request was cancelled."""


@contextmanager
def preemptible(
    model: torch.nn.Module, kv: PrefixKV, cancel: CancelToken | None
) -> Iterator[Callable[[], None] | None]:
    """Within this block a forward pass raises :class:`Preempted` at the next layer once ``cancel`` is set:
    transformers' layers through forward hooks, the native pass through the check this yields (None without a
    ``cancel``) as its ``between_layers``.

    A prefill chunk on a CPU takes up to a second; between layers a newer keystroke waits a few milliseconds.
    Before :class:`Preempted` leaves the block, ``kv`` drops the entries the stopped pass left in some layers
    (:meth:`PrefixKV.restore`)."""
    if cancel is None:
        yield None
        return

    def stop() -> None:
        if cancel.cancelled:
            raise Preempted

    layers = getattr(getattr(model, "model", model), "layers", None)
    hooked: Iterable[torch.nn.Module] = layers if isinstance(layers, torch.nn.ModuleList) else ()
    handles = [layer.register_forward_pre_hook(lambda _module, _args: stop()) for layer in hooked]
    try:
        yield stop
    except Preempted:
        kv.restore()
        raise
    finally:
        for handle in handles:
            handle.remove()


def native_attention(model: torch.nn.Module) -> WoqKernel | None:
    """The native kernels where ``model``'s decoding passes take their row attention: built, the model float32
    and its heads a multiple of 16 wide; else None (:mod:`decoder.row_attention`'s flash-kernel plan)."""
    width = head_dim(getattr(model, "config", None))
    if _dtype(model) != torch.float32 or width <= 0 or width % 16:
        return None
    return native_kernel()


_CACHE_ARGUMENTS: dict[type, str] = {}


def cache_argument(model_class: type[Any]) -> str:
    """The name under which ``model_class``'s forward takes the KV cache: ``cache`` in transformers since it
    renamed the argument (the old ``past_key_values`` warns on every call), ``past_key_values`` before that."""
    name = _CACHE_ARGUMENTS.get(model_class)
    if name is None:
        taken = inspect.signature(model_class.forward).parameters
        name = _CACHE_ARGUMENTS[model_class] = "cache" if "cache" in taken else "past_key_values"
    return name


def forward(
    model: torch.nn.Module,
    kv: PrefixKV,
    tokens: Sequence[int],
    positions: Sequence[int] | None = None,
    mask: torch.Tensor | None = None,
    last_only: bool = False,
    between_layers: Callable[[], None] | None = None,
) -> torch.Tensor:
    """Run ``tokens`` after the cache's entries; return logits of shape (len(tokens), vocab).

    Without ``positions`` and ``mask`` the tokens are a causal continuation. With them, ``mask`` is the
    (len(tokens), len(tokens)) boolean matrix of which new token may see which (the cache is always visible).
    The cache grows by len(tokens) entries; ``kv.ids`` is left to the caller. ``last_only`` computes the
    logits of the last token only (prefill: the vocabulary projection is a large part of a pass).
    ``between_layers`` (the native pass only) is called before each layer and may raise to stop the pass.
    On the native pass (:mod:`decoder.runtime.native_pass`) every row, prefill's too, is computed as a
    one-token decoding pass computes it.
    """
    device = next(model.parameters()).device
    past = kv.cache.get_seq_length()
    rows = list(positions) if positions is not None else list(range(past, past + len(tokens)))
    kwargs: dict[str, object] = {}
    if device.type == "cpu":  # the same arithmetic per row in every pass
        kernel = native_attention(model)
        native = None if kernel is None else native_pass(model, kernel)
        if native is not None and kernel is not None:
            plan = plan_keys(kernel, past, rows, mask)
            with torch.inference_mode():
                return native(kv.cache, tokens, rows, plan, last_only, between_layers)
        if not last_only:  # a decoding pass on transformers' path: its rows' attention planned as the kernel's
            kwargs["row_plan"] = plan_rows(past, rows, mask) if kernel is None else plan_keys(kernel, past, rows, mask)
    input_ids = torch.tensor([list(tokens)], dtype=torch.long, device=device)
    kwargs["position_ids"] = torch.tensor([rows], dtype=torch.long, device=device)
    if mask is not None:
        dtype = model.dtype if isinstance(model.dtype, torch.dtype) else torch.float32
        full = torch.zeros((1, 1, len(tokens), past + len(tokens)), dtype=dtype, device=device)
        blocked = ~mask.to(device)
        full[0, 0, :, past:].masked_fill_(blocked, torch.finfo(dtype).min)
        kwargs["attention_mask"] = full
    kwargs[cache_argument(type(model))] = kv.cache
    with torch.inference_mode():
        out = model(
            input_ids=input_ids,
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

    A cancel stops the running chunk between layers (:func:`preemptible`); chunks already prefilled stay in
    the cache and the next request reuses them."""
    runner = prefill_model(model)
    if runner is model:
        return _prefill(runner, kv, tokens, cancel, chunk_size)
    kv.cast(_dtype(runner))
    try:
        logits = _prefill(runner, kv, tokens, cancel, chunk_size)
    finally:
        kv.cast(_dtype(model))
    return None if logits is None else logits.to(_dtype(model))


def _dtype(model: torch.nn.Module) -> torch.dtype:
    return next(model.parameters()).dtype


def _prefill(
    model: torch.nn.Module, kv: PrefixKV, tokens: Sequence[int], cancel: CancelToken | None, chunk_size: int
) -> torch.Tensor | None:
    logits: torch.Tensor | None = None
    try:
        with preemptible(model, kv, cancel) as stop:
            for start in range(0, len(tokens), chunk_size):
                if cancel is not None and cancel.cancelled:
                    return None
                chunk = tokens[start : start + chunk_size]
                logits = forward(model, kv, chunk, last_only=True, between_layers=stop)[-1]
                kv.append(chunk)
    except Preempted:
        return None
    return logits


def timing_cache(model: torch.nn.Module, tokens: int = TIMING_CONTEXT) -> PrefixKV:
    """A cache holding ``tokens`` entries of arbitrary ids (which ids does not change a pass's time): what the
    start-up timings (``decoder/cost_table.py``, ``decoder/tile_pairs.py``) run their passes after."""
    vocab = int(getattr(getattr(model, "config", None), "vocab_size", 0) or 256)
    kv = PrefixKV()
    prefill(model, kv, [(i * 7919) % vocab for i in range(tokens)])
    return kv


def masked_pass(model: torch.nn.Module, kv: PrefixKV, n: int) -> None:
    """One pass of ``n`` tokens after the cache's entries, masked as lookahead steps are (a causal mask given
    explicitly), waited for on the device; the cache is left as it was. What it costs is what is timed."""
    past = kv.cache.get_seq_length()
    mask = torch.tril(torch.ones(n, n, dtype=torch.bool))
    tokens = [30 + i % 64 for i in range(n)]  # small ids: in every vocabulary; which ones does not change the time
    forward(model, kv, tokens, list(range(past, past + n)), mask)[-1, 0].item()  # .item() waits for an accelerator
    kv.cache.crop(-n)
