"""The shared cost level against per-size levels only, interleaved per hole in one process: greedy, then lookahead
with each table (each decoder its own copy, corrected by its own passes, nothing written back), from the same
starting table. argv: TABLE (a stored table's JSON, or `fresh` to time one now) then `lookahead-lsp bench`'s
arguments (--corpus, --workload, --holes, --model, --max-new-tokens, --token-budget). It needs the shared level of
commit 4c57867 (`decoder.policy.COMMON_SHARE`), which the next commits took back after this A/B."""

import copy
import sys
from pathlib import Path

from holes import load  # this folder's

from lookahead_lsp.decoder import cost_table, policy
from lookahead_lsp.decoder.policy import CostModel
from lookahead_lsp.evaluation.speed import Limits, decode_request, parse_decoders


class PerSizeOnly(CostModel):
    """The table as it was corrected before the shared level (COMMON_SHARE 0)."""

    def observe(self, n: int, seconds: float, weight: float = 0.1) -> None:
        shared, policy.COMMON_SHARE = policy.COMMON_SHARE, 0.0
        try:
            super().observe(n, seconds, weight)
        finally:
            policy.COMMON_SHARE = shared


table = sys.argv[1]
args, holes, loaded, builder = load(sys.argv[2:])
start = cost_table.measure(loaded.model) if table == "fresh" else cost_table.load(Path(table))
assert start is not None
print("start", [(n, round(c, 3)) for n, c in start.points], flush=True)
greedy_config, config = parse_decoders("lookahead")
costs = {"per-size": PerSizeOnly(start.points, one_token_seconds=start.one_token_seconds),
         "shared": CostModel(start.points, one_token_seconds=start.one_token_seconds)}
decoders = {"greedy": greedy_config.build(loaded.model, copy.deepcopy(start))}
decoders.update({name: config.build(loaded.model, cost) for name, cost in costs.items()})
ms = {name: 0.0 for name in decoders}
steps = {name: 0 for name in decoders}
for i, hole in enumerate(holes):
    inputs = builder.inputs(hole)
    order = list(decoders) if i % 2 == 0 else ["greedy", "shared", "per-size"]
    outs = {}
    for name in order:
        request = decode_request(inputs.built, Limits(args.max_new_tokens, frozenset()), inputs.extra_drafts)
        outs[name] = decoders[name].generate(request)
        ms[name] += outs[name].stats.decode_ms
        steps[name] += outs[name].stats.steps
    same = all(out.token_ids == outs["greedy"].token_ids for out in outs.values())
    print(f"{hole.id:36s} greedy {outs['greedy'].stats.decode_ms:6.0f} ms  per-size {outs['per-size'].stats.decode_ms:6.0f}"
          f"  shared {outs['shared'].stats.decode_ms:6.0f}  identical {same}", flush=True)
for name in ("per-size", "shared"):
    print(f"{name:9s}: decode {ms[name]:7.0f} ms over {steps[name]} steps, greedy's / its: {ms['greedy'] / ms[name]:.3f}x")
    print(f"   table at the end: {[(n, round(c, 3)) for n, c in costs[name].current()]}")
