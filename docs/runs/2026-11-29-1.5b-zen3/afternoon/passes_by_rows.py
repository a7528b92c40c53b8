"""Full forward-pass time by rows (masked, as lookahead's), best of R, interleaved sizes."""
import sys, time
from lookahead_lsp.decoder.runtime.model import load_model
from lookahead_lsp.decoder.forward import timing_cache, masked_pass
from lookahead_lsp.decoder.kernels.woq_native import native_kernel
spec, R = sys.argv[1], int(sys.argv[2])
sizes = [int(s) for s in sys.argv[3].split(",")]
m = load_model(spec).model
k = native_kernel()
kv = timing_cache(m, 256)
best = {n: 1e9 for n in sizes}
for _ in range(R):
    for n in sizes:
        t = time.perf_counter(); masked_pass(m, kv, n); best[n] = min(best[n], time.perf_counter() - t)
print(sys.argv[4] if len(sys.argv) > 4 else "", " ".join(f"{n}:{best[n]*1e3:.1f}" for n in sizes), " ratio8/1 %.2f" % (best.get(8, 0) / best[1]), flush=True)
