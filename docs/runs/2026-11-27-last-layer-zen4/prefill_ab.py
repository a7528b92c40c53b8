"""A/B in one process: 512-token prefills (two chunks of 256) with the last layer's rows stopped after their keys
and values (``kv_only``, the default since this run) and without (every row through the whole last layer),
interleaved; argv[1]: models, argv[2]: rounds. Asserts the same last logits and the same cache either way."""
import statistics, sys, time

import torch

from lookahead_lsp.decoder.forward import prefill
from lookahead_lsp.decoder.kernels.woq_native import WoqKernel, native_kernel
from lookahead_lsp.decoder.kv import PrefixKV
from lookahead_lsp.decoder.runtime.model import configure_torch_threads, load_model
from lookahead_lsp.decoder.runtime.native_pass import native_pass

configure_torch_threads()
skip = WoqKernel.layer


def whole(self, *args, **kwargs):  # the layer call as before: no row stops early
    kwargs.pop("kv_only", None)
    return skip(self, *args[:7], **kwargs)


for spec in sys.argv[1].split(","):
    lm = load_model(spec)
    assert native_pass(lm.model, native_kernel()) is not None
    ids = lm.tokenizer(open("./decoder/lookahead.py").read())["input_ids"][:512]
    times, results = {"skip": [], "whole": []}, {}
    for rep in range(int(sys.argv[2])):
        for mode in ("whole", "skip") if rep % 2 else ("skip", "whole"):
            WoqKernel.layer = skip if mode == "skip" else whole
            kv = PrefixKV()
            t = time.perf_counter()
            logits = prefill(lm.model, kv, ids)
            times[mode].append(time.perf_counter() - t)
            results.setdefault(mode, (logits, [(layer.keys.clone(), layer.values.clone()) for layer in kv.cache.layers]))
    WoqKernel.layer = skip
    assert torch.equal(results["skip"][0], results["whole"][0]), "logits differ"
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(results["skip"][1], results["whole"][1]))
    s, w = statistics.median(times["skip"]) * 1e3, statistics.median(times["whole"]) * 1e3
    print(f"{spec}: prefill of {len(ids)} tokens, median of {len(times['skip'])}: whole last layer {w:.0f} ms, "
          f"rows stopped after their keys {s:.0f} ms: {w / s:.3f}x; logits and cache bit for bit the same")
