"""runtime: where a loaded model's tensor bytes go, by category (the memory breakdown of ``bench memory``).

:func:`tensor_footprint` walks a model (and its prefill twin, :mod:`decoder.runtime.prefill`) and sums each
tensor's storage once, however many modules share it, under one of :data:`CATEGORIES`:

- ``codes``: the decoder layers' weight codes and scales (native tiles, ATen int4 planes);
- ``head``: the output head (its codes, or a float matrix);
- ``embedding``: the input embedding table (codes and scales, or a float matrix; nothing when it reads the
  head's codes);
- ``float``: dense float copies of matrices (a float model's linears, bfloat16 fallbacks, the prefill twin's
  dense layers);
- ``small``: norms, biases, rotary frequencies.

Storage that is a view of a mapped file (:mod:`decoder.weights.mapped_state`: the embedding read from the packed
cache) counts under ``mapped`` instead, at its full size, whether or not its pages are resident: the
process-level figures (``lsp_server/memory.py``) say how much of it is.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from lookahead_lsp.decoder.runtime.packed_linear import PackedEmbedding, PackedLinear
from lookahead_lsp.decoder.runtime.prefill import prefill_model
from lookahead_lsp.decoder.runtime.woq_layer import WoqLinear
from lookahead_lsp.decoder.weights.mapped_state import in_a_map

CATEGORIES = ("codes", "head", "embedding", "float", "small", "mapped")


def _category(name: str, module: torch.nn.Module, key: str, tensor: torch.Tensor) -> str:
    """The category of ``module``'s tensor ``key`` (``name`` is the module's path in the model)."""
    head = name == "lm_head" or name.endswith(".lm_head")
    if isinstance(module, PackedEmbedding) or (isinstance(module, torch.nn.Embedding) and key == "weight"):
        return "embedding"
    if key == "bias":
        return "small"
    if isinstance(module, WoqLinear | PackedLinear):
        return "head" if head else "codes"
    if tensor.dim() >= 2:
        return "head" if head else "float"
    return "small"


def _tensors(model: torch.nn.Module) -> Iterable[tuple[str, torch.nn.Module, str, torch.Tensor]]:
    for name, module in model.named_modules():
        for key, tensor in [*module._parameters.items(), *module._buffers.items()]:
            if tensor is not None and not tensor.is_meta:
                yield name, module, key, tensor


def tensor_footprint(model: torch.nn.Module) -> dict[str, int]:
    """Bytes of ``model``'s tensors (and its prefill twin's) by :data:`CATEGORIES`, each storage counted once
    (tied or shared tensors: under the first category that reaches them, the model before its twin)."""
    totals = dict.fromkeys(CATEGORIES, 0)
    seen: set[int] = set()
    twin = prefill_model(model)
    for tree in (model, twin) if twin is not model else (model,):
        for name, module, key, tensor in _tensors(tree):
            storage = tensor.untyped_storage()
            if storage.data_ptr() in seen:
                continue
            seen.add(storage.data_ptr())
            mapped = in_a_map(storage.data_ptr())
            totals["mapped" if mapped else _category(name, module, key, tensor)] += storage.nbytes()
    return totals
