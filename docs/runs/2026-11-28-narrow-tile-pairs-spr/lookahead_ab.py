"""Greedy and lookahead on the 1.5B with AVX-512's two-tile loop for passes of 1 to 4 tokens off (mask 0) and on
(mask 15), interleaved hole by hole (which mask first alternates), each mask's lookahead with its own pass-cost
table timed under it; the bench's holes (fim and repo, seed 0), its prompts, 48 new tokens.

Usage: python lookahead_ab.py <sdist>/<repo> [HOLES PER WORKLOAD]"""

import argparse
import statistics
import sys

from lookahead_lsp.decoder.cost_table import measure
from lookahead_lsp.decoder.kernels.woq_native import native_kernel
from lookahead_lsp.decoder.runtime.model import configure_torch_threads, load_model, stop_token_ids
from lookahead_lsp.evaluation.commands.bench import load_holes
from lookahead_lsp.evaluation.speed import ContextBuilder, _config
from lookahead_lsp.lsp_server.completion import Limits, decode_request

configure_torch_threads()
holes_each = int(sys.argv[2]) if len(sys.argv) > 2 else 10
corpus, holes = load_holes(argparse.Namespace(corpus=sys.argv[1], workload="fim,repo", holes=holes_each, seed=0))
loaded = load_model("embedded-1.5b")
kernel = native_kernel()
assert kernel is not None and kernel.pair_rows() is not None, "needs the native kernel at an AVX-512 level"
builder = ContextBuilder(corpus, loaded.tokenizer, 512)
eos = stop_token_ids(loaded.tokenizer)
costs = {}
for mask in (0, 15):
    kernel.pair_rows(mask)
    costs[mask] = measure(loaded.model)
    table = [(n, round(c, 3)) for n, c in costs[mask].points]
    print(f"mask {mask}: pass-cost table {table}, one token {costs[mask].one_token_seconds * 1e3:.1f} ms")
kinds = ("greedy", "lookahead")
decoders = {(mask, kind): _config(kind).build(loaded.model, costs[mask]) for mask in (0, 15) for kind in kinds}
decode_ms: dict[tuple[int, str], list[float]] = {key: [] for key in decoders}
tokens = dict.fromkeys(decoders, 0)
identical = True
for i, hole in enumerate(holes):
    inputs = builder.inputs(hole)
    masks = (0, 15) if i % 2 == 0 else (15, 0)
    reference = None
    for kind in kinds:
        for mask in masks:
            kernel.pair_rows(mask)
            out = decoders[mask, kind].generate(decode_request(inputs.built, Limits(48, eos), inputs.extra_drafts))
            decode_ms[mask, kind].append(out.stats.decode_ms)
            tokens[mask, kind] += len(out.token_ids)
            reference = reference or out.token_ids
            identical &= out.token_ids == reference
for (mask, kind), times in decode_ms.items():
    print(f"mask {mask}, {kind}: {tokens[mask, kind] / (sum(times) / 1e3):.2f} tokens/s, decode {sum(times):.0f} ms")
for kind in kinds:
    off, on = decode_ms[0, kind], decode_ms[15, kind]
    per_hole = statistics.geometric_mean([a / b for a, b in zip(off, on, strict=True)])
    print(f"{kind}: two-tile loop on / off: {sum(off) / sum(on):.3f}x in all, {per_hole:.3f}x per hole (geomean)")
print(f"every decode identical to the first greedy one of its hole: {identical}")
