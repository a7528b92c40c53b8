"""Read bandwidth of this machine on 2 threads: sum of a 1 GiB float32 tensor (memory-bound), best of 10."""

import time

import torch

torch.set_num_threads(2)
x = torch.ones(256 * 2**20, dtype=torch.float32)
best = 1e9
for _ in range(10):
    t = time.perf_counter()
    x.sum().item()
    best = min(best, time.perf_counter() - t)
print(f"read bandwidth, 2 threads: {x.numel() * 4 / best / 1e9:.1f} GB/s (best of 10, 1 GiB float32 sum)")
