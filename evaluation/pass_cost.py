"""Forward-pass time by number of tokens, as loaded by the daemon and as transformers loads it.

``lookahead-lsp bench passes [--context 800] [--repeats 9] [--only daemon,dense,transformers]`` prints, for
passes of 1 to 16 tokens after a context of ``--context`` tokens (masked, as lookahead steps are), the best and
median milliseconds of the daemon's model (on a CPU: the GGUF's codes on the native kernel,
:mod:`decoder.packed_model`), of the same on ATen's int4 kernel (``int4``), of the daemon's dense float32 model
(oneDNN linear kernels, packed-GQA attention: :func:`decoder.model.prepare_for_inference`) and of the same
weights as transformers leaves them (row-major, its "sdpa"), interleaved so that all see the same machine load;
an 800-token prefill for each; and each one's costs relative to a one-token pass (the draft policy's tables in
``decoder/policy.py``). For a model on the native kernel it adds its roofline: the weight bytes a one-token pass
reads and the rate its best time gives them, beside this machine's streaming read measured in the same run, and
the prefill's int8 multiply-adds per second. ``--only daemon`` times the daemon's model alone (the float32
copies of the 1.5B model would take 6 GB each). The first line names the native kernel's instruction-set level
(an ARM64 machine's run reports neon-dotprod or neon-i8mm).
"""

from __future__ import annotations

import platform
import statistics
import time
from typing import NamedTuple

import torch

from lookahead_lsp.decoder.cost_table import settle_pairs
from lookahead_lsp.decoder.forward import PREFILL_CHUNK, masked_pass, prefill
from lookahead_lsp.decoder.kernels.woq_native import native_kernel
from lookahead_lsp.decoder.kv import PrefixKV
from lookahead_lsp.decoder.runtime.model import load_model
from lookahead_lsp.decoder.runtime.native_pass import native_pass
from lookahead_lsp.decoder.tile_pairs import describe
from lookahead_lsp.evaluation.stream_read import stream_read_rate

SIZES = (1, 2, 3, 4, 6, 8, 12, 16)
KINDS = {
    "daemon": "daemon",
    "int4": "daemon on ATen's int4",
    "dense": "daemon, dense float32",
    "transformers": "transformers",
}
"""The models compared (``--only``), by short name: their names in the table."""


def as_transformers_loads_it(model: torch.nn.Module) -> None:
    """Undo the daemon's preparation: PyTorch's own Linear, row-major weights, transformers' own sdpa attention."""
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            module.__class__ = torch.nn.Linear
            module.weight = torch.nn.Parameter(module.weight.detach().contiguous(), requires_grad=False)
    model.set_attn_implementation("sdpa")  # type: ignore[operator]


def kernel_line() -> str:
    """The native kernel this process decodes on: its level and library, or that there is none."""
    kernel = native_kernel()
    if kernel is None:
        return f"native kernel: none on {platform.machine()} (ATen's int4 kernel; the log says why)"
    return f"native kernel: {kernel.isa} on {platform.machine()} ({kernel.library.name})"


def timed_pass(model: torch.nn.Module, kv: PrefixKV, n: int) -> float:
    """Milliseconds of one :func:`decoder.forward.masked_pass` of ``n`` tokens."""
    started = time.perf_counter()
    masked_pass(model, kv, n)
    return (time.perf_counter() - started) * 1000


class Footprint(NamedTuple):
    """What a native model's pass computes from its weights."""

    weight_bytes: int  # read by a one-token pass: every product's tiles and biases, the head's included
    multiply_adds: int  # per token, in the layers' products
    head_multiply_adds: int  # per token the head computes (a prefill: each chunk's last token only)
    last_layer_rest: int  # per token, the last layer's past q|k|v (a prefill: each chunk's last token only)


def footprint(model: torch.nn.Module) -> Footprint | None:
    """The :class:`Footprint` of a model on the native kernel, else None."""
    kernel = native_kernel()
    native = native_pass(model, kernel) if kernel is not None else None
    if native is None:
        return None
    *layers, head = native.products()
    last = native.layers[-1]
    return Footprint(
        sum(product.nbytes for product in (*layers, head)),
        sum(product.rows * product.cols for product in layers),
        head.rows * head.cols,
        sum(product.rows * product.cols for product in (last.o, last.gate_up, last.down)),
    )


def roofline(
    weights: Footprint, one_token_ms: float, prefill_s: float, tokens: int, read_rate: float, chunk: int = PREFILL_CHUNK
) -> str:
    """Where a native model's passes stand against the machine: the rate a one-token pass of ``one_token_ms``
    reads its weights at, beside ``read_rate`` (GB/s), and the int8 multiply-adds per second of a
    ``tokens``-token prefill of ``prefill_s`` in chunks of ``chunk`` (each chunk's last layer past q|k|v and its
    head for its last token only, as :class:`decoder.runtime.native_pass.NativePass` computes them)."""
    rate = weights.weight_bytes / one_token_ms / 1e6
    chunks = -(-tokens // chunk)
    multiply_adds = (
        tokens * weights.multiply_adds
        - (tokens - chunks) * weights.last_layer_rest
        + chunks * weights.head_multiply_adds
    )
    return (
        f"a one-token pass reads {weights.weight_bytes / 1e6:.0f} MB of weights: {rate:.1f} GB/s at its best time, "
        f"{rate / read_rate:.2f}x this machine's streaming read in the same run ({read_rate:.1f} GB/s); the "
        f"{tokens}-token prefill's products {multiply_adds / prefill_s / 1e9:.0f} G int8 multiply-adds/s"
    )


def compare(model_spec: str, context_tokens: int, repeats: int, only: tuple[str, ...] = tuple(KINDS)) -> str:
    """Time the models' passes (interleaved, ``repeats`` rounds) after a ``context_tokens`` prefill: the table.

    ``model_spec`` may name several models, comma-separated (``embedded,embedded-1.5b``): their passes are
    interleaved too, so that their relative costs are compared under the same machine load."""
    models = {}
    lines = [kernel_line()]
    specs = [spec.strip() for spec in model_spec.split(",") if spec.strip()]
    for spec in specs:
        label = f" [{spec}]" if len(specs) > 1 else ""
        if "daemon" in only:  # GGUF weights where the model has them, its narrow passes as the daemon runs them
            daemon = models[KINDS["daemon"] + label] = load_model(spec, device="cpu").model
            lines.append(f"{KINDS['daemon'] + label}: {describe(settle_pairs(daemon))}")
        if "int4" in only:  # the same GGUF weights on ATen's int4 kernel instead of the native one
            models[KINDS["int4"] + label] = load_model(spec, device="cpu", native=False).model
        if "dense" in only:
            models[KINDS["dense"] + label] = load_model(spec, device="cpu", weights="dense").model
        if "transformers" in only:
            models[KINDS["transformers"] + label] = load_model(spec, weights="dense").model
            as_transformers_loads_it(models[KINDS["transformers"] + label])
    context = [100 + (i * 7919) % 20000 for i in range(context_tokens)]
    caches: dict[str, PrefixKV] = {}
    prefill_s: dict[str, float] = {}
    for name, model in models.items():
        caches[name] = PrefixKV()
        started = time.perf_counter()
        prefill(model, caches[name], context)
        prefill_s[name] = time.perf_counter() - started
        lines.append(f"{name}: {len(context)}-token prefill {prefill_s[name]:.2f} s")
    times: dict[str, dict[int, list[float]]] = {name: {n: [] for n in SIZES} for name in models}
    for _ in range(repeats):
        for n in SIZES:
            for name, model in models.items():
                times[name][n].append(timed_pass(model, caches[name], n))
    lines.append("| tokens in the pass | " + " | ".join(str(n) for n in SIZES) + " |")
    lines.append("|---" * (len(SIZES) + 1) + "|")
    for name in models:
        cells = [f"{min(times[name][n]):.0f} / {statistics.median(times[name][n]):.0f}" for n in SIZES]
        lines.append(f"| {name}: best / median ms | " + " | ".join(cells) + " |")
    for name in models:  # the cost table the draft policy starts from (decoder/policy.py)
        base = min(times[name][1])
        relative = ", ".join(f"({n}, {min(times[name][n]) / base:.2f})" for n in SIZES)
        lines.append(f"{name}: relative to one token: {relative}")
    read_rate = stream_read_rate()
    for name, model in models.items():
        weights = footprint(model)
        if weights is not None:
            lines.append(f"{name}: {roofline(weights, min(times[name][1]), prefill_s[name], len(context), read_rate)}")
    return "\n".join(lines)
