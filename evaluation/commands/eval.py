"""`lookahead-lsp eval repo`: completion quality on holes cut from real code (exact match, edit similarity, and
how often completions repeat the suffix or run past the hole's block), with stop rules and trimming on and
off and with workspace context on and off. See ``evaluation/quality.py``."""

from __future__ import annotations

import argparse
import gc
from pathlib import Path

from lookahead_lsp.context.prompt import PROMPT_LAYOUTS
from lookahead_lsp.decoder.backend import local_backend
from lookahead_lsp.evaluation.commands.bench import add_workload_arguments, load, load_holes, progress, run_meta
from lookahead_lsp.evaluation.quality import QualityResult, Scored, run_quality
from lookahead_lsp.evaluation.report import quality_markdown, write_quality
from lookahead_lsp.evaluation.speed import ContextBuilder, model_limits
from lookahead_lsp.evaluation.workloads import Corpus, Hole

WORKSPACES = {"both": (True, False), "on": (True,), "off": (False,)}
"""--workspace: with workspace context (snippets of other files, the workspace draft source), without, or both"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_workload_arguments(parser, "fim,repo,midline", max_new_tokens=64)
    parser.add_argument("--no-heal", action="store_true", help="no token healing in the prompt")
    parser.add_argument(
        "--layout",
        default="psm",
        choices=tuple(PROMPT_LAYOUTS),
        help="the prompt's layout (default: psm; the daemon's CPU default is psm-line with --token-budget 512)",
    )
    parser.add_argument(
        "--no-definitions",
        action="store_true",
        help="context from other files as BM25 windows only, without the definitions of the names the cursor "
        "uses (context/definitions.py): the context before them",
    )
    parser.add_argument(
        "--deadlines",
        type=float,
        default=None,
        metavar="MS",
        help="also score what the daemon shows with its default deadlines on this machine, had decoding begun "
        "MS milliseconds after the keystroke (its prompt and prefill time: about 120 on a 2-core CPU)",
    )
    parser.add_argument(
        "--workspace",
        default="both",
        choices=tuple(WORKSPACES),
        help="decode each hole with workspace context (on), without (off) or both ways (default: both)",
    )
    parser.add_argument(
        "--reference-weights",
        default=None,
        choices=("gguf", "dense"),
        help="also run the same holes with the model in these weights and report how often the two greedy "
        "completions agree (e.g. --weights gguf --reference-weights dense: the GGUF's codes against float32)",
    )


def run(args: argparse.Namespace) -> int:
    corpus, holes = load_holes(args)
    results = [evaluate(args, corpus, holes)]
    if args.reference_weights is not None:
        results.append(evaluate(argparse.Namespace(**{**vars(args), "weights": args.reference_weights}), corpus, holes))
        print(agreement_markdown(results[0], results[1], args.weights, args.reference_weights))
    if args.out:
        for result, name in zip(results, ("", "reference"), strict=False):
            for path in write_quality(result, Path(args.out) / name):
                progress(f"wrote {path}")
    return 0


def evaluate(args: argparse.Namespace, corpus: Corpus, holes: list[Hole]) -> QualityResult:
    """Load the model as ``args`` say and score every hole (the table printed)."""
    loaded = load(args)
    builder = ContextBuilder(
        corpus,
        loaded.tokenizer,
        args.token_budget,
        heal=not args.no_heal,
        layout=args.layout,
        definitions=not args.no_definitions,
    )
    meta = {
        **run_meta(args, corpus, loaded),
        "decoder": "lookahead (greedy-identical)",
        "heal": not args.no_heal,
        "layout": args.layout,
        "definitions": not args.no_definitions,
        "deadlines_after_ms": args.deadlines,
    }
    result = run_quality(
        local_backend(loaded.model, "lookahead"),
        builder,
        holes,
        model_limits(loaded, args.max_new_tokens),
        meta,
        progress,
        args.deadlines,
        WORKSPACES[args.workspace],
    )
    print(quality_markdown(result))
    del loaded
    gc.collect()  # the next model loads into the memory this one held
    return result


def agreement_markdown(result: QualityResult, reference: QualityResult, weights: str, reference_weights: str) -> str:
    """How often the two runs' raw completions (greedy tokens, decoded) and trimmed completions are the same,
    and their exact matches, by workload and workspace context."""
    rows = []
    for workload in result.workloads:
        for workspace in (True, False):
            pairs = same_completions(result, reference, workload, workspace)
            if not pairs:  # --workspace on or off: the other half was not run
                continue
            rows.append(
                f"| {workload} | {'on' if workspace else 'off'} | {sum(raw for raw, _, _, _ in pairs)}/{len(pairs)} "
                f"| {sum(shown for _, shown, _, _ in pairs)}/{len(pairs)} | {sum(e for _, _, e, _ in pairs)} "
                f"| {sum(e for _, _, _, e in pairs)} |"
            )
    head = (
        f"| workload | workspace | same raw completion | same shown completion | exact ({weights}) "
        f"| exact ({reference_weights}) |\n|---|---|---|---|---|---|"
    )
    return f"## Agreement: {weights} weights against {reference_weights}\n\n{head}\n" + "\n".join(rows)


def same_completions(
    result: QualityResult, reference: QualityResult, workload: str, workspace: bool
) -> list[tuple[bool, bool, bool, bool]]:
    """Per hole: (same raw text, same shown text, exact here, exact in the reference)."""

    def by_hole(run: QualityResult, variant: str) -> dict[str, Scored]:
        return {
            s.hole_id: s
            for s in run.scored
            if s.workload == workload and s.workspace == workspace and s.variant == variant
        }

    raw, raw_ref = by_hole(result, "raw"), by_hole(reference, "raw")
    shown, shown_ref = by_hole(result, "stop+trim"), by_hole(reference, "stop+trim")
    return [
        (
            raw[h].completion == raw_ref[h].completion,
            shown[h].completion == shown_ref[h].completion,
            shown[h].exact,
            shown_ref[h].exact,
        )
        for h in raw
        if h in raw_ref and h in shown and h in shown_ref
    ]
