import statistics, time, torch
from lookahead_lsp.decoder.kernels.woq_native import native_kernel
from lookahead_lsp.decoder.runtime.model import configure_torch_threads, load_model
from lookahead_lsp.decoder.runtime.native_pass import native_pass
from lookahead_lsp.decoder.forward import prefill, masked_pass
from lookahead_lsp.decoder.kv import PrefixKV
configure_torch_threads()
k = native_kernel(); lm = load_model("embedded-1.5b"); native = native_pass(lm.model, k)
total = 0.0
for name in ("qkv", "o", "gate_up", "down"):
    prods = [getattr(l, name) for l in native.layers]
    x = torch.randn(1, prods[0].cols)
    ts = []
    for rep in range(7):
        t = time.perf_counter()
        for p in prods: k.linear(x, p)
        ts.append(time.perf_counter() - t)
    mb = sum(p.nbytes for p in prods) / 1e6
    print(f"{name}: all layers {min(ts)*1e3:.2f} ms, {mb:.0f} MB, {mb/min(ts)/1e3:.1f} GB/s"); total += min(ts)
x = torch.randn(1, native.head.cols); ts = []
for rep in range(7):
    t = time.perf_counter(); k.linear(x, native.head); ts.append(time.perf_counter() - t)
print(f"head: {min(ts)*1e3:.2f} ms, {native.head.nbytes/1e6:.0f} MB, {native.head.nbytes/min(ts)/1e9:.1f} GB/s"); total += min(ts)
print(f"products alone: {total*1e3:.2f} ms")
ids = lm.tokenizer(open("./decoder/lookahead.py").read())["input_ids"][:512]
kv = PrefixKV(); prefill(lm.model, kv, ids)
ts = []
for _ in range(20):
    t = time.perf_counter(); masked_pass(lm.model, kv, 1); ts.append(time.perf_counter() - t)
print(f"one-token pass: best {min(ts)*1e3:.2f} median {statistics.median(ts)*1e3:.2f} ms")
