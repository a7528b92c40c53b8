import sys, time
from lookahead_lsp.decoder.runtime.model import load_model
from lookahead_lsp.decoder.forward import timing_cache, masked_pass
m = load_model("embedded-1.5b").model
kvs = {ctx: timing_cache(m, ctx) for ctx in (64, 512, 1024)}
best = {}
for _ in range(8):
    for ctx, kv in kvs.items():
        for n in (1, 4):
            t = time.perf_counter(); masked_pass(m, kv, n); best[ctx, n] = min(best.get((ctx, n), 9), time.perf_counter() - t)
print({k: round(v*1e3, 1) for k, v in best.items()}, flush=True)
