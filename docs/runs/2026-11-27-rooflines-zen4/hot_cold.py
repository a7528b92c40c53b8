import statistics, time, torch
from lookahead_lsp.decoder.kernels.woq_native import native_kernel
from lookahead_lsp.decoder.runtime.model import configure_torch_threads, load_model
from lookahead_lsp.decoder.runtime.native_pass import native_pass
configure_torch_threads()
k = native_kernel(); native = native_pass(load_model("embedded-1.5b").model, k)
for name in ("o", "gate_up", "down"):
    prods = [getattr(l, name) for l in native.layers]
    for rows in (1, 4, 8, 16, 64):
        x = torch.randn(rows, prods[0].cols)
        for p in prods: k.linear(x, p)
        cold, hot = [], []
        for rep in range(5):
            t = time.perf_counter()
            for p in prods: k.linear(x, p)
            cold.append((time.perf_counter() - t) / len(prods))
            t = time.perf_counter()
            for _ in prods: k.linear(x, prods[0])
            hot.append((time.perf_counter() - t) / len(prods))
        c, h = min(cold) * 1e3, min(hot) * 1e3
        mb = prods[0].nbytes / 1e6
        print(f"{name} ({mb:.1f} MB) rows {rows:3d}: from memory {c:.3f} ms ({mb/c:.1f} GB/s), same product again {h:.3f} ms, {c/h:.2f}x; per row {c/rows:.3f} / {h/rows:.3f}", flush=True)
