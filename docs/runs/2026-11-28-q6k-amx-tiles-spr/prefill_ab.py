"""Two builds of the native kernel (LIB_A, LIB_B) on the model's prefill, alternated round by round in one process:
medians, bests, and whether both give the same logits.

Usage: python prefill_ab.py MODEL LIB_A LIB_B [TOKENS] [ROUNDS]   ($SDIST: the folder holding the extracted sdists;
the prompt is the first TOKENS tokens of <sdist>/rich-15.0.0/rich/console.py)."""

import os
import statistics
import sys
import time
from pathlib import Path

import torch

from lookahead_lsp.decoder.forward import prefill
from lookahead_lsp.decoder.kernels.woq_native import WoqKernel
from lookahead_lsp.decoder.kv import PrefixKV
from lookahead_lsp.decoder.runtime import native_pass
from lookahead_lsp.decoder.runtime.model import load_model

spec, libs = sys.argv[1], {"A": Path(sys.argv[2]), "B": Path(sys.argv[3])}
tokens = int(sys.argv[4]) if len(sys.argv) > 4 else 512
rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 7
model = load_model(spec)
passes = {name: native_pass.NativePass(model.model, WoqKernel(lib)) for name, lib in libs.items()}
ids = model.tokenizer(Path(os.environ["SDIST"], "rich-15.0.0/rich/console.py").read_text())["input_ids"][:tokens]
times: dict[str, list[float]] = {name: [] for name in libs}
logits: dict[str, torch.Tensor] = {}
for r in range(rounds + 1):  # round 0 warms each build up, untimed
    for name in libs if r % 2 == 0 else reversed(list(libs)):
        native_pass._PASSES[model.model] = passes[name]
        started = time.perf_counter()
        logits[name] = prefill(model.model, PrefixKV(), ids)
        if r:
            times[name].append(time.perf_counter() - started)
for name, lib in libs.items():
    print(f"{name}: {passes[name].kernel.isa} ({lib.name})")
a, b = (statistics.median(times[name]) for name in libs)
print(
    f"{spec}, {len(ids)}-token prefill, {rounds} rounds: A {a * 1e3:.0f} ms, B {b * 1e3:.0f} ms (medians; bests "
    f"{min(times['A']) * 1e3:.0f}, {min(times['B']) * 1e3:.0f}): B {a / b:.3f}x; "
    f"same logits: {torch.equal(logits['A'], logits['B'])}"
)
