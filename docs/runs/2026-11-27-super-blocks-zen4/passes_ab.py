"""Whole native passes on two kernel libraries, interleaved in one process, after a 512-token context: decoding
passes of 1, 4 and 8 rows (medians of 21) and 512-token prefills in two chunks of 256 (medians of 5). argv:
OLD_LIB NEW_LIB MODEL (libraries.py; embedded or embedded-1.5b), then optionally ROWS (the passes' rows, comma-separated:
1,4,8) and PREFILLS (the prefills timed of each library: 5)."""

import statistics
import sys
import time
from pathlib import Path

import torch

from lookahead_lsp.decoder.kernels.woq_native import WoqKernel
from lookahead_lsp.decoder.kv import PrefixKV
from lookahead_lsp.decoder.runtime.model import configure_torch_threads, load_model
from lookahead_lsp.decoder.runtime.native_pass import NativePass
from lookahead_lsp.decoder.runtime.row_attention import plan_keys

configure_torch_threads()
lm = load_model(sys.argv[3])
kernels = {"old": WoqKernel(Path(sys.argv[1])), "new": WoqKernel(Path(sys.argv[2]))}
passes = {k: NativePass(lm.model, kernel) for k, kernel in kernels.items()}
ids = lm.tokenizer(Path("decoder/lookahead.py").read_text())["input_ids"][:512]


def run(which: str, kv: PrefixKV, tokens: list[int], last_only: bool) -> None:
    past = kv.cache.get_seq_length()
    rows = list(range(past, past + len(tokens)))
    plan = plan_keys(kernels[which], past, rows, torch.tril(torch.ones(len(tokens), len(tokens), dtype=torch.bool)))
    with torch.inference_mode():
        passes[which](kv.cache, tokens, rows, plan, last_only)


def prefill(which: str) -> PrefixKV:
    kv = PrefixKV()
    for start in range(0, len(ids), 256):
        run(which, kv, ids[start : start + 256], True)
        kv.append(ids[start : start + 256])
    return kv


rows_timed = [int(n) for n in (sys.argv[4] if len(sys.argv) > 4 else "1,4,8").split(",")]
prefills = int(sys.argv[5]) if len(sys.argv) > 5 else 5
times: dict[str, list[float]] = {k: [] for k in passes}
for rep in range(prefills):
    for k in list(passes)[:: 1 if rep % 2 else -1]:
        started = time.perf_counter()
        prefill(k)
        times[k].append(time.perf_counter() - started)
old, new = statistics.median(times["old"]), statistics.median(times["new"])
print(f"{sys.argv[3]}: prefill of 512 tokens: old {old * 1e3:.0f} ms  new {new * 1e3:.0f} ms  -> {old / new:.3f}x")
context = prefill("new")
for n in rows_timed:
    times = {k: [] for k in passes}
    for rep in range(21):
        for k in list(passes)[:: 1 if rep % 2 else -1]:
            started = time.perf_counter()
            run(k, context, ids[-n:], False)
            times[k].append(time.perf_counter() - started)
            context.cache.crop(-n)
    old, new = statistics.median(times["old"]), statistics.median(times["new"])
    print(f"{sys.argv[3]}: a pass of {n} rows: old {old * 1e3:.2f} ms  new {new * 1e3:.2f} ms  -> {old / new:.3f}x")
