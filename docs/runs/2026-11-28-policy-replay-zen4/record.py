"""Greedy's tokens on bench holes, recorded for replay.py: for each hole the daemon's prompt and suffix token ids
and the model's greedy continuation (to its end-of-text token or the token limit, as the bench), as JSON.
argv: OUT.json, then `lookahead-lsp bench`'s arguments (--corpus, --workload, --holes, --model, --max-new-tokens,
--token-budget)."""

import argparse
import json
import sys

from lookahead_lsp.decoder.runtime.model import stop_token_ids
from lookahead_lsp.evaluation.commands import bench
from lookahead_lsp.evaluation.speed import ContextBuilder, Limits, decode_request, parse_decoders

parser = argparse.ArgumentParser()
bench.add_arguments(parser)
args = parser.parse_args(sys.argv[2:])
corpus, holes = bench.load_holes(args)
loaded = bench.load(args)
builder = ContextBuilder(corpus, loaded.tokenizer, args.token_budget)
eos = stop_token_ids(loaded.tokenizer)  # as the bench: a completion ends at its end-of-text token
greedy = parse_decoders("greedy")[0].build(loaded.model, None)
rows = []
for hole in holes:
    inputs = builder.inputs(hole)
    out = greedy.generate(decode_request(inputs.built, Limits(args.max_new_tokens, eos), inputs.extra_drafts))
    rows.append(
        {
            "id": hole.id,
            "prompt": list(inputs.built.token_ids),
            "suffix": list(inputs.built.suffix_ids),
            "out": list(out.token_ids),
            "eos": out.stats.finish_reason == "eos",
        }
    )
    print(hole.id, len(out.token_ids), file=sys.stderr)
with open(sys.argv[1], "w") as handle:
    json.dump({"args": sys.argv[2:], "tokenizer": [str(loaded.path), loaded.source], "holes": rows}, handle)
