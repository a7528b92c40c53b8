"""A prefill chunk's K-quant products at the `avx512` level (vpdpbusd) against `avx512-amx` (tile products), both
built from this checkout's kernel source, in one process: random Q4_K and Q5_K weights of the 1.5B's shapes
(gate/up 8960x1536, down 1536x8960, q/o 1536x1536), 256 rows of activations, 12 rounds alternating the levels;
min and median milliseconds, and whether the outputs are the same bits.

Usage: python product_ab.py [THREADS]   (default: torch's thread count)"""

import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from lookahead_lsp.decoder.kernels.woq_layout import woq_state
from lookahead_lsp.decoder.kernels.woq_native import WoqKernel, build, compiler, k_quant_groups
from lookahead_lsp.decoder.runtime.woq_layer import WoqLinear

if len(sys.argv) > 1:
    torch.set_num_threads(int(sys.argv[1]))
root = Path(tempfile.mkdtemp())
kernels = {level: WoqKernel(build(root, compiler(), level)) for level in ("avx512", "avx512-amx")}
print(f"threads {torch.get_num_threads()}; builds: {', '.join(k.isa for k in kernels.values())}")
for rows, cols, kind in [(8960, 1536, "Q4_K"), (1536, 8960, "Q4_K"), (1536, 1536, "Q4_K"), (1536, 1536, "Q5_K")]:
    state = woq_state(k_quant_groups(rows, cols, seed=1, type_name=kind))
    x = torch.randn(256, cols, generator=torch.Generator().manual_seed(0))
    layers = {level: WoqLinear(kernel, state, None) for level, kernel in kernels.items()}
    outputs = {level: layer(x) for level, layer in layers.items()}
    times: dict[str, list[float]] = {level: [] for level in layers}
    for _ in range(12):
        for level, layer in layers.items():
            started = time.perf_counter()
            layer(x)
            times[level].append(time.perf_counter() - started)
    medians = {level: statistics.median(t) for level, t in times.items()}
    print(
        f"{kind} {rows}x{cols}, 256 rows: "
        + ", ".join(f"{lv} min {min(t) * 1e3:.1f} median {medians[lv] * 1e3:.1f} ms" for lv, t in times.items())
        + f"; avx512-amx {medians['avx512'] / medians['avx512-amx']:.2f}x faster (medians)"
        + f"; same bits: {torch.equal(outputs['avx512'], outputs['avx512-amx'])}",
        flush=True,
    )
