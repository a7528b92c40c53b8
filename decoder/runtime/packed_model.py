"""runtime: a Qwen2 model's matrix products on its GGUF's own 4-bit planes (:mod:`decoder.runtime.packed_linear`).

A batch-1 pass on a CPU is bound by the bytes of weights it reads: the embedded model's float32 copy is about
2 GB a pass, its GGUF about 0.46 GB. :func:`pack_gguf` turns every GGUF weight of a qwen2 model into the
packed form of the module it belongs to: int4 planes for the formats with 32-element affine groups (Q4_0,
Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K: exact, see :mod:`decoder.packed_linear`), Q6_K's own codes and scales (the
native kernel's layout 6; on ATen's planes 8-bit groups fitted to its values), for the others (F16) 8-bit
groups fitted to their values (two planes; dense bfloat16 only for a shape the kernel cannot take),
the input embedding as codes and float32 scales. Every decoding-pass matrix then runs on the int4 kernel, whose
result for a row does not depend on the other rows of the pass (checked for 1 to 32 rows): lookahead's wide
passes compute exactly what greedy's one-token passes compute. :func:`use_packed` puts those modules into a loaded
transformers model in place of its ``nn.Linear`` and ``nn.Embedding`` layers (norms and biases stay float32);
:func:`packed_skeleton` and :func:`fill_from_checkpoint` build such a model without ever holding its float
matrices (a skeleton on the meta device, the packed modules, then the small tensors from the checkpoint).
The packed tensors are cached once per GGUF (by its sha256) and PyTorch version (the kernel's packed layout
is PyTorch's own): :func:`cached_packed_state`.

Names follow transformers' GGUF mapping for qwen2; checked on the embedded model: every dequantized GGUF
tensor equals the converted float32 weight exactly.
"""

from __future__ import annotations

import copy
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from lookahead_lsp.decoder.kernels.woq_layout import groups_from_state, woq_state
from lookahead_lsp.decoder.kernels.woq_native import WoqKernel, native_kernel
from lookahead_lsp.decoder.runtime.native_model import NativeQwen2, light_config
from lookahead_lsp.decoder.runtime.native_pass import qualifies
from lookahead_lsp.decoder.runtime.packed_linear import (
    PackedEmbedding,
    PackedLinear,
    int4_kernel_works,
    requantize,
    split_planes,
)
from lookahead_lsp.decoder.runtime.woq_layer import WoqLinear
from lookahead_lsp.decoder.weights.gguf_blocks import GROUP, AffineGroups, SixBitGroups, read_blocks
from lookahead_lsp.decoder.weights.gguf_file import read_gguf
from lookahead_lsp.decoder.weights.gguf_names import module_name
from lookahead_lsp.decoder.weights.mapped_state import MappedState, map_state

logger = logging.getLogger(__name__)

CACHE_FORMAT = "packed-v4"  # bump when the packed state's keys or meaning change

State = dict[str, torch.Tensor]
"""Flat packed tensors: ``<module>.woq.<part>`` (decoder/woq_linear.py's :func:`woq_state`), ``<module>.dense``,
``<module>.codes``/``.scale``/``.offset`` (an embedding)."""


class DenseLinear(torch.nn.Module):
    """A dense linear whose weight has its own dtype (bfloat16 here), float32 in and out, through oneDNN: for
    GGUF tensors the planes cannot hold, and for the layers of the prefill twin (:func:`prefill_twin`)."""

    weight: torch.Tensor
    bias: torch.Tensor | None

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
        super().__init__()
        self.register_buffer("weight", weight)  # a buffer: the model's dtype stays that of its norms (float32)
        self.register_buffer("bias", bias)
        self.in_features, self.out_features = int(weight.shape[1]), int(weight.shape[0])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # F.linear, not oneDNN's _linear_pointwise: on an unpacked bfloat16 weight the latter reorders the weight
        # on every call (3x slower for a 256-token prefill chunk here)
        result = torch.nn.functional.linear(x.to(self.weight.dtype), self.weight).to(x.dtype)
        return result if self.bias is None else result + self.bias


def layer_weights(model: torch.nn.Module, dtype: torch.dtype, checkpoint: Any = None) -> dict[str, torch.Tensor]:
    """The weights of the decoder layers' linears (not the output head) in ``dtype``, by module name: a float
    model's own, or for a packed model's layers read from its converted ``checkpoint`` (an open safetensors
    file), except those on the native kernel when ``dtype`` is bfloat16 (they dequantize themselves:
    :class:`DequantizingLinear`)."""
    weights = {}
    for name, module in model.named_modules():
        if ".layers." not in f".{name}":
            continue
        if isinstance(module, torch.nn.Linear):
            weights[name] = module.weight.detach().to(dtype)
        elif isinstance(module, WoqLinear) and dtype == torch.bfloat16:
            continue
        elif checkpoint is not None and isinstance(module, PackedLinear | WoqLinear | DenseLinear):
            weights[name] = checkpoint.get_tensor(f"{name}.weight").to(dtype)
    return weights


class DequantizingLinear(torch.nn.Module):
    """A prefill twin's layer over a :class:`WoqLinear`'s codes: each call dequantizes the weight to bfloat16
    (the native kernel, a few milliseconds a layer) and runs a dense bfloat16 product, so that the twin needs
    no second copy of the weights (0.7 GB for the 0.5B model, 2.6 GB for the 1.5B)."""

    def __init__(self, source: WoqLinear) -> None:
        super().__init__()
        self.source = source
        self.in_features, self.out_features = source.in_features, source.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        result = torch.nn.functional.linear(x.to(torch.bfloat16), self.source.dense()).to(x.dtype)
        return result if self.source.bias is None else result + self.source.bias


def prefill_twin(model: torch.nn.Module, weights: dict[str, torch.Tensor]) -> torch.nn.Module:
    """A second module tree over the same tensors as ``model`` (norms, embedding, packed head) whose layer
    linears are dense: ``weights`` by name, and every other native-kernel layer a :class:`DequantizingLinear`
    of its codes. Prompts of hundreds of tokens go through dense bfloat16 kernels (about 3x faster than the
    GGUF-code kernels here), decoding passes through the codes. Only ``weights`` are extra memory."""
    shared: dict[int, Any] = {id(t): t for t in [*model.parameters(), *model.buffers()]}
    twin = copy.deepcopy(model, memo=dict(shared))
    modules = dict(twin.named_modules())
    for name, module in list(modules.items()):
        parent_name, _, child = name.rpartition(".")
        if name in weights:
            bias = getattr(module, "bias", None)
            dense = DenseLinear(weights[name], None if bias is None else bias.detach().float())
            setattr(modules[parent_name], child, dense)
        elif isinstance(module, WoqLinear) and ".layers." in f".{name}":
            setattr(modules[parent_name], child, DequantizingLinear(module))
    return twin


def pack_gguf(gguf_path: Path, progress: Callable[[float], None] | None = None) -> State:
    """The packed state of every qwen2 weight matrix in a GGUF file. A model with tied embeddings (no
    ``output.weight``) gets its output head packed from the embedding's blocks. ``progress(fraction)`` after
    each tensor (by bytes)."""
    state: State = {}
    embedding: AffineGroups | SixBitGroups | None = None
    tensors = read_gguf(gguf_path).tensors
    total, done = sum(int(t.n_bytes) for t in tensors) or 1, 0
    for tensor in tensors:
        if progress is not None:
            progress(done / total)
        done += int(tensor.n_bytes)
        name = module_name(tensor.name)
        if name is None:
            continue
        cols, rows = (int(n) for n in tensor.shape[:2])
        groups = read_blocks(tensor.data, tensor.tensor_type.name, rows, cols)
        if name == "model.embed_tokens":
            embedding = groups
            if isinstance(groups, AffineGroups):  # Q6_K's rows stay float: its codes serve a tied head only
                for part in ("codes", "scale", "offset"):
                    state[f"{name}.{part}"] = torch.from_numpy(getattr(groups, part))
            continue
        if groups is None:
            from gguf.quants import dequantize

            dense = torch.from_numpy(dequantize(tensor.data, tensor.tensor_type).reshape(rows, cols))
            if cols % GROUP:  # a shape no kernel takes: a dense bfloat16 matrix
                state[f"{name}.dense"] = dense.to(torch.bfloat16)
                continue
            groups = requantize(dense)  # F16 and formats without codes read here: 8-bit groups
        state |= _woq_state(name, groups)
    if "lm_head.woq.codes" not in state and "lm_head.dense" not in state and embedding is not None:
        state |= _woq_state("lm_head", embedding)
    if progress is not None:
        progress(1.0)
    return state


def packable(rows: int, cols: int) -> bool:
    """Whether ATen's int4 kernel takes a weight of this shape (its packing needs rows in sixteens)."""
    return rows % 16 == 0 and cols % GROUP == 0


def gguf_kernel_available() -> bool:
    """Whether a CPU kernel for GGUF codes runs here: the native one, else ATen's int4 kernel."""
    return native_kernel() is not None or int4_kernel_works()


def _woq_state(name: str, groups: AffineGroups | SixBitGroups) -> State:
    return {f"{name}.woq.{part}": tensor for part, tensor in woq_state(groups).items()}


def _woq_parts(state: State, name: str) -> dict[str, torch.Tensor]:
    prefix = f"{name}.woq."
    return {key[len(prefix) :]: value for key, value in state.items() if key.startswith(prefix)}


def gguf_linear(
    parts: dict[str, torch.Tensor], bias: torch.Tensor | None, kernel: WoqKernel | None
) -> tuple[torch.nn.Module, str]:
    """The module for one stored weight and which kernel it runs on: the native ``kernel``'s
    :class:`WoqLinear`, else (None) ATen's int4 planes, else (a shape those cannot take) a dense bfloat16 matrix."""
    if kernel is not None:
        return WoqLinear(kernel, parts, bias), "native"
    groups = groups_from_state(parts)
    if isinstance(groups, SixBitGroups):  # ATen's planes hold groups of 32: 8-bit groups fitted to Q6_K's values
        groups = requantize(torch.from_numpy(groups.dequantize()))
    rows, cols = groups.shape
    if packable(rows, cols):
        return PackedLinear(split_planes(groups), bias, cols, rows), "int4"
    return DenseLinear(torch.from_numpy(groups.dequantize()).to(torch.bfloat16), bias), "bf16"


def use_packed(
    model: torch.nn.Module, state: State, *, native: bool = True, kernel: WoqKernel | None = None
) -> dict[str, int]:
    """Put the packed modules of ``state`` into ``model`` in place of its linears and input embedding, on the
    native kernel where it runs (and ``native``), else on ATen's int4 kernel; returns how many of each kind.
    ``kernel``: this native kernel instead (tests: the built one even where ``$LOOKAHEAD_LSP_NATIVE`` is off).
    The float weights they replace are freed."""
    kernel = kernel or (native_kernel() if native else None)
    counts = {"native": 0, "int4": 0, "bf16": 0, "embedding": 0}
    modules = dict(model.named_modules())
    for name, module in modules.items():
        parent_name, _, child = name.rpartition(".")
        parent = modules[parent_name] if parent_name else model
        replacement: torch.nn.Module | None = None
        if isinstance(module, torch.nn.Embedding) and f"{name}.codes" in state:
            replacement = PackedEmbedding(state[f"{name}.codes"], state[f"{name}.scale"], state[f"{name}.offset"])
            counts["embedding"] += 1
        elif isinstance(module, torch.nn.Linear):
            bias = None if module.bias is None else module.bias.detach().float().clone()
            parts = _woq_parts(state, name)
            if parts:
                replacement, kind = gguf_linear(parts, bias, kernel)
                counts[kind] += 1
                if isinstance(state, MappedState):  # read once into tiles: its pages can go now, not at the end
                    state.drop_tensors(parts.values())
            elif f"{name}.dense" in state:
                replacement = DenseLinear(state[f"{name}.dense"], bias)
                counts["bf16"] += 1
        if replacement is not None:
            setattr(parent, child, replacement)
    return counts


def packed_skeleton(
    config: Any,
    state: State,
    attn_implementation: str,
    *,
    native: bool = True,
    kernel: WoqKernel | None = None,
    light: bool = False,
) -> tuple[torch.nn.Module, dict[str, int]]:
    """A float32 model of ``config`` built on the meta device with the packed modules of ``state`` put in:
    no float copy of its matrices is ever allocated (for the 1.5B model that copy would be 6 GB). Its other
    tensors (norms, biases) are still on the meta device: :func:`fill_from_checkpoint`.

    ``light``: a :class:`NativeQwen2` (no transformers modeling code imported) where the native pass will run
    every pass of it (:func:`light_config`, every matrix on the native kernel), else transformers' model."""
    kernel = kernel or (native_kernel() if native else None)
    if light and kernel is not None and light_config(config):
        tree = NativeQwen2(config)
        counts = use_packed(tree, state, native=native, kernel=kernel)
        if qualifies(tree, kernel):
            return tree, counts
        logger.info("GGUF weights: not every matrix on the native kernel; building transformers' model")
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation=attn_implementation)
    return model, use_packed(model, state, native=native, kernel=kernel)


def fill_from_checkpoint(model: torch.nn.Module, checkpoint: Any) -> int:
    """Give every tensor of ``model`` still on the meta device its value: float32 from the converted
    ``checkpoint`` (an open safetensors file), or for a module's non-persistent buffers (the rotary
    frequencies) the module built anew from its config. Returns how many were read; ValueError naming a
    tensor that has neither."""
    keys = set(checkpoint.keys())
    read = 0
    for name, module in model.named_modules():
        prefix = f"{name}." if name else ""
        for key, tensor in [*module._parameters.items(), *module._buffers.items()]:
            if tensor is None or not tensor.is_meta:
                continue
            if f"{prefix}{key}" in keys:
                value = checkpoint.get_tensor(f"{prefix}{key}").to(torch.float32).clone()
                if key in module._parameters:
                    module._parameters[key] = torch.nn.Parameter(value, requires_grad=False)
                else:
                    module._buffers[key] = value
                read += 1
            elif key in module._non_persistent_buffers_set and hasattr(module, "config"):
                module._buffers[key] = getattr(type(module)(config=module.config), key)
            else:
                raise ValueError(f"the converted checkpoint has no {prefix}{key}")
    return read


def is_packed(model: torch.nn.Module) -> bool:
    """Whether ``model`` decodes on GGUF codes (its pass costs grow with width unlike float passes)."""
    return any(isinstance(module, PackedLinear | WoqLinear) for module in model.modules())


def logical_size(model: torch.nn.Module) -> int:
    """How many weights ``model`` has as a float model: parameters, plus the matrices of packed layers."""
    total = 0
    for module in model.modules():
        total += sum(p.numel() for p in module.parameters(recurse=False))
        if isinstance(module, PackedLinear | WoqLinear | DenseLinear):
            total += module.in_features * module.out_features + (0 if module.bias is None else module.bias.numel())
        elif isinstance(module, PackedEmbedding):
            total += module.num_embeddings * module.embedding_dim
    return total


def cache_path(root: Path, sha256: str) -> Path:
    """Where the packed state of the GGUF with this sha256 is cached for this PyTorch version."""
    return root / CACHE_FORMAT / f"torch-{torch.__version__}" / f"{sha256}.safetensors"


def prune_older_packed(root: Path, sha256: str) -> int:
    """Remove the packed states of the GGUF with this sha256 in older formats (``packed-v<N>`` other than
    :data:`CACHE_FORMAT`: no code of this version reads them); the bytes freed. Other PyTorch versions' files
    of the current format stay (another environment may use them)."""
    freed = 0
    for stale in root.glob(f"packed-v*/torch-*/{sha256}.safetensors"):
        if stale.parent.parent.name != CACHE_FORMAT:
            freed += stale.stat().st_size
            stale.unlink(missing_ok=True)
    return freed


def cached_packed_state(
    root: Path, sha256: str, produce_gguf: Callable[[Path], Path], report: Callable[[str, float | None], None]
) -> State:
    """The packed state of the GGUF with ``sha256``: from the cache, else packed now from
    ``produce_gguf(scratch_dir)`` and cached (:func:`ensure_packed`). A cache file that cannot be read is
    rebuilt. Either way the state is a map of the cache file (:mod:`decoder.weights.mapped_state`): a model
    built from it drops the pages it read."""
    path = cache_path(root, sha256)
    if path.is_file():
        try:
            return map_state(path)
        except (OSError, ValueError) as exc:
            logger.warning("discarding the unreadable packed cache %s: %s", path, exc)
            path.unlink(missing_ok=True)
    ensure_packed(root, sha256, produce_gguf, report)
    return map_state(path)  # as a later start reads it: the packing's own tensors are freed


def ensure_packed(
    root: Path, sha256: str, produce_gguf: Callable[[Path], Path], report: Callable[[str, float | None], None]
) -> Path:
    """The packed cache file of the GGUF with ``sha256``, packed now from ``produce_gguf(scratch_dir)`` unless
    it is there (written to a temporary file and renamed: never half a file). The conversion calls it while
    it has the GGUF at hand, so that a first start does not assemble the GGUF again."""
    path = cache_path(root, sha256)
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".packing-", dir=path.parent) as scratch:
        message = "packing the model's GGUF weights for the CPU kernels (once)"
        report(message, None)
        state = pack_gguf(produce_gguf(Path(scratch)), lambda fraction: report(message, fraction))
        report("writing the packed weights", None)
        partial = Path(scratch) / "state.safetensors"
        save_file({k: v.contiguous() for k, v in state.items()}, str(partial))
        os.replace(partial, path)
    return path
