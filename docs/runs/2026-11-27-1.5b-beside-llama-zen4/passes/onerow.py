"""Scratch: where a one-token native pass of a model spends its time, by kernel call (median over passes)."""

import collections
import statistics
import sys
import time

from lookahead_lsp.decoder.forward import forward, prefill
from lookahead_lsp.decoder.kernels.woq_native import native_kernel
from lookahead_lsp.decoder.kv import PrefixKV
from lookahead_lsp.decoder.runtime.model import load_model

spec = sys.argv[1]
loaded = load_model(spec)
model = loaded.model
kernel = native_kernel()
kv = PrefixKV()
prefill(model, kv, [(i * 7919) % 150000 for i in range(500)])
times = collections.defaultdict(list)
orig = {}


def wrap(name):
    f = getattr(kernel, name)
    orig[name] = f

    def timed(*a, **k):
        t = time.perf_counter()
        r = f(*a, **k)
        dt = time.perf_counter() - t
        key = name
        if name == "linear":
            key = f"linear rows={a[1].rows} cols={a[1].cols}"
        times[key].append(dt)
        return r

    setattr(kernel, name, timed)


for n in ["linear", "attention", "residual_norm", "rope", "swiglu"]:
    wrap(n)
P = 30
totals = []
for i in range(P):
    t = time.perf_counter()
    forward(model, kv, [100 + i])
    kv.append([100 + i])
    totals.append(time.perf_counter() - t)
print(f"{spec}: pass median {statistics.median(totals) * 1000:.1f} ms, best {min(totals) * 1000:.1f}")
tot = 0
for k, v in sorted(times.items(), key=lambda kv: -sum(kv[1])):
    per_pass = sum(v) / P * 1000
    tot += per_pass
    median = statistics.median(v) * 1e3
    print(f"  {k:40s} calls/pass {len(v) // P:3d}  {per_pass:6.2f} ms/pass  median call {median:.3f} ms")
print(f"  sum of kernel calls {tot:.1f} ms/pass")
