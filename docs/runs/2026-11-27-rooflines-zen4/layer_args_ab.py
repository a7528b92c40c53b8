import statistics, time, sys, torch, ctypes
from lookahead_lsp.decoder.kernels.woq_native import native_kernel, _threads
from lookahead_lsp.decoder.runtime.model import configure_torch_threads, load_model
from lookahead_lsp.decoder.runtime.native_pass import native_pass
from lookahead_lsp.decoder.runtime.row_attention import plan_keys
from lookahead_lsp.decoder.forward import prefill
from lookahead_lsp.decoder.kv import PrefixKV
configure_torch_threads()
k = native_kernel(); lm = load_model(sys.argv[1]); native = native_pass(lm.model, k)
ids = lm.tokenizer(open("./decoder/lookahead.py").read())["input_ids"][:512]
kv = PrefixKV(); prefill(lm.model, kv, ids)
cache = kv.cache
refs = [ctypes.byref(w) for w in native.weights]
def run(fast):
    past = cache.get_seq_length(); rows = [past]; tokens = [30]
    plan = plan_keys(k, past, rows, None)
    with torch.inference_mode():
        residual = native.embed(torch.tensor([tokens]))[0].float().clone()
        cos, sin = native.rotary(residual, torch.tensor([rows], dtype=torch.long))
        rotary = (cos[0].float().contiguous(), sin[0].float().contiguous())
        x = torch.empty_like(residual)
        k.residual_norm(residual, None, native.layers[0].input_norm, native.eps, x)
        room = torch.empty(1, native.kv_heads, 1, native.head_dim)
        scratch = torch.empty(k.scratch_floats(native.weights[0], 1))
        keys = (plan.prefix, plan.start, plan.extra)
        if fast:
            const = (residual.data_ptr(), x.data_ptr(), 1, rotary[0].data_ptr(), rotary[1].data_ptr())
            tail = (plan.prefix.data_ptr(), plan.start.data_ptr(), plan.extra.data_ptr(), scratch.data_ptr(), scratch.numel(), 0, _threads())  # 0: kv_only (since 98a0b76)
            for i, ref in enumerate(refs):
                all_k, all_v = cache.make_room(i, room)
                kk, vv = all_k[0], all_v[0]
                k._layer(ref, *const, kk.data_ptr(), kk.stride(0), kk.stride(1), vv.data_ptr(), vv.stride(0), vv.stride(1), kk.shape[1] - 1, *tail)
        else:
            for i, w in enumerate(native.weights):
                all_k, all_v = cache.make_room(i, room)
                k.layer(w, residual, x, rotary, (all_k[0], all_v[0]), keys, scratch)
        out = k.linear(x[-1:], native.head)
        out[-1, 0].item()
    cache.crop(-1)
T = {True: [], False: []}
for rep in range(80):
    for fast in ((True, False) if rep % 2 else (False, True)):
        t = time.perf_counter(); run(fast); T[fast].append(time.perf_counter() - t)
s, f = statistics.median(T[False]) * 1e3, statistics.median(T[True]) * 1e3
print(f"{sys.argv[1]}: wrapper {s:.3f} ms, direct {f:.3f} ms, saved {s - f:.3f} ms")
