"""Lookahead's drafting policy replayed on recorded greedy tokens (record.py's JSON): the decoder's own draft sources
(the prompt's n-grams, growing with the committed tokens; the suffix; the workspace index as the bench builds it),
decoder/policy.py's select(), AcceptanceModel and RiskBudget, step by step as decoder/lookahead.py's _Run.step runs
them (G = 1, drafts of up to 15 tokens, a probe every 4 steps, unverified drafts followed as shadows), with each
pass's cost read from a fixed table instead of timed. A draft is right exactly as far as greedy's tokens say, so
this is what the decoder drafts and accepts on those holes, without the host's timing noise; the cost table is the
one thing it assumes. Prints greedy's cost / lookahead's (the speedup if passes cost what the table says) for main's
policy, an oracle that verifies exactly the draft tokens that will be accepted (from the best of the step's
drafts, none where none is right), and the variants tried; for retype.py's holes also the first completion as a
draft source. argv: record.py's or retype.py's JSON files (`SDIST=<folder>`: where
the corpora named `<sdist>/...` in them are)."""

import argparse
import dataclasses
import json
import os
import sys

from lookahead_lsp.decoder import policy as P
from lookahead_lsp.decoder.drafts import Draft, NgramTable, SequenceNgrams
from lookahead_lsp.decoder.kv import common_prefix_len
from lookahead_lsp.decoder.runtime.tokenizer import load_tokenizer
from lookahead_lsp.evaluation.commands import bench
from lookahead_lsp.evaluation.speed import ContextBuilder

# Pass costs relative to a one-token pass, the 1.5B on this Zen 4: "start-up": timed at start (128 tokens of
# context, best of 3 rounds); "live": corrected by 10 arrow holes' live passes (about 600 tokens of context) within
# the hour; "avx2": the stored table of the avx2 level.
TABLES = {
    "start-up": ((1, 1.0), (2, 1.0), (3, 1.06), (4, 1.24), (5, 1.42), (6, 1.54), (8, 1.67), (12, 2.84), (16, 3.45)),
    "live": ((1, 1.0), (2, 1.12), (3, 1.29), (4, 1.5), (5, 1.64), (6, 1.81), (8, 2.25), (12, 3.38), (16, 4.49)),
    "avx2": ((1, 1.0), (2, 1.16), (3, 1.49), (4, 1.65), (5, 1.96), (6, 2.33), (8, 2.94), (12, 4.79), (16, 6.15)),
}
STALE = ((1, 1.0), (2, 1.045), (3, 1.286), (4, 1.663), (5, 1.782), (6, 2.115), (8, 1.864), (12, 3.857), (16, 4.772))
LONGEST, PROBE_EVERY = 15, 4  # decoder/lookahead.py's draft length (N - 1 = 7 < 15) and PROBE_EVERY


class LongestContext(NgramTable):
    """Variant: of the occurrences of the longest matched n-gram, the one whose preceding tokens match the context
    furthest back (up to 64), not the most recent."""

    def lookup(self, context, max_len, max_count):
        for k in range(min(self.max_match, len(context)), 0, -1):
            best = None
            for handle, end in reversed(self._where.get(tuple(context[-k:]), [])[-self.SCAN_LIMIT :]):
                seq = self._seqs[handle]
                cont = tuple(seq[end + 1 : end + 1 + max_len])
                back = k
                while back < 64 and end - back >= 0 and back < len(context) and seq[end - back] == context[-1 - back]:
                    back += 1
                if cont and (best is None or back > best[0]):
                    best = (back, cont)
            if best:
                return [Draft(best[1], self.name, k)]
        return []


def retyped(hole):
    """``hole`` with the first line of its middle typed (None: the middle is one line): retype.py's second holes."""
    end = hole.middle.find("\n")
    if end < 0:
        return None
    return dataclasses.replace(hole, prefix=hole.prefix + hole.middle[: end + 1], middle=hole.middle[end + 1 :])


def agreed(found):
    """Variant: a draft whose first token another source's draft also starts with is its own kind for the
    acceptance model (source name + "+", with the source's priors), learned apart from the drafts no other source
    shares."""
    sources: dict[int, set[str]] = {}
    for d in found:
        sources.setdefault(d.tokens[0], set()).add(d.source)
    return [
        Draft(d.tokens, d.source + "+", d.match_len, d.count) if len(sources[d.tokens[0]]) > 1 else d for d in found
    ]


def replay(
    holes,
    workspaces,
    table,
    truth=None,
    oracle=False,
    g=1,
    table_kind=NgramTable,
    kinds=lambda found: found,
    previous=False,
):
    """(greedy's cost / lookahead's over all holes, the worst hole's, tokens a step, draft tokens verified, wasted)
    with the policy reading ``table`` and passes costing ``truth`` (the same table by default)."""
    cost, true_cost, model = (
        P.CostModel(table, adaptive=False),
        P.CostModel(truth or table, adaptive=False),
        P.AcceptanceModel(),
    )
    spent, tokens, steps, drafted, wasted, per_hole = 0.0, 0, 0, 0, 0, []
    for hole, workspace in zip(holes, workspaces, strict=True):
        out, context = (
            hole["out"] + [-1] * hole["eos"],
            list(hole["prompt"]),
        )  # -1: the end-of-text token, never drafted
        model.begin()
        risk = P.RiskBudget()
        prompt, suffix = table_kind("prompt", 4), table_kind("suffix", 4)
        handle = prompt.add_sequence(context)
        suffix.add_sequence(hole["suffix"])
        sources = [prompt, suffix, workspace]
        if previous:  # retype.py's holes: the first completion, whose first line was wrong
            sources.append(SequenceNgrams("previous", hole["previous"]))
        shadows, at, n_steps, hole_cost = [], 0, 0, 0.0
        while at < len(out):
            allowance, floor = risk.allowance(), cost.break_even(LONGEST * g)
            probe, affordable = n_steps % PROBE_EVERY == 0, cost.cost(2) <= cost.dearest(allowance)
            found = [d for source in sources
                     if probe or (affordable and model.ceiling(source.name) > floor)
                     for d in source.lookup(context, LONGEST, g)]  # fmt: skip
            found = kinds(found)
            if oracle:
                best = max(found, key=lambda d: common_prefix_len(d.tokens, out[at:]), default=None)
                right = common_prefix_len(best.tokens, out[at:]) if best else 0
                chosen = [Draft(best.tokens[:right], best.source, best.match_len)] if right else []
            else:
                chosen = P.select(found, model, cost, LONGEST * g, g, allowance).drafts
            if chosen:
                nodes = {d.tokens[:i] for d in chosen for i in range(1, len(d.tokens) + 1)}
                right = max(common_prefix_len(d.tokens, out[at:]) for d in chosen)
                for d in chosen:
                    model.observe(d, len(d.tokens), common_prefix_len(d.tokens, out[at : at + right]))
                pass_cost, n = true_cost.interpolated(1 + len(nodes)), right + 1
                risk.spent(cost.interpolated(1 + len(nodes)), n)
                drafted, wasted = drafted + len(nodes), wasted + len(nodes) - right
            else:
                pass_cost, n = 1.0, 1
                risk.spent(1.0, 1)
            checked, followed = {(d.source, d.tokens[:1]) for d in chosen}, {d.source for d, _ in shadows}
            for d in found:
                if d.source not in followed and (d.source, d.tokens[:1]) not in checked:
                    shadows.append((d, len(context)))
                    followed.add(d.source)
            new = out[at : at + n]
            context += new
            prompt.extend(handle, new)
            at, n_steps, hole_cost = at + len(new), n_steps + 1, hole_cost + pass_cost
            waiting = []
            for d, start in shadows:
                seen = context[start : start + len(d.tokens)]
                matched = common_prefix_len(d.tokens, seen)
                if matched < len(seen) or len(seen) == len(d.tokens):
                    model.observe(d, len(d.tokens), matched)
                else:
                    waiting.append((d, start))
            shadows = waiting
        spent, tokens, steps = spent + hole_cost, tokens + len(out), steps + n_steps
        per_hole.append(len(out) / hole_cost)
    return tokens / spent, min(per_hole), tokens / steps, drafted, wasted


def main() -> None:
    for path in sys.argv[1:]:
        with open(path) as handle:
            recorded = json.load(handle)
        parser = argparse.ArgumentParser()
        bench.add_arguments(parser)
        args = parser.parse_args([a.replace("<sdist>", os.environ.get("SDIST", "<sdist>")) for a in recorded["args"]])
        corpus, holes = bench.load_holes(args)
        where, source = recorded["tokenizer"]
        tokenizer = load_tokenizer(os.path.expanduser(where), source)  # the model's own, as record.py loaded it
        builder = ContextBuilder(corpus, tokenizer, args.token_budget)
        by_id = {hole.id: hole for hole in holes}
        rows = recorded["holes"]
        second = [retyped(by_id[row["hole1"]]) if "hole1" in row else by_id[row["id"]] for row in rows]
        workspaces = [builder.workspace_index(hole) for hole in second]
        print(f"## {corpus.name}: {len(rows)} holes, {sum(len(r['out']) for r in rows)} tokens")

        def show(name, result):
            speed, worst, per_step, drafted, wasted = result
            print(
                f"{name:44s} {speed:.3f}x (worst hole {worst:.3f}x), {per_step:.2f} tokens a step, "
                f"draft tokens verified {drafted}, wasted {wasted}",
                flush=True,
            )

        for table_name, table in TABLES.items():
            print(f"# pass costs: {table_name} {table}")
            show("main", replay(rows, workspaces, table))
            show("oracle", replay(rows, workspaces, table, oracle=True))
            show("the policy reading a stale stored table", replay(rows, workspaces, STALE, truth=table))
            show(
                "longest-context matching (prompt, suffix)", replay(rows, workspaces, table, table_kind=LongestContext)
            )
            P.PRIORS.update({name + "+": prior for name, prior in list(P.PRIORS.items())})
            show("agreement between sources as a kind", replay(rows, workspaces, table, kinds=agreed))
            show("G = 2 (two drafts a step, a tree)", replay(rows, workspaces, table, g=2))
            stake, share = P.RISK_STAKE, P.LOSS_SHARE
            P.RISK_STAKE, P.LOSS_SHARE = 3.0, 0.1
            show("risk budget 4x the stake, 6.7x the share", replay(rows, workspaces, table))
            P.RISK_STAKE, P.LOSS_SHARE = stake, share
            if all("previous" in row for row in rows):
                show("the first completion as a draft source", replay(rows, workspaces, table, previous=True))
                show("the oracle with it", replay(rows, workspaces, table, oracle=True, previous=True))


if __name__ == "__main__":
    main()
