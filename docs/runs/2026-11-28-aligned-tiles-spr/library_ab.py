"""Two builds of the native kernel, A and B (library paths), on the same work in one process, alternated:
a prefill chunk's K-quant products (random Q4_K and Q5_K weights of the 1.5B's shapes, 256 rows, 15 rounds), then,
with a model, its 512-token prefill (ROUNDS rounds) on each build's native pass; medians, and whether the outputs
are the same bits.

Usage: python library_ab.py LIB_A LIB_B [MODEL ROUNDS]   ($SDIST: the folder holding the extracted sdists; the
prompt is the start of <sdist>/rich-15.0.0/rich/console.py)"""

import os
import statistics
import sys
import time
from pathlib import Path

import torch

from lookahead_lsp.decoder.forward import prefill
from lookahead_lsp.decoder.kernels.woq_layout import woq_state
from lookahead_lsp.decoder.kernels.woq_native import WoqKernel, k_quant_groups
from lookahead_lsp.decoder.kv import PrefixKV
from lookahead_lsp.decoder.runtime import native_pass
from lookahead_lsp.decoder.runtime.woq_layer import WoqLinear

kernels = {"A": WoqKernel(Path(sys.argv[1])), "B": WoqKernel(Path(sys.argv[2]))}
print(f"A: {Path(sys.argv[1]).name} ({kernels['A'].isa}), B: {Path(sys.argv[2]).name} ({kernels['B'].isa})")


def report(what: str, times: dict[str, list[float]], same: bool) -> None:
    a, b = statistics.median(times["A"]), statistics.median(times["B"])
    count = len(times["A"])
    print(f"{what}: A {a * 1e3:.1f} ms, B {b * 1e3:.1f} ms (medians of {count}): B {a / b:.2f}x; same bits {same}")


for rows, cols, kind in [(8960, 1536, "Q4_K"), (1536, 8960, "Q4_K"), (1536, 1536, "Q4_K"), (1536, 1536, "Q5_K")]:
    state = woq_state(k_quant_groups(rows, cols, seed=1, type_name=kind))
    x = torch.randn(256, cols, generator=torch.Generator().manual_seed(0))
    layers = {name: WoqLinear(kernel, state, None) for name, kernel in kernels.items()}
    outputs = {name: layer(x) for name, layer in layers.items()}
    times: dict[str, list[float]] = {name: [] for name in layers}
    for _ in range(15):
        for name, layer in layers.items():
            started = time.perf_counter()
            layer(x)
            times[name].append(time.perf_counter() - started)
    report(f"{kind} {rows}x{cols}, 256 rows", times, torch.equal(outputs["A"], outputs["B"]))

if len(sys.argv) > 3:
    from lookahead_lsp.decoder.runtime.model import load_model

    loaded = load_model(sys.argv[3])
    model, rounds = loaded.model, int(sys.argv[4])
    passes = {name: native_pass.NativePass(model, kernel) for name, kernel in kernels.items()}
    ids = loaded.tokenizer(Path(os.environ["SDIST"], "rich-15.0.0/rich/console.py").read_text())["input_ids"][:512]
    times = {name: [] for name in passes}
    logits = {}
    for i in range(rounds):
        for name in ("A", "B") if i % 2 == 0 else ("B", "A"):
            native_pass._PASSES[model] = passes[name]  # the model's native pass on this build
            started = time.perf_counter()
            logits[name] = prefill(model, PrefixKV(), ids)
            times[name].append(time.perf_counter() - started)
    report(f"{sys.argv[3]} prefill, {len(ids)} tokens", times, torch.equal(logits["A"], logits["B"]))
