"""Scratch (not committed): why a wide masked pass costs more than a one-token pass on a GPU.

Random weights of the real config (timing only). Prints the cost table the policy measures, then times variants
of a pass per width, then a profiler table for widths 1 and 8.
"""

import sys
import time

import torch
from transformers import AutoConfig, AutoModelForCausalLM

from lookahead_lsp.decoder import cost_table
from lookahead_lsp.decoder.forward import forward, masked_pass, prefill
from lookahead_lsp.decoder.kv import PrefixKV
from lookahead_lsp.decoder.runtime.model import prepare_for_inference

config_path, device_name, dtype_name = sys.argv[1], sys.argv[2], sys.argv[3]
device = torch.device(device_name)
dtype = getattr(torch, dtype_name)
config = AutoConfig.from_pretrained(config_path)
config.dtype = dtype
with torch.device(device):
    model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation="sdpa")
prepare_for_inference(model, device)
print("model", sum(p.numel() for p in model.parameters()) / 1e6, "M params", dtype, device, flush=True)

t = time.perf_counter()
table = cost_table.measure(model)
print(
    "cost table", [(n, round(r, 2)) for n, r in table.points], "one", table.one_token_seconds, time.perf_counter() - t
)

kv = PrefixKV()
prefill(model, kv, [(i * 7919) % 151936 for i in range(600)])
kv.append([(i * 7919) % 151936 for i in range(600)]) if len(kv.ids) == 0 else None


def sync() -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def timed(fn, reps: int = 20) -> float:
    for _ in range(3):
        fn()
    sync()
    best = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        best.append(time.perf_counter() - t0)
    best.sort()
    return best[len(best) // 2] * 1000


def masked(n):
    return lambda: masked_pass(model, kv, n)


def unmasked(n):
    def run():
        forward(model, kv, [30 + i for i in range(n)])[-1, 0].item()
        kv.cache.crop(-n)

    return run


def nosync_masked(n):
    def run():
        past = kv.cache.get_seq_length()
        mask = torch.tril(torch.ones(n, n, dtype=torch.bool))
        forward(model, kv, [30 + i for i in range(n)], list(range(past, past + n)), mask)
        kv.cache.crop(-n)

    return run


print("width  masked_ms  unmasked_ms  masked_nosync_ms(cpu side)")
for n in (1, 2, 4, 8, 16):
    print(n, round(timed(masked(n)), 2), round(timed(unmasked(n)), 2), round(timed(nosync_masked(n)), 2), flush=True)

from torch.profiler import ProfilerActivity, profile  # noqa: E402

acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
for n in (1, 8):
    fn = masked(n)
    for _ in range(3):
        fn()
    sync()
    with profile(activities=acts) as prof:
        for _ in range(5):
            fn()
        sync()
    print(f"=== width {n}: by self CPU")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=22, max_name_column_width=60))
    if device.type == "cuda":
        print(f"=== width {n}: by device time")
        print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=16, max_name_column_width=60))
