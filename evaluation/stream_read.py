"""The host's streaming read rate: what a pass that reads every weight once from memory could reach at most.

Shared 2-core hosts move it by half within an hour (33-60 GB/s on one afternoon,
docs/runs/2026-11-27-rooflines-zen4/), so a report that times passes records it beside them."""

from __future__ import annotations

import time

import torch


def stream_read_rate(mib: int = 256, repeats: int = 9) -> float:
    """GB/s: the best of ``repeats`` sums of ``mib`` MiB of float32 (far beyond the caches) on torch's threads."""
    buffer = torch.ones(mib * 2**20 // 4)
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        buffer.sum()
        best = min(best, time.perf_counter() - started)
    return buffer.numel() * 4 / best / 1e9
