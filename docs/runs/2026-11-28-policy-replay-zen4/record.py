"""Greedy's tokens on bench holes, recorded for replay.py: for each hole the daemon's prompt and suffix token ids
and the model's greedy continuation (to its end-of-text token or the token limit, as the bench), as JSON.
argv: OUT.json, then `lookahead-lsp bench`'s arguments (--corpus, --workload, --holes, --model, --max-new-tokens,
--token-budget). retype.py records its second completions with the same parts."""

import argparse
import json
import sys

from lookahead_lsp.decoder.runtime.model import stop_token_ids
from lookahead_lsp.evaluation.commands import bench
from lookahead_lsp.evaluation.speed import ContextBuilder, Limits, decode_request, parse_decoders


class Recorder:
    """The bench's holes, model and prompts for ``argv`` (bench's arguments), and greedy to complete them."""

    def __init__(self, argv):
        parser = argparse.ArgumentParser()
        bench.add_arguments(parser)
        self.argv, self.args = list(argv), parser.parse_args(argv)
        corpus, self.holes = bench.load_holes(self.args)
        self.loaded = bench.load(self.args)
        self.builder = ContextBuilder(corpus, self.loaded.tokenizer, self.args.token_budget)
        self.eos = stop_token_ids(self.loaded.tokenizer)  # as the bench: a completion ends at its end-of-text token
        self.greedy = parse_decoders("greedy")[0].build(self.loaded.model, None)

    def complete(self, hole):
        """(the hole's inputs, greedy's result)."""
        inputs = self.builder.inputs(hole)
        limits = Limits(self.args.max_new_tokens, self.eos)
        return inputs, self.greedy.generate(decode_request(inputs.built, limits, inputs.extra_drafts))

    def row(self, hole_id, inputs, out):
        """A hole as replay.py reads it."""
        return {
            "id": hole_id,
            "prompt": list(inputs.built.token_ids),
            "suffix": list(inputs.built.suffix_ids),
            "out": list(out.token_ids),
            "eos": out.stats.finish_reason == "eos",
        }

    def write(self, path, rows):
        with open(path, "w") as handle:
            tokenizer = [str(self.loaded.path), self.loaded.source]
            json.dump({"args": self.argv, "tokenizer": tokenizer, "holes": rows}, handle)


if __name__ == "__main__":
    recorder = Recorder(sys.argv[2:])
    rows = []
    for hole in recorder.holes:
        inputs, out = recorder.complete(hole)
        rows.append(recorder.row(hole.id, inputs, out))
        print(hole.id, len(out.token_ids), file=sys.stderr)
    recorder.write(sys.argv[1], rows)
