"""Scratch: which op of the written-out step a CUDA graph replays wrongly (second try): each op captured alone
with a position of 1023, replayed at 600, against the op run eagerly at 600; then the whole step with the
position's ops written as one-hot arithmetic (no index ops), and its time."""
import sys
import time
import statistics
import torch
import torch.nn.functional as F
from transformers import AutoConfig, AutoModelForCausalLM, DynamicCache
import graph_step as gs

device = torch.device("cuda")
pos = torch.full((1,), 1023, dtype=torch.long, device=device)
table = torch.randn(1024, 64, device=device)
buf = torch.zeros(1, 2, 1024, 64, device=device)
row = torch.randn(1, 2, 1, 64, device=device)
lin = torch.nn.Linear(896, 1152, device=device)
xin = torch.randn(1, 896, device=device)
positions = torch.arange(1024, device=device)
ops = {
    "index_select": lambda: table.index_select(0, pos),
    "index_copy_": lambda: buf.index_copy_(2, pos, row).sum(dim=(0, 1, 3)),
    "mask": lambda: (positions <= pos).float(),
    "linear": lambda: lin(xin),
    "sdpa": lambda: F.scaled_dot_product_attention(torch.randn(1, 4, 1, 64, device=device, generator=None) * 0 + 1, buf, buf, attn_mask=(positions <= pos)[None, None, None], enable_gqa=True),
}
for name, op in ops.items():
    pos.fill_(1023)
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        op()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = op()
    pos.fill_(600)
    g.replay(); torch.cuda.synchronize()
    got = out.clone()
    want = op()
    print(name, "replayed at 600 against eager at 600:", float((got.float() - want.float()).abs().max()), flush=True)


class OneHotStep(gs.Step):
    """gs.Step with the position's reads and writes as one-hot arithmetic."""
    def __call__(self, token, position):
        x = self.inner.embed_tokens(token)
        hot = (self.positions == position).float()  # (L,)
        cos, sin = (hot @ self.cos)[None], (hot @ self.sin)[None]
        mask = (self.positions <= position)[None, None, None]
        keep = (1.0 - hot)[None, None, :, None]
        for i, layer in enumerate(self.inner.layers):
            attn = layer.self_attn
            h = layer.input_layernorm(x)
            q = gs.rotate(attn.q_proj(h).view(1, self.heads, 1, self.d), cos, sin)
            k = gs.rotate(attn.k_proj(h).view(1, self.kv_heads, 1, self.d), cos, sin)
            v = attn.v_proj(h).view(1, self.kv_heads, 1, self.d)
            self.keys[i].mul_(keep).add_(k * hot[None, None, :, None])
            self.values[i].mul_(keep).add_(v * hot[None, None, :, None])
            o = F.scaled_dot_product_attention(q, self.keys[i], self.values[i], attn_mask=mask, enable_gqa=True)
            x = x + attn.o_proj(o.reshape(1, self.heads * self.d))
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        return self.model.lm_head(self.inner.norm(x))[0]


for path in sys.argv[1:]:
    config = AutoConfig.from_pretrained(path)
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation="sdpa").eval()
    prompt = torch.tensor([[(i * 7919) % config.vocab_size for i in range(gs.PREFIX)]], device=device)
    with torch.inference_mode():
        cache = DynamicCache(config=config)
        model(input_ids=prompt, past_key_values=cache, use_cache=True)
        eager = gs.Step(model, cache)
        for name, step in (("index ops", gs.Step(model, cache)), ("one-hot", OneHotStep(model, cache))):
            graphed = gs.Graphed(step, device)
            eager_copy = gs.Step(model, cache)
            worst, times = 0.0, []
            for n in range(40):
                token = torch.tensor([(n * 31) % 1000], device=device)
                position = torch.tensor([gs.PREFIX + n], device=device)
                a = eager_copy(token, position)
                torch.cuda.synchronize()
                t = time.perf_counter()
                b = graphed(token, position)
                int(b.argmax())
                times.append(time.perf_counter() - t)
                worst = max(worst, float((a - b).abs().max()))
            print(path, name, "graph against eager, worst of 40 steps:", worst,
                  f"graph {statistics.median(times[4:]) * 1e3:.2f} ms a token", flush=True)
