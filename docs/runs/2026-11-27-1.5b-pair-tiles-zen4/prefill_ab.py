"""Scratch A/B: a 512-token prefill (two chunks of 256) on two kernel builds, interleaved in one process, median of
8; argv[1]: models, argv[2]: the old library, argv[3]: the new one; asserts the same logits and cache bits."""
import statistics, sys, time
from pathlib import Path
import torch
from lookahead_lsp.decoder.forward import prefill
from lookahead_lsp.decoder.kv import PrefixKV
from lookahead_lsp.decoder.kernels.woq_native import WoqKernel, native_kernel
from lookahead_lsp.decoder.runtime.model import configure_torch_threads, load_model
from lookahead_lsp.decoder.runtime.native_pass import native_pass
configure_torch_threads()
kernels = {"old": WoqKernel(Path(sys.argv[2])), "new": WoqKernel(Path(sys.argv[3]))}
for spec in sys.argv[1].split(","):
    lm = load_model(spec)
    native = native_pass(lm.model, native_kernel())
    ids = lm.tokenizer(open("./decoder/lookahead.py").read())["input_ids"][:512]
    outs = {}
    for name, k in kernels.items():
        native.kernel = k
        kv = PrefixKV(); outs[name] = (prefill(lm.model, kv, ids), kv)
    assert torch.equal(outs["old"][0], outs["new"][0]), "logits differ"
    times = {"old": [], "new": []}
    for rep in range(8):
        for name in (("old", "new") if rep % 2 else ("new", "old")):
            native.kernel = kernels[name]
            t = time.perf_counter(); prefill(lm.model, PrefixKV(), ids); times[name].append(time.perf_counter() - t)
    o, n = statistics.median(times["old"]) * 1e3, statistics.median(times["new"]) * 1e3
    print(f"{spec} prefill of {len(ids)} tokens: old {o:.0f} ms, new {n:.0f} ms, speed {o / n:.3f}x")
