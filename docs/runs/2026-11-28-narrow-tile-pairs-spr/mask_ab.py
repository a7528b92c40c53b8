"""The model's passes of 1 to 4 tokens with AVX-512's two-tile loop off and on (the kernel's mask, which
decoder/tile_pairs.py chooses), alternated pass by pass after one 400-token prefill: medians, bests, and whether
both give the same logits.

Usage: python mask_ab.py MODEL [PASSES]   ($SDIST: the folder holding the extracted sdists; the prompt is the start
of <sdist>/rich-15.0.0/rich/console.py). The level is the machine's, or $LOOKAHEAD_LSP_NATIVE_ISA's."""

import os
import statistics
import sys
import time
from pathlib import Path

import torch

from lookahead_lsp.decoder.forward import forward, prefill
from lookahead_lsp.decoder.kernels.woq_native import native_kernel
from lookahead_lsp.decoder.kv import PrefixKV
from lookahead_lsp.decoder.runtime.model import load_model

spec = sys.argv[1]
count = int(sys.argv[2]) if len(sys.argv) > 2 else 40
loaded = load_model(spec)
kernel = native_kernel()
assert kernel is not None and kernel.pair_rows() is not None, "needs the native kernel at an AVX-512 level"
print(f"{kernel.isa} ({kernel.library.name})")
ids = loaded.tokenizer(Path(os.environ["SDIST"], "rich-15.0.0/rich/console.py").read_text())["input_ids"]
kv = PrefixKV()
prefill(loaded.model, kv, ids[:400])
for rows in (1, 2, 3, 4):
    follow = ids[400 : 400 + rows]
    times: dict[bool, list[float]] = {False: [], True: []}
    logits = {}
    for i in range(count):
        for paired in (False, True) if i % 2 == 0 else (True, False):
            kernel.pair_rows(15 if paired else 0)
            started = time.perf_counter()
            logits[paired] = forward(loaded.model, kv, follow)
            times[paired].append(time.perf_counter() - started)
            kv.append(follow)
            kv.truncate(400)
    off, on = statistics.median(times[False]), statistics.median(times[True])
    print(
        f"{spec}, {rows}-token passes: one tile at a time {off * 1e3:.1f} ms, two {on * 1e3:.1f} ms (medians of "
        f"{count}; bests {min(times[False]) * 1e3:.1f} / {min(times[True]) * 1e3:.1f}): two by two {off / on:.3f}x; "
        f"same logits {torch.equal(logits[False], logits[True])}"
    )
kernel.pair_rows(0)
