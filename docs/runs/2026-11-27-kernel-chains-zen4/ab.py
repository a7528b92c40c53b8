"""Scratch A/B: the 1.5B's real products on two kernel builds (argv[2]: the old library; the new one is built from the
working tree), 1 and 8 rows (or the rows given as argv[3], comma-separated), interleaved, median of 7; asserts the
two give the same bits."""

import statistics
import sys
import time
from pathlib import Path

import torch

from lookahead_lsp.decoder.kernels.woq_native import WoqKernel, build, compiler, native_kernel
from lookahead_lsp.decoder.runtime.model import load_model
from lookahead_lsp.decoder.runtime.native_pass import native_pass

level = sys.argv[1]
old = WoqKernel(Path(sys.argv[2]))
new = WoqKernel(build(Path("/tmp/ab/new-" + level), compiler() or "g++", level))
native = native_pass(load_model("embedded-1.5b").model, native_kernel())
assert native is not None
layers = native.layers
products = {
    "qkv": [layer.qkv for layer in layers],
    "o": [layer.o for layer in layers],
    "gate_up": [layer.gate_up for layer in layers],
    "down": [layer.down for layer in layers],
    "head": [native.head],
}
torch.manual_seed(0)
for rows in [int(r) for r in (sys.argv[3] if len(sys.argv) > 3 else "1,8").split(",")]:
    for name, prods in products.items():
        xs = [torch.randn(rows, product.cols) for product in prods]
        for x, product in zip(xs[:2], prods[:2], strict=True):
            assert torch.equal(old.linear(x, product), new.linear(x, product)), (name, rows)
        times: dict[str, list[float]] = {"old": [], "new": []}
        for rep in range(7):
            for which, kernel in (("old", old), ("new", new)) if rep % 2 else (("new", new), ("old", old)):
                started = time.perf_counter()
                for x, product in zip(xs, prods, strict=True):
                    kernel.linear(x, product)
                times[which].append(time.perf_counter() - started)
        o, n = statistics.median(times["old"]), statistics.median(times["new"])
        print(f"rows={rows} {name:8s} old {o * 1e3:7.2f} ms new {n * 1e3:7.2f} ms  new/old speed {o / n:.3f}x")
