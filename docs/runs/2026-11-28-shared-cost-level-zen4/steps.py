"""Where a lookahead step's time goes, beside greedy's, on bench holes: each step's parts timed (the forward pass by
its number of tokens, the drafts' lookups, the selection, verification, the cache's compaction). The pass-cost table
is the stored one (decoder/cost_table.py), as the daemon's; move the file aside to start from a fresh timing.
argv: as `lookahead-lsp bench` (--corpus, --workload, --holes, --model, --max-new-tokens, --token-budget)."""

import collections
import copy
import sys
import time

from holes import load  # this folder's

import lookahead_lsp.decoder.kv as kv_module
import lookahead_lsp.decoder.lookahead as lookahead
from lookahead_lsp.decoder.cost_table import machine_cost
from lookahead_lsp.evaluation.speed import Limits, decode_request, parse_decoders

args, holes, loaded, builder = load(sys.argv[1:])
cost = machine_cost(loaded.model)
print("cost", cost.current())
decoders = {c.name: c.build(loaded.model, copy.deepcopy(cost)) for c in parse_decoders("greedy,lookahead")}
spent: dict[str, float] = collections.defaultdict(float)
calls: collections.Counter[str] = collections.Counter()
by_size: dict[int, list[float]] = collections.defaultdict(list)


def timed(owner, name, key, size=None):
    inner = getattr(owner, name)

    def call(*a, **k):
        started = time.perf_counter()
        out = inner(*a, **k)
        took = time.perf_counter() - started
        spent[key] += took
        calls[key] += 1
        if size is not None:
            by_size[size(a)].append(took)
        return out

    setattr(owner, name, call)


timed(lookahead, "forward", "forward", size=lambda a: len(a[2]))
timed(lookahead, "plain_step", "plain_step", size=lambda a: 1)
for name in ("select", "build_tree", "verify"):
    timed(lookahead, name, name)
for name in ("step", "drafts", "_record", "_shadow", "_advance_chains", "extend"):
    timed(lookahead._Run, name, name)
timed(kv_module.PrefixKV, "keep_selected", "keep_selected")
greedy_ms = greedy_steps = lookahead_ms = 0.0
for i, hole in enumerate(holes):
    inputs = builder.inputs(hole)
    for name, decoder in decoders.items():
        out = decoder.generate(decode_request(inputs.built, Limits(args.max_new_tokens, frozenset()), inputs.extra_drafts))
        if name == "greedy":
            greedy_ms += out.stats.decode_ms
            greedy_steps += out.stats.steps
        else:
            lookahead_ms += out.stats.decode_ms
    print(i, hole.id, file=sys.stderr)
print(f"greedy ms/step {greedy_ms / greedy_steps:.2f} greedy/lookahead decode {greedy_ms / lookahead_ms:.3f}")
for key in sorted(spent, key=lambda k: -spent[k]):
    print(f"{key:16s} n={calls[key]:5d} total {spent[key] * 1e3:8.1f} ms  per call {spent[key] * 1e3 / calls[key]:.3f} ms")
one = sorted(by_size[1])[len(by_size[1]) // 2]
for n in sorted(by_size):
    median = sorted(by_size[n])[len(by_size[n]) // 2]
    print(f"pass {n:2d}: n={len(by_size[n]):4d} median {median * 1e3:.2f} ms  ratio to 1-token {median / one:.2f}")
