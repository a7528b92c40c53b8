"""Scratch A/B: decoding passes of 1, 2, 4, 8, 12, 16 tokens (or the widths in $KS, comma-separated) after a
512-token prefill on kernel builds given as name=path (argv[2:]), interleaved in one process, median of 30."""
import os, statistics, sys, time
from pathlib import Path
import torch
from lookahead_lsp.decoder.forward import prefill, masked_pass
from lookahead_lsp.decoder.kv import PrefixKV
from lookahead_lsp.decoder.kernels.woq_native import WoqKernel, native_kernel
from lookahead_lsp.decoder.runtime.model import configure_torch_threads, load_model
from lookahead_lsp.decoder.runtime.native_pass import native_pass
configure_torch_threads()
kernels = {a.split("=")[0]: WoqKernel(Path(a.split("=")[1])) for a in sys.argv[2:]}
names = list(kernels)
for spec in sys.argv[1].split(","):
    lm = load_model(spec)
    native = native_pass(lm.model, native_kernel())
    ids = lm.tokenizer(open("./decoder/lookahead.py").read())["input_ids"][:512]
    kv = PrefixKV(); prefill(lm.model, kv, ids)
    for k in [int(width) for width in os.environ.get("KS", "1,2,4,8,12,16").split(",")]:
        times = {n: [] for n in names}
        for rep in range(30):
            for n in (names if rep % 2 else names[::-1]):
                native.kernel = kernels[n]
                t = time.perf_counter(); masked_pass(lm.model, kv, k); times[n].append(time.perf_counter() - t)
        base = statistics.median(times[names[0]])
        print(f"{spec} k={k}: " + ", ".join(f"{n} {statistics.median(times[n]) * 1e3:.2f} ms ({base / statistics.median(times[n]):.3f}x)" for n in names), flush=True)
