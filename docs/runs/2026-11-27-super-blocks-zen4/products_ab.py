"""The 1.5B model's matrix products (every layer's q|k|v, o, gate|up, down) at 1, 8 and 256 rows on two kernel
libraries, interleaved in one process, medians of 5. argv: OLD_LIB NEW_LIB (libraries.py)."""

import statistics
import sys
import time
from pathlib import Path

import torch

from lookahead_lsp.decoder.kernels.woq_native import WoqKernel, native_kernel
from lookahead_lsp.decoder.runtime.model import configure_torch_threads, load_model
from lookahead_lsp.decoder.runtime.native_pass import native_pass

configure_torch_threads()
libs = {"old": WoqKernel(Path(sys.argv[1])), "new": WoqKernel(Path(sys.argv[2]))}
native = native_pass(load_model("embedded-1.5b").model, native_kernel())
assert native is not None
layers = native.layers
products = {"qkv": [l.qkv for l in layers], "o": [l.o for l in layers], "gate_up": [l.gate_up for l in layers],
            "down": [l.down for l in layers]}
torch.manual_seed(0)
for rows in (1, 8, 256):
    for name, prods in products.items():
        xs = [torch.randn(rows, p.cols) for p in prods]
        times = {k: [] for k in libs}
        for rep in range(5):
            for k, kernel in list(libs.items())[:: 1 if rep % 2 else -1]:
                started = time.perf_counter()
                for x, p in zip(xs, prods, strict=True):
                    kernel.linear(x, p)
                times[k].append(time.perf_counter() - started)
        old, new = statistics.median(times["old"]), statistics.median(times["new"])
        print(f"rows={rows:3d} {name:8s} old {old * 1e3:7.2f} ms  new {new * 1e3:7.2f} ms  new/old speed {old / new:.3f}x",
              flush=True)
