"""Forward-pass time by number of tokens, as loaded by the daemon and as transformers loads it.

``python -m evaluation.pass_cost [--context 800] [--repeats 9]`` prints, for passes of 1 to 16 tokens after a
context of ``--context`` tokens (masked, as lookahead steps are), the best and median milliseconds of the
daemon's model (oneDNN linear kernels, packed-GQA attention: :func:`decoder.model.prepare_for_inference`)
and of the same weights as transformers leaves them (row-major, its "sdpa"), interleaved so that both see
the same machine load; and an 800-token prefill for each.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence

import torch

from decoder.forward import masked_pass, prefill
from decoder.kv import PrefixKV
from decoder.model import load_model

SIZES = (1, 2, 3, 4, 6, 8, 12, 16)


def as_transformers_loads_it(model: torch.nn.Module) -> None:
    """Undo the daemon's preparation: PyTorch's own Linear, row-major weights, transformers' own sdpa attention."""
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            module.__class__ = torch.nn.Linear
            module.weight = torch.nn.Parameter(module.weight.detach().contiguous(), requires_grad=False)
    model.set_attn_implementation("sdpa")  # type: ignore[operator]


def timed_pass(model: torch.nn.Module, kv: PrefixKV, n: int) -> float:
    """Milliseconds of one :func:`decoder.forward.masked_pass` of ``n`` tokens."""
    started = time.perf_counter()
    masked_pass(model, kv, n)
    return (time.perf_counter() - started) * 1000


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--context", type=int, default=800)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args(argv)
    models = {"daemon": load_model(args.model, device="cpu").model, "transformers": load_model(args.model).model}
    as_transformers_loads_it(models["transformers"])
    context = [100 + (i * 7919) % 20000 for i in range(args.context)]
    caches: dict[str, PrefixKV] = {}
    for name, model in models.items():
        caches[name] = PrefixKV()
        started = time.perf_counter()
        prefill(model, caches[name], context)
        print(f"{name}: {len(context)}-token prefill {time.perf_counter() - started:.2f} s")
    times: dict[str, dict[int, list[float]]] = {name: {n: [] for n in SIZES} for name in models}
    for _ in range(args.repeats):
        for n in SIZES:
            for name, model in models.items():
                times[name][n].append(timed_pass(model, caches[name], n))
    print("| tokens in the pass | " + " | ".join(str(n) for n in SIZES) + " |")
    print("|---" * (len(SIZES) + 1) + "|")
    for name in models:
        cells = [f"{min(times[name][n]):.0f} / {statistics.median(times[name][n]):.0f}" for n in SIZES]
        print(f"| {name}: best / median ms | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
