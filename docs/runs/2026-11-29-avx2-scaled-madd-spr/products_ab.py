"""Two builds of the native kernel (LIB_A, LIB_B) on K-quant products of the 1.5B's feed-forward shapes, alternated
call by call in one process: random Q4_K and Q5_K weights (8960 x 1536 as gate/up, 1536 x 8960 as down) against
ROWS rows of random activations; medians and minimums, and whether both give the same bits.

Usage: python products_ab.py LIB_A LIB_B ROUNDS ROWS [KINDS]   (KINDS: comma-separated, default Q4_K,Q5_K; the two
libraries of one level: ../2026-11-27-super-blocks-zen4/libraries.py REV LEVEL prints them)."""

import statistics
import sys
import time
from pathlib import Path

import torch

from lookahead_lsp.decoder.kernels.woq_layout import woq_state
from lookahead_lsp.decoder.kernels.woq_native import WoqKernel, k_quant_groups
from lookahead_lsp.decoder.runtime.woq_layer import WoqLinear

kernels = {"A": WoqKernel(Path(sys.argv[1])), "B": WoqKernel(Path(sys.argv[2]))}
rounds, rows = int(sys.argv[3]), int(sys.argv[4])
kinds = sys.argv[5].split(",") if len(sys.argv) > 5 else ["Q4_K", "Q5_K"]
print(f"builds: {', '.join(k.isa for k in kernels.values())}; {torch.get_num_threads()} threads")
for kind in kinds:
    for out_features, in_features in [(8960, 1536), (1536, 8960)]:
        state = woq_state(k_quant_groups(out_features, in_features, seed=1, type_name=kind))
        x = torch.randn(rows, in_features, generator=torch.Generator().manual_seed(0))
        layers = {name: WoqLinear(kernel, state, None) for name, kernel in kernels.items()}
        outputs = {name: layer(x) for name, layer in layers.items()}
        times: dict[str, list[float]] = {name: [] for name in layers}
        for r in range(rounds):
            for name in ("A", "B") if r % 2 == 0 else ("B", "A"):
                started = time.perf_counter()
                layers[name](x)
                times[name].append(time.perf_counter() - started)
        a, b = (statistics.median(times[name]) for name in ("A", "B"))
        print(
            f"{kind} {out_features}x{in_features}, {rows} rows: A {a * 1e3:.2f} B {b * 1e3:.2f} ms (medians; minimums "
            f"{min(times['A']) * 1e3:.2f}, {min(times['B']) * 1e3:.2f}): B {a / b:.3f}x; "
            f"same bits: {torch.equal(outputs['A'], outputs['B'])}",
            flush=True,
        )
