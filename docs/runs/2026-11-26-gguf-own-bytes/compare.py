"""The weights one decoding pass reads, and the time of its matrix products, with the kernel as it was before
Q6_K got its own layout and K-quants their compact heads (the kernel and tiling of commit 0ad1399, built from git)
and as it is now: every matrix of a GGUF (decoder layers and head), the old and the new kernel in one process,
products interleaved matrix by matrix, round by round.

Usage: python compare.py GGUF OLD_KERNEL.so OLD_WOQ_LAYOUT.py [ROUNDS]  (run.sh makes the old files)."""

from __future__ import annotations

import importlib.util
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import torch

from lookahead_lsp.decoder.kernels.woq_layout import SIX_BIT_LAYOUT, WoqProduct, WoqWeight, groups_from_state
from lookahead_lsp.decoder.kernels.woq_native import WoqKernel, built_kernel
from lookahead_lsp.decoder.runtime.packed_linear import requantize
from lookahead_lsp.decoder.runtime.packed_model import pack_gguf

gguf, old_library, old_layout_file = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 7
spec = importlib.util.spec_from_file_location("woq_layout_before", old_layout_file)
assert spec is not None and spec.loader is not None
old_layout = sys.modules["woq_layout_before"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(old_layout)
new_kernel, old_kernel = built_kernel(), WoqKernel(old_library)
assert new_kernel is not None
print(f"kernels: now {new_kernel.library.name} ({new_kernel.isa}), before {old_library.name} ({old_kernel.isa})")
print(f"threads: {torch.get_num_threads()}")

state = pack_gguf(gguf)
names = sorted({key.rsplit(".woq.", 1)[0] for key in state if ".woq." in key})
pairs = []  # (name, kind, new weight, old weight)
for name in names:
    parts = {key.rsplit(".", 1)[1]: value for key, value in state.items() if key.startswith(f"{name}.woq.")}
    new = WoqWeight.of(parts)
    if int(parts["layout"]) == SIX_BIT_LAYOUT:  # what pack_gguf made of Q6_K before: 8-bit groups fitted to it
        six = groups_from_state(parts)
        old = old_layout.WoqWeight.of(old_layout.woq_state(requantize(torch.from_numpy(six.dequantize()))))
        kind = "Q6_K"
    else:
        old = old_layout.WoqWeight.of(parts)
        kind = {3: "Q4_K/Q5_K"}.get(new.mode, f"layout {new.layout}")
    pairs.append((name, kind, new, old))

bytes_by_kind: Counter[str] = Counter()
old_bytes_by_kind: Counter[str] = Counter()
for _, kind, new, old in pairs:
    bytes_by_kind[kind] += new.tiles.numel()
    old_bytes_by_kind[kind] += old.tiles.numel()
print(f"GGUF file: {gguf.stat().st_size / 1e6:.1f} MB")
for kind in sorted(bytes_by_kind):
    print(f"  {kind}: before {old_bytes_by_kind[kind] / 1e6:.1f} MB, now {bytes_by_kind[kind] / 1e6:.1f} MB a pass")
total_old, total_new = sum(old_bytes_by_kind.values()), sum(bytes_by_kind.values())
print(f"weights read a pass (every matrix, head included): before {total_old / 1e6:.1f} MB, now {total_new / 1e6:.1f} MB "
      f"({total_new / total_old:.3f}x)")

for rows in (1, 8):
    inputs = {width: torch.randn(rows, width) for width in {new.groups * 32 for _, _, new, _ in pairs}}
    products = [(WoqProduct.of([(new, None)]), WoqProduct.of([(old, None)]), kind) for _, kind, new, old in pairs]
    times: dict[str, list[float]] = {"now": [], "before": []}
    by_kind: dict[tuple[str, str], list[float]] = {}
    for _ in range(rounds):
        totals = {"now": 0.0, "before": 0.0}
        kind_totals: Counter[tuple[str, str]] = Counter()
        for new_product, old_product, kind in products:
            x = inputs[new_product.cols]
            for label, kernel, product in (("before", old_kernel, old_product), ("now", new_kernel, new_product)):
                started = time.perf_counter()
                kernel.linear(x, product)
                spent = (time.perf_counter() - started) * 1000
                totals[label] += spent
                kind_totals[(label, kind)] += spent
        for label in totals:
            times[label].append(totals[label])
        for key, spent in kind_totals.items():
            by_kind.setdefault(key, []).append(spent)
    best = {label: min(values) for label, values in times.items()}
    median = {label: statistics.median(values) for label, values in times.items()}
    print(f"{rows} row(s), every matrix of a pass: before best {best['before']:.1f} / median {median['before']:.1f} ms, "
          f"now best {best['now']:.1f} / median {median['now']:.1f} ms; now/before best {best['now'] / best['before']:.3f}, "
          f"median {median['now'] / median['before']:.3f}")
    for kind in sorted(bytes_by_kind):
        b, n = min(by_kind[("before", kind)]), min(by_kind[("now", kind)])
        print(f"  {kind}: before best {b:.2f} ms, now {n:.2f} ms ({n / b:.3f}x)")
