"""Scratch A/B in one process: a pass by the per-step calls (the loop of 5dc48b1) against the one-call layers,
interleaved, on the same model and kernel library; medians over many passes of 1, 2, 4 and 8 tokens after a
512-token prefill, and of that prefill (two chunks of 256 tokens) itself."""
import statistics, sys, time
import torch
from lookahead_lsp.decoder.forward import prefill, masked_pass
from lookahead_lsp.decoder.kv import PrefixKV
from lookahead_lsp.decoder.runtime.model import configure_torch_threads, load_model
from lookahead_lsp.decoder.runtime.native_pass import NativePass

def steps_call(self, cache, tokens, positions, plan, last_only=False, between_layers=None):
    kernel, n, d = self.kernel, len(tokens), self.head_dim
    q_width, kv_width = self.heads * d, self.kv_heads * d
    ids = torch.tensor([list(tokens)], dtype=torch.long)
    residual = self.embed(ids)[0].float().clone()
    cos, sin = self.rotary(residual, torch.tensor([list(positions)], dtype=torch.long))
    cos, sin = cos[0].float().contiguous(), sin[0].float().contiguous()
    keys = (plan.prefix, plan.start, plan.extra)
    x = torch.empty_like(residual)
    kernel.residual_norm(residual, None, self.layers[0].input_norm, self.eps, x)
    for i, layer in enumerate(self.layers):
        if between_layers is not None:
            between_layers()
        qkv = kernel.linear(x, layer.qkv)
        kernel.rope(qkv, self.heads + self.kv_heads, d, cos, sin)
        k = qkv[:, q_width : q_width + kv_width].view(n, self.kv_heads, d).transpose(0, 1)
        v = qkv[:, q_width + kv_width :].view(n, self.kv_heads, d).transpose(0, 1)
        all_k, all_v = cache.update(k[None], v[None], i)
        attended = kernel.attention(qkv[:, :q_width].view(n, self.heads, d), all_k[0], all_v[0], keys, self.scale)
        o = kernel.linear(attended.view(n, q_width), layer.o)
        kernel.residual_norm(residual, o, layer.post_norm, self.eps, x)
        down = kernel.linear(kernel.swiglu(kernel.linear(x, layer.gate_up)), layer.down)
        after = self.layers[i + 1].input_norm if i + 1 < len(self.layers) else self.final_norm
        kernel.residual_norm(residual, down, after, self.eps, x)
    return kernel.linear(x[-1:] if last_only else x, self.head)

layer_call = NativePass.__call__
configure_torch_threads()
for spec in sys.argv[1].split(","):
    lm = load_model(spec)
    ids = lm.tokenizer(open("/work/main/decoder/lookahead.py").read())["input_ids"][:512]
    kv = PrefixKV(); prefill(lm.model, kv, ids)
    for k in (1, 2, 4, 8):
        times = {"steps": [], "layer": []}
        for rep in range(40):
            for name, fn in ((("steps", steps_call), ("layer", layer_call)) if rep % 2 else (("layer", layer_call), ("steps", steps_call))):
                NativePass.__call__ = fn
                t = time.perf_counter(); masked_pass(lm.model, kv, k); times[name].append(time.perf_counter() - t)
        s, l = statistics.median(times["steps"]) * 1e3, statistics.median(times["layer"]) * 1e3
        print(f"{spec} k={k}: per-step calls {s:.2f} ms, one call a layer {l:.2f} ms, speed {s / l:.3f}x")
    times = {"steps": [], "layer": []}
    for rep in range(6):
        for name, fn in ((("steps", steps_call), ("layer", layer_call)) if rep % 2 else (("layer", layer_call), ("steps", steps_call))):
            NativePass.__call__ = fn
            t = time.perf_counter(); prefill(lm.model, PrefixKV(), ids); times[name].append(time.perf_counter() - t)
    s, l = statistics.median(times["steps"]) * 1e3, statistics.median(times["layer"]) * 1e3
    print(f"{spec} prefill of {len(ids)} tokens: per-step calls {s:.0f} ms, one call a layer {l:.0f} ms, speed {s / l:.3f}x")
    NativePass.__call__ = layer_call
