"""runtime: load a Qwen2.5-Coder model for decoding: from a spec, onto a device, in a dtype, ready for inference.

Specs:

- ``"embedded"`` (the default): the embedded Qwen2.5-Coder-0.5B-Instruct GGUF, converted once and cached
  (:mod:`decoder.embedded`); source ``"embedded-cache"`` or ``"embedded-converted"``. ``"embedded-1.5b"``:
  the same for Qwen2.5-Coder-1.5B-Instruct (extra ``model-1.5b``, which ``scripts/setup.sh`` installs too).
- a local transformers directory (``config.json`` inside); source ``"hf-dir"``.
- a ``.gguf`` file: converted once and cached by the file's **sha256** (content, not size and mtime: a copied
  or touched file still hits the cache, and hashing costs about a second per GB); source ``"gguf-cache"`` or
  ``"gguf-converted"``.
- a downloadable base model (``qwen2.5-coder-1.5b-base`` or its hub id ``ggml-org/Qwen2.5-Coder-1.5B-Q8_0-GGUF``:
  :mod:`decoder.weights.base_models`): its downloaded ``.gguf``, served as any ``.gguf`` file; not downloaded, a
  :class:`ModelLoadError` naming the ``lookahead-lsp model --get`` command (the load never downloads).
- a Hugging Face id: loaded from the local HF cache only (``local_files_only=True``: never a download or a
  wait on the network); source ``"hf-id"``.

Attention: the model is loaded with ``attn_implementation="sdpa"`` and then switched to
:mod:`decoder.attention`'s ``"lookahead_sdpa"`` (sdpa without per-head copies of the cache in masked
multi-token passes). Checked with transformers 5.23: a custom
4-D **float** mask (0 where allowed, the dtype's minimum elsewhere; shape ``(1, 1, q, past + q)``) with
explicit ``position_ids`` over a ``DynamicCache`` gives the same logits as sequential decoding, with "sdpa"
and with "eager" alike, and a float32 mask works with a bfloat16 model. A **boolean** 4-D mask is right
with "sdpa" but silently wrong with "eager" (it is added to the scores as 0/1, masking nothing), so decoders
should build float masks.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from lookahead_lsp.decoder.kernels.isa import bf16_allowed
from lookahead_lsp.decoder.kernels.woq_native import native_kernel
from lookahead_lsp.decoder.runtime.cpu_linear import use_onednn_linear
from lookahead_lsp.decoder.runtime.native_model import NativeQwen2
from lookahead_lsp.decoder.runtime.packed_model import (
    cached_packed_state,
    ensure_packed,
    fill_from_checkpoint,
    gguf_kernel_available,
    layer_weights,
    logical_size,
    packed_skeleton,
    prefill_twin,
)
from lookahead_lsp.decoder.runtime.prefill import use_prefill_model
from lookahead_lsp.decoder.runtime.tokenizer import load_tokenizer
from lookahead_lsp.decoder.weights.base_models import find_base, installed_path, known_names, not_downloaded_message
from lookahead_lsp.decoder.weights.cache import cache_root
from lookahead_lsp.decoder.weights.dense import ConvertedCheckpoint, dense_dir
from lookahead_lsp.decoder.weights.embedded import (
    EmbeddedModelError,
    ProgressFn,
    embedded_gguf,
    embedded_parts,
    prepare_embedded,
    prepare_gguf,
)
from lookahead_lsp.decoder.weights.mapped_state import MappedState

logger = logging.getLogger(__name__)

ATTN_IMPLEMENTATION = "sdpa"

STOP_TOKENS = (
    "<|endoftext|>",
    "<|im_end|>",
    "<|im_start|>",
    "<|fim_pad|>",
    "<|file_sep|>",
    "<|repo_name|>",
    "<|fim_prefix|>",
    "<|fim_suffix|>",
    "<|fim_middle|>",
)
"""Qwen2.5-Coder special tokens that end a completion (the EOS token is added too)."""

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "float": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
    "half": torch.float16,
    "float64": torch.float64,
    "fp64": torch.float64,
    "double": torch.float64,
}


class ModelLoadError(Exception):
    """The model could not be loaded; the message is one line saying why."""


@dataclass
class LoadedModel:
    """A model ready for inference (eval mode, on its device) and its tokenizer."""

    model: Any  # transformers' Qwen2ForCausalLM, or on the native pass alone its module tree (NativeQwen2)
    tokenizer: Any  # a transformers fast tokenizer
    device: torch.device
    dtype: torch.dtype
    spec: str
    load_seconds: float
    source: str  # embedded-cache, embedded-converted, gguf-cache, gguf-converted, hf-dir, hf-id
    path: str  # the directory (or HF id) the weights were loaded from
    prefill_dtype: torch.dtype | None = None  # what prompts are prefilled in (decoder.forward.use_prefill_model)
    weights: str = "dense"  # "gguf-native" / "gguf-int4": the GGUF's own blocks on that kernel (decoder.packed_model)

    @property
    def parameters(self) -> int:
        """The model's weights, counted as the float model has them (packed layers count their matrices)."""
        return logical_size(self.model)


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``"auto"``: CUDA, then MPS, then CPU. Otherwise a device string, checked to be usable here."""
    if isinstance(device, str) and device.strip().lower() == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as exc:
        raise ModelLoadError(f"bad device {device!r}: use auto, cpu, cuda, cuda:N or mps") from exc
    if resolved.type == "cpu":
        return resolved
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            raise ModelLoadError(f"device {device!r}: CUDA is not available on this machine")
        if resolved.index is not None and resolved.index >= torch.cuda.device_count():
            raise ModelLoadError(f"device {device!r}: only {torch.cuda.device_count()} CUDA device(s)")
        return resolved
    if resolved.type == "mps":
        if not torch.backends.mps.is_available():
            raise ModelLoadError(f"device {device!r}: MPS is not available on this machine")
        return resolved
    raise ModelLoadError(f"bad device {device!r}: use auto, cpu, cuda, cuda:N or mps")


# On CUDA, ``"auto"`` is float32 where the model's float32 weights take at most this share of the device's memory,
# counted as loaded (a converted GGUF's output head is its own matrix: 630 M parameters for the 0.5B, 1.78 G for the
# 1.5B, so float32 from 10.1 GB and 28.4 GB of GPU memory). Measured on an H200 with the 0.5B, urllib3's 20 holes
# (docs/benchmarks.md): greedy 45 tokens/s in float32 against 25 in bfloat16, and lookahead identical to greedy on
# 20/20 against 18/20, where bfloat16's near-ties come out differently in one-token and wider passes. A model this
# small at batch 1 is bound by the host's kernel launches, not by memory, so its weights' width costs nothing there
# (why bfloat16 was slower, its casts around norms and softmax perhaps, was not looked into).
FLOAT32_SHARE = 0.25


def float32_fits(parameters: int | None, device_memory: int | None) -> bool:
    """Whether ``parameters`` float32 weights take at most :data:`FLOAT32_SHARE` of ``device_memory`` bytes."""
    return parameters is not None and device_memory is not None and 4 * parameters <= FLOAT32_SHARE * device_memory


def resolve_dtype(
    dtype: str | torch.dtype, device: torch.device, float32_fit: Callable[[], bool] | None = None
) -> torch.dtype:
    """``"auto"``: float32 on a CPU or MPS; on CUDA float32 where it fits (``float32_fit()``, asked only then:
    :func:`float32_fits`), else bfloat16. Otherwise a name like ``"float32"``, ``"bf16"``."""
    if isinstance(dtype, torch.dtype):
        if dtype in DTYPES.values():
            return dtype
        raise ModelLoadError(f"bad dtype {dtype}: use auto or one of {', '.join(DTYPES)}")
    name = dtype.strip().lower().removeprefix("torch.")
    if name == "auto":
        if device.type == "cuda" and not (float32_fit is not None and float32_fit()):
            return torch.bfloat16
        return torch.float32
    if name not in DTYPES:
        raise ModelLoadError(f"bad dtype {dtype!r}: use auto or one of {', '.join(DTYPES)}")
    return DTYPES[name]


def parameter_count(where: str) -> int | None:
    """The parameters of the model whose ``config.json`` is in ``where``, counted on the meta device (no
    memory, no weights read); None where the config cannot be read."""
    from transformers import AutoConfig, AutoModelForCausalLM

    try:
        config = AutoConfig.from_pretrained(where, local_files_only=True)
        with torch.device("meta"):
            skeleton = AutoModelForCausalLM.from_config(config)
    except (OSError, ValueError, KeyError, RuntimeError, ImportError):
        return None
    return sum(p.numel() for p in skeleton.parameters())


def _cpu_flags() -> set[str]:
    """This CPU's feature flags from /proc/cpuinfo (x86 ``flags``, Arm ``Features``; empty where unreadable)."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return set(value.split())
    except OSError:
        pass
    return set()


def cpu_has_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 natively (x86 AVX512-BF16 or AMX-BF16, Arm BF16), per /proc/cpuinfo;
    False under a forced instruction-set level without them (decoder/isa.py)."""
    return bf16_allowed() and bool(_cpu_flags() & {"avx512_bf16", "amx_bf16", "bf16"})


def resolve_prefill_dtype(
    prefill_dtype: str,
    device: torch.device,
    dtype: torch.dtype,
    native_bf16: bool | None = None,
    *,
    native_codes: bool = False,
) -> torch.dtype | None:
    """The precision prompts are prefilled in when it differs from the model's (None: the model's own).

    ``"auto"``: for a float32 model on a CPU with bfloat16 instructions, bfloat16 (prefill about 3x faster than
    float32 there, decoding unchanged: docs/benchmarks.md); but a model that decodes on its GGUF's codes through
    the native kernel (``native_codes``) prefills on that kernel too: its int8 products serve 8 rows per decoded
    tile, faster than dequantizing each layer's codes to bfloat16 for oneDNN, on AMD Zen 4's AVX512-BF16 (512
    tokens of the 1.5B 1.43 s against 2.11 s) and on Intel's AMX too (Sapphire Rapids, 2 cores: 800 tokens 7.03 s
    against 16.80 s). ``"same"``: the model's dtype; or a dtype name. ``native_bf16`` stands for this CPU's
    flags in tests."""
    name = prefill_dtype.strip().lower()
    if name == "same":
        return None
    if name == "auto":
        if device.type != "cpu" or dtype != torch.float32 or native_codes:
            return None
        return torch.bfloat16 if (cpu_has_bf16() if native_bf16 is None else native_bf16) else None
    chosen = resolve_dtype(name, device)
    return None if chosen == dtype else chosen


WEIGHTS = ("auto", "dense", "gguf")


def use_gguf_weights(weights: str, device: torch.device, dtype: torch.dtype, source: str) -> bool:
    """Whether the decoding passes run on the GGUF's own blocks rather than dense weights.

    ``"auto"``: on a CPU, for a float32 model that came from a GGUF (the embedded default or a ``.gguf``
    file), where a kernel for its codes runs (the native one, decoder/woq_native.py, else PyTorch's int4
    kernel): a quarter of the bytes a pass of float32, the GGUF's own values (docs/benchmarks.md).
    ``"gguf"``: required (an error where it cannot be); ``"dense"``: never."""
    name = weights.strip().lower()
    if name not in WEIGHTS:
        raise ModelLoadError(f"bad weights {weights!r}: use {', '.join(WEIGHTS)}")
    from_gguf = source.startswith(("embedded", "gguf"))
    if name == "dense":
        return False
    if name == "gguf":
        if not from_gguf:
            raise ModelLoadError("weights 'gguf' needs a model loaded from a GGUF (embedded or a .gguf file)")
        if device.type != "cpu" or not gguf_kernel_available():
            raise ModelLoadError("weights 'gguf' needs a CPU with the native kernel or PyTorch's int4 kernel")
        return True
    return from_gguf and device.type == "cpu" and dtype == torch.float32 and gguf_kernel_available()


def _gguf_producer(spec: str) -> Callable[[Path], Path]:
    """Where the GGUF of a GGUF-sourced spec comes from (the embedded parts, re-assembled, or the file)."""
    parts = embedded_parts(spec)
    if parts is not None:
        return embedded_gguf(parts)
    path = local_path(spec)
    return lambda _directory: path


def local_path(spec: str) -> Path:
    """The file or directory ``spec`` names: a downloaded base model's GGUF (:class:`ModelLoadError` where it is
    not downloaded), else the path itself."""
    base = find_base(spec)
    if base is None:
        return Path(spec).expanduser()
    path = installed_path(base)
    if not path.is_file():
        raise ModelLoadError(not_downloaded_message(base))
    return path


def _one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return (lines[0] if lines else type(exc).__name__)[:300]


def _looks_like_path(spec: str) -> bool:
    return spec.startswith(("/", "./", "../", "~", "\\")) or spec.endswith(".gguf") or spec.count("/") > 1


def resolve_spec(spec: str, progress: ProgressFn | None = None, *, pack: bool = False) -> tuple[str, str]:
    """Where to load ``spec`` from and the source label: ``(directory or HF id, source)``.

    Prepares what needs preparing (assembling and converting a GGUF, packing its codes for the CPU kernels while
    it is at hand), which can take a minute once; ``pack``: the packed codes are made even where the conversion
    was cached (``lookahead-lsp model --prepare``). A GGUF's directory holds its config, tokenizer and vectors;
    :func:`dense_weights_dir` is where its dense matrices are.
    """
    report = progress or (lambda message, _fraction: logger.info("%s", message))

    def packer(gguf: Path, sha256: str) -> None:  # a packing that fails here is tried again by the load that needs it
        try:
            ensure_packed(cache_root(), sha256, lambda _scratch: gguf, report)
        except (OSError, ValueError) as exc:
            logger.warning("could not pack the weights of %s while converting it: %s", spec, _one_line(exc))

    try:
        parts = embedded_parts(spec)
        path = local_path(spec)
        if parts is not None:
            converted = prepare_embedded(progress, parts=parts, also=packer)
            source = "embedded-converted" if converted.fresh else "embedded-cache"
        elif path.is_file() and path.suffix == ".gguf":
            converted = prepare_gguf(path, progress, also=packer)
            source = "gguf-converted" if converted.fresh else "gguf-cache"
        else:
            converted = None
        if converted is not None:
            if pack:
                ensure_packed(cache_root(), converted.path.name, _gguf_producer(spec), report)
            return str(converted.path), source
    except EmbeddedModelError as exc:
        raise ModelLoadError(str(exc)) from exc
    except (OSError, ValueError) as exc:  # packing: a GGUF tensor the packer cannot read, a full disk
        raise ModelLoadError(f"cannot pack the weights of {spec!r}: {_one_line(exc)}") from exc
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelLoadError(f"{spec!r} is a directory without config.json, not a transformers model")
        return str(path), "hf-dir"
    if path.exists():
        raise ModelLoadError(f"{spec!r} is neither a .gguf file nor a transformers model directory")
    if _looks_like_path(spec):
        raise ModelLoadError(f"{spec!r}: no such file or directory")
    _check_hf_id(spec)
    return spec, "hf-id"


def dense_weights_dir(spec: str, where: str, source: str, progress: ProgressFn | None = None) -> str:
    """The transformers directory with ``spec``'s dense weights: ``where`` itself, or for a GGUF-sourced spec its
    dense directory, written from the GGUF on this first need (:mod:`decoder.weights.dense`)."""
    if not source.startswith(("embedded", "gguf")):
        return where
    report = progress or (lambda message, _fraction: logger.info("%s", message))
    try:
        return str(dense_dir(Path(where), _gguf_producer(spec), report))
    except EmbeddedModelError as exc:
        raise ModelLoadError(f"cannot write the dense weights of {spec!r}: {exc}") from exc


def _check_hf_id(spec: str) -> None:
    """An HF id must be valid and its config in the local HF cache (no download is ever attempted)."""
    from huggingface_hub import try_to_load_from_cache
    from huggingface_hub.utils import HFValidationError

    try:
        cached = try_to_load_from_cache(spec, "config.json")
    except HFValidationError as exc:
        raise ModelLoadError(
            f"{spec!r} is not a local path, a .gguf file or a valid HF model id (model names: {known_names()})"
        ) from exc
    if not isinstance(cached, str):
        raise ModelLoadError(
            f"{spec!r} is not a model name or a local path, and not in the local HF cache (no download is tried; "
            f"model names: {known_names()})"
        )


def load_model(
    spec: str = "embedded",
    device: str | torch.device = "auto",
    dtype: str | torch.dtype = "auto",
    progress: ProgressFn | None = None,
    *,
    attn_implementation: str = ATTN_IMPLEMENTATION,
    prefill_dtype: str = "auto",
    weights: str = "auto",
    native: bool = True,
) -> LoadedModel:
    """Load ``spec`` onto ``device`` in ``dtype``, in eval mode. :class:`ModelLoadError` on any failure.

    With GGUF weights (:func:`use_gguf_weights`) the linear layers run on the GGUF's own blocks and prefill
    uses them too. Otherwise, with a ``prefill_dtype`` other than the model's (:func:`resolve_prefill_dtype`),
    a second copy of the weights in that precision prefills prompts (:func:`decoder.forward.use_prefill_model`).
    ``native=False`` keeps GGUF weights on ATen's int4 kernel even where the native one builds (comparisons)."""
    started = time.perf_counter()
    resolved_device = resolve_device(device)
    resolved_dtype = resolve_dtype(dtype, resolved_device)  # a bad name fails before any conversion
    where, source = resolve_spec(spec, progress)
    if resolved_device.type == "cuda":  # "auto" there depends on the model's size against the GPU's memory

        def fits() -> bool:
            memory = torch.cuda.get_device_properties(resolved_device).total_memory
            return float32_fits(parameter_count(where), memory)

        resolved_dtype = resolve_dtype(dtype, resolved_device, fits)
    packed = use_gguf_weights(weights, resolved_device, resolved_dtype, source)
    native_codes = packed and native and native_kernel() is not None
    fast_dtype = resolve_prefill_dtype(prefill_dtype, resolved_device, resolved_dtype, native_codes=native_codes)
    if progress is not None:
        progress(f"loading the model from {where}", None)
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as transformers_logging

    # No "Loading weights" bar: noise in a daemon's log, and tqdm's lock is a multiprocessing semaphore (a file
    # made and removed in /dev/shm or the temporary directory by every process that loads a model).
    transformers_logging.disable_progress_bar()

    def load_weights(in_dtype: torch.dtype) -> Any:
        found = AutoModelForCausalLM.from_pretrained(
            dense_weights_dir(spec, where, source, progress),
            dtype=in_dtype,
            attn_implementation=attn_implementation,
            local_files_only=True,
            device_map=None if resolved_device.type == "cpu" else str(resolved_device),
        )
        prepare_for_inference(found, resolved_device, attn_implementation)
        return found

    try:
        tokenizer = load_tokenizer(where, source)
        if packed:
            report = progress or (lambda message, _fraction: logger.info("%s", message))
            state = cached_packed_state(cache_root(), Path(where).name, _gguf_producer(spec), report)
            dense = functools.partial(dense_weights_dir, spec, where, source, progress)
            model, fast = _load_packed(where, state, fast_dtype, attn_implementation, native, dense)
        else:
            model = load_weights(resolved_dtype)
            fast = load_weights(fast_dtype) if fast_dtype is not None else None
    except (OSError, ValueError, KeyError, RuntimeError, ImportError, EmbeddedModelError) as exc:
        raise ModelLoadError(f"cannot load {spec!r} from {where}: {_one_line(exc)}") from exc
    use_prefill_model(model, fast)
    seconds = time.perf_counter() - started
    form = ("gguf-native" if native_codes else "gguf-int4") if packed else "dense"
    logger.info(
        "loaded %s (%s) on %s as %s, %s weights (prefill: %s) in %.1f s",
        spec,
        source,
        resolved_device,
        resolved_dtype,
        form,
        fast_dtype or resolved_dtype,
        seconds,
    )
    return LoadedModel(
        model,
        tokenizer,
        resolved_device,
        resolved_dtype,
        spec,
        seconds,
        source,
        where,
        fast_dtype or resolved_dtype,
        form,
    )


def _load_packed(
    where: str,
    state: dict[str, torch.Tensor],
    fast_dtype: torch.dtype | None,
    attn_implementation: str,
    native: bool,
    dense_source: Callable[[], str],
) -> tuple[Any, Any]:
    """The CPU model on its packed GGUF weights, built without a float copy of its matrices, and its prefill twin
    (None without a ``fast_dtype``), whose dense layer weights are dequantized from the codes as each prefill
    needs them (bfloat16 on the native kernel) or come from the dense checkpoint in ``dense_source()``, asked
    for only then (ATen's int4 fallback, a shape no kernel takes)."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(where, local_files_only=True)
    light = fast_dtype is None  # a prefill twin runs transformers' forward: it needs transformers' model
    model, counts = packed_skeleton(config, state, attn_implementation, native=native, light=light)
    if isinstance(state, MappedState):
        state.drop_pages()  # what the model keeps of it (the embedding's codes) is read again row by row
    with ConvertedCheckpoint(Path(where), dense_source) as checkpoint:
        fill_from_checkpoint(model, checkpoint)
        prepare_for_inference(model, torch.device("cpu"), attn_implementation)  # the twin copies its settings
        dense = layer_weights(model, fast_dtype, checkpoint) if fast_dtype is not None else None
    logger.info("GGUF weights: %s", ", ".join(f"{n} {kind}" for kind, n in counts.items()))
    return model, prefill_twin(model, dense) if dense is not None else None


def prepare_for_inference(model: Any, device: torch.device, attn_implementation: str = ATTN_IMPLEMENTATION) -> None:
    """Eval mode, no gradients, the decoders' attention, and on a CPU oneDNN's linear kernels
    (:mod:`decoder.cpu_linear`), or where those are missing the matrix-vector-friendly weight layout."""
    model.eval()
    model.requires_grad_(False)
    if isinstance(model, NativeQwen2):  # no forward of its own: the native pass runs it
        return
    if attn_implementation == ATTN_IMPLEMENTATION:
        from lookahead_lsp.decoder.runtime import attention  # imports transformers' masking code: only here

        model.set_attn_implementation(attention.register())
    if device.type == "cpu" and use_onednn_linear(model) == 0:
        transpose_linear_weights(model)


def transpose_linear_weights(model: torch.nn.Module) -> int:
    """Store every Linear weight transposed in memory (same values and shape, column-major strides).

    Measured on a 2-core AVX-512 CPU with torch 2.13 (MKL): ``x @ W.T`` for one to three rows of ``x`` takes
    about twice as long with W row-major (``nn.Linear``'s layout) as with W column-major, and the same for
    four rows or more; decoding passes of 1-3 tokens are most of a completion. Tied weights (an embedding
    sharing the output projection) stay tied: a lookup reads rows either way. Returns the weights changed.
    """
    replaced: dict[int, torch.nn.Parameter] = {}
    for module in model.modules():
        if isinstance(module, torch.nn.Linear) and id(module.weight) not in replaced:
            data = module.weight.detach().t().contiguous().t()
            replaced[id(module.weight)] = torch.nn.Parameter(data, requires_grad=False)
    for module in model.modules():
        if isinstance(module, torch.nn.Linear | torch.nn.Embedding) and id(module.weight) in replaced:
            module.weight = replaced[id(module.weight)]
    return len(replaced)


def stop_token_ids(tokenizer: Any) -> frozenset[int]:
    """The EOS id(s) and the ids of :data:`STOP_TOKENS` that are in this tokenizer's vocabulary."""
    vocab = tokenizer.get_vocab()
    ids = {vocab[token] for token in STOP_TOKENS if token in vocab}
    eos = tokenizer.eos_token_id
    if isinstance(eos, int):
        ids.add(eos)
    elif isinstance(eos, (list, tuple)):
        ids.update(int(i) for i in eos)
    return frozenset(ids)


def physical_cores() -> int:
    """Physical CPU cores this process may use (logical CPUs when the topology is unknown)."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        cores: set[tuple[str, str]] = set()
        physical = core = ""
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "physical id":
                    physical = value.strip()
                elif key == "core id":
                    core = value.strip()
                    cores.add((physical, core))
        if cores:
            return max(1, min(usable, len(cores)))
    except OSError:
        pass
    return max(1, usable)


def configure_torch_threads(n: int | None = None) -> int:
    """Intra-op threads = ``n`` or the physical cores; inter-op threads = 1. Returns the intra-op count.

    torch accepts the inter-op setting only before its first parallel work; later calls keep the old value.
    """
    threads = n if n is not None else physical_cores()
    if threads < 1:
        raise ValueError(f"thread count must be at least 1, not {threads}")
    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        logger.debug("inter-op threads already fixed at %d", torch.get_num_interop_threads())
    return threads
