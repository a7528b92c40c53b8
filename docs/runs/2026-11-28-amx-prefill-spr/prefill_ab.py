"""Prefill on the native kernel (``prefillDtype`` "same") against the bfloat16 prefill twin ("bfloat16": each
layer's codes dequantized for oneDNN, its AMX product on an AMX CPU), one model and mode per process.

Usage: python prefill_ab.py MODEL MODE TOKENS REPEATS   (prompt: the start of <sdist>/rich-15.0.0/rich/console.py,
$SDIST the folder holding the extracted sdists)."""

import os
import resource
import sys
import time
from pathlib import Path

from lookahead_lsp.decoder.forward import prefill
from lookahead_lsp.decoder.kv import PrefixKV
from lookahead_lsp.decoder.runtime.model import load_model

spec, mode, tokens, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
loaded = load_model(spec, prefill_dtype=mode)
source = Path(os.environ["SDIST"], "rich-15.0.0/rich/console.py").read_text()
ids = loaded.tokenizer(source)["input_ids"][:tokens]
times = []
for _ in range(repeats):
    started = time.perf_counter()
    prefill(loaded.model, PrefixKV(), ids)
    times.append(time.perf_counter() - started)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
print(
    f"{spec} prefillDtype={mode} (prefills in {loaded.prefill_dtype}, {type(loaded.model).__name__}): "
    f"{len(ids)} tokens {' '.join(f'{t:.2f}' for t in times)} s, best {min(times):.2f} s; peak RSS {peak} MB"
)
