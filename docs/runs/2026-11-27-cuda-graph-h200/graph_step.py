"""Scratch: how much a CUDA graph would take off a one-token decoding pass on a GPU, where the pass is bound by the
host (about 1,100 kernel launches a pass of the 0.5B, 3.9 of 14-17 ms on the GPU: docs/benchmarks.md).

Random weights of each model's config (timings and agreement only), float32, a 600-token prefill, then 64 greedy
steps three ways:
- `transformers`: transformers' forward with its DynamicCache, as the daemon's GPU path runs a step today;
- `written out`: the same step in plain torch ops over static key/value buffers (gpt-fast's shape: the position a
  tensor on the device, the mask computed from it), run eagerly;
- `graph`: that step captured once in a CUDA graph and replayed.
Each step's time includes reading the chosen token back to the host, as the decoder does. Then the written-out step
and the graph replay the tokens transformers chose, and the logits are compared with transformers'.

    python3 graph_step.py <config.json> [...] [--device cuda]
"""

import statistics
import sys
import time

import torch
import torch.nn.functional as F
from transformers import AutoConfig, AutoModelForCausalLM, DynamicCache

PREFIX, STEPS, MAX_LEN = 600, 64, 1024


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


class Step:
    """One token through a transformers Qwen2 model's own modules, over static key/value buffers."""

    def __init__(self, model: torch.nn.Module, cache: DynamicCache) -> None:
        config, inner = model.config, model.model
        self.model, self.inner = model, inner
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.d = config.hidden_size // self.heads
        device = inner.embed_tokens.weight.device
        self.keys = [torch.zeros(1, self.kv_heads, MAX_LEN, self.d, device=device) for _ in inner.layers]
        self.values = [torch.zeros_like(k) for k in self.keys]
        for i, layer in enumerate(cache.layers):
            n = layer.keys.shape[2]
            self.keys[i][:, :, :n] = layer.keys
            self.values[i][:, :, :n] = layer.values
        positions = torch.arange(MAX_LEN, device=device)
        cos, sin = inner.rotary_emb(self.keys[0], positions[None])
        self.cos, self.sin, self.positions = cos[0], sin[0], positions

    def __call__(self, token: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        x = self.inner.embed_tokens(token)  # (1, hidden)
        cos, sin = self.cos.index_select(0, position), self.sin.index_select(0, position)
        mask = (self.positions <= position)[None, None, None]
        for i, layer in enumerate(self.inner.layers):
            attn = layer.self_attn
            h = layer.input_layernorm(x)
            q = rotate(attn.q_proj(h).view(1, self.heads, 1, self.d), cos, sin)
            k = rotate(attn.k_proj(h).view(1, self.kv_heads, 1, self.d), cos, sin)
            v = attn.v_proj(h).view(1, self.kv_heads, 1, self.d)
            self.keys[i].index_copy_(2, position, k)
            self.values[i].index_copy_(2, position, v)
            o = F.scaled_dot_product_attention(q, self.keys[i], self.values[i], attn_mask=mask, enable_gqa=True)
            x = x + attn.o_proj(o.reshape(1, self.heads * self.d))
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        return self.model.lm_head(self.inner.norm(x))[0]


class Graphed:
    """A :class:`Step` captured once in a CUDA graph; the token and position are copied into its inputs."""

    def __init__(self, step: Step, device: torch.device) -> None:
        self.token = torch.zeros(1, dtype=torch.long, device=device)
        self.position = torch.full((1,), MAX_LEN - 1, dtype=torch.long, device=device)  # warm-up writes land there
        self.step = step  # its buffers (the cache, the rotary tables) live as long as the graph that reads them
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                step(self.token, self.position)
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.out = step(self.token, self.position)

    def __call__(self, token: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        self.token.copy_(token)
        self.position.copy_(position)
        self.graph.replay()
        return self.out


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    device = torch.device("cuda" if "--cpu" not in sys.argv and torch.cuda.is_available() else "cpu")
    print("device", torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu", "torch", torch.__version__)
    for path in args:
        config = AutoConfig.from_pretrained(path)
        torch.manual_seed(0)
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation="sdpa").eval()
        prompt = torch.tensor([[(i * 7919) % config.vocab_size for i in range(PREFIX)]], device=device)
        with torch.inference_mode():
            cache = DynamicCache(config=config)
            logits = model(input_ids=prompt, past_key_values=cache, use_cache=True).logits[0, -1]
            first = int(logits.argmax())
            snapshot = DynamicCache(config=config)
            for i, layer in enumerate(cache.layers):
                snapshot.update(layer.keys.clone(), layer.values.clone(), i)
            times: dict[str, list[float]] = {"transformers": [], "written out": [], "graph": []}
            chosen, reference = [first], []
            for n in range(STEPS):  # transformers, greedy from the prefill
                started = time.perf_counter()
                out = model(input_ids=torch.tensor([[chosen[-1]]], device=device), past_key_values=cache, use_cache=True)
                token = int(out.logits[0, -1].argmax())
                times["transformers"].append(time.perf_counter() - started)
                reference.append(out.logits[0, -1].clone())
                chosen.append(token)
            runners = {"written out": Step(model, snapshot)}
            if device.type == "cuda":
                runners["graph"] = Graphed(Step(model, snapshot), device)
            for name, run in runners.items():
                worst, same = 0.0, 0
                for n in range(STEPS):  # the tokens transformers chose, one by one
                    token = torch.tensor([chosen[n]], device=device)
                    position = torch.tensor([PREFIX + n], device=device)
                    sync(device)
                    started = time.perf_counter()
                    out = run(token, position)
                    pick = int(out.argmax())
                    times[name].append(time.perf_counter() - started)
                    worst = max(worst, float((out - reference[n]).abs().max()))
                    same += pick == chosen[n + 1]
                print(f"{path}: {name}: logits within {worst:.3g} of transformers', the same token at {same}/{STEPS}")
        for name, seconds in times.items():
            if seconds:
                print(f"{path}: {name}: {statistics.median(seconds[4:]) * 1e3:.2f} ms a token (median of {STEPS - 4})")
        del model, cache, snapshot, runners
        if device.type == "cuda":
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
