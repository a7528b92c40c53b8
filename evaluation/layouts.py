"""The prompt layout and budget curve: exact match against what a keystroke costs to re-prefill.

For each named layout (``context/prompt.py``'s :data:`~context.prompt.PROMPT_LAYOUTS`) and token budget, every
hole is completed once from a cold KV cache as the daemon completes it (token healing, the stop rules while
decoding, trimming) and scored against the removed code (``evaluation/quality.py``'s ``score``, "stop+trim").
Then the first character of the hole is "typed" and the new prompt is prefilled over what the first request
left in the cache (the decoder's ``warm``): the tokens and milliseconds of that prefill are what every later
keystroke pays before its first decoding step. Both prompts use the same context snippets, so the layout
alone decides what the keystroke invalidates.

Run: ``lookahead-lsp bench layouts --holes 8 --budgets 256,512,1024 --layouts psm,spm,psm-short``.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lookahead_lsp.decoder.greedy import GreedyDecoder
from lookahead_lsp.evaluation.quality import score
from lookahead_lsp.evaluation.speed import ContextBuilder, model_limits
from lookahead_lsp.evaluation.workloads import Hole
from lookahead_lsp.lsp_server.completion import Cursor, decode_completion, plan_completion


@dataclass(frozen=True)
class LayoutRow:
    """One (layout, budget) over the holes."""

    layout: str
    budget: int
    holes: int
    exact: int
    similarity: float  # mean edit similarity
    prompt_tokens: float  # mean
    cold_prefill_ms: float  # median, the first request's whole prompt
    keystroke_tokens: float  # median tokens re-prefilled after one typed character
    keystroke_ms: float  # median

    def cells(self) -> list[Any]:
        return [
            self.layout,
            self.budget,
            f"{self.exact}/{self.holes}",
            f"{self.similarity:.3f}",
            round(self.prompt_tokens),
            round(self.cold_prefill_ms),
            round(self.keystroke_tokens),
            round(self.keystroke_ms),
        ]


HEADERS = [
    "layout",
    "budget",
    "exact",
    "edit sim.",
    "prompt tokens",
    "cold prefill ms (p50)",
    "keystroke re-prefill tokens (p50)",
    "keystroke prefill ms (p50)",
]


def typed_one(hole: Hole) -> Hole:
    """The hole after its first character was typed."""
    return dataclasses.replace(hole, prefix=hole.prefix + hole.middle[:1], middle=hole.middle[1:])


def measure(
    loaded: Any,
    corpus: Any,
    holes: Sequence[Hole],
    layout: str,
    budget: int,
    max_new_tokens: int,
) -> LayoutRow:
    """Complete every hole cold, score it, then time the prefill of the next keystroke's prompt."""
    tokenizer = loaded.tokenizer
    context = ContextBuilder(corpus, tokenizer, budget, heal=True, layout=layout)  # type: ignore[arg-type]
    decoder = GreedyDecoder(loaded.model)
    limits = model_limits(loaded, max_new_tokens)

    exact, similarity, tokens, cold, key_tokens, key_ms = 0, 0.0, [], [], [], []
    for hole in holes:
        snippets = context.snippets(hole)  # the typed keystroke's prompt keeps them: the layout alone decides
        built = context.prompt(hole, snippets=snippets)
        cursor = Cursor(hole.text_before_typing, len(hole.prefix), hole.path)
        decoder.reset()
        decoded = decode_completion(decoder, plan_completion(tokenizer, built, cursor, limits))
        scored = score(hole, decoded.text, True, "stop+trim")
        exact += scored.exact
        similarity += scored.similarity
        tokens.append(len(built.token_ids))
        cold.append(decoded.result.stats.prefill_ms)
        if hole.middle:
            after = context.prompt(typed_one(hole), snippets=snippets).token_ids
            t0 = time.perf_counter()
            key_tokens.append(decoder.warm(after) + 1)  # warm leaves the last token to the request
            key_ms.append((time.perf_counter() - t0) * 1000.0)
    n = len(holes)
    return LayoutRow(
        layout,
        budget,
        n,
        exact,
        similarity / n if n else 0.0,
        statistics.mean(tokens) if tokens else 0.0,
        statistics.median(cold) if cold else 0.0,
        statistics.median(key_tokens) if key_tokens else 0.0,
        statistics.median(key_ms) if key_ms else 0.0,
    )
