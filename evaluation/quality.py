"""Completion quality on the holes: exact match, edit similarity, repeating the suffix, running past the block.

Per hole, the model decodes twice (greedy-identical lookahead, so the numbers are those of greedy): once
with workspace context (snippets of the other files in the prompt, the workspace draft source) and once
without. Each raw output is then scored three ways:

- ``raw``: the decoded text as is (no stop rules, no trimming);
- ``stop``: cut where the stop rules (``context/postprocess.py``) would have stopped decoding; the stop
  function is applied token by token to the raw tokens, which is exactly where it stops a greedy decode;
- ``stop+trim``: that, then trimmed as the daemon trims before showing it;
- ``stop+trim+deadlines`` (with ``deadlines_after_ms``): what the daemon would show with its default deadlines
  (``lineDeadlineMs``, ``multilineDeadlineMs``) on this machine, had decoding begun that many milliseconds
  after the keystroke: the stop function is replayed over the decode's recorded step times (:class:`StepClock`).

Metrics against the removed code (both sides with trailing whitespace stripped): exact match; edit
similarity ``1 - Levenshtein / max(len)``; ``repeats suffix``: a line of the completion equals the first
non-blank line after the hole (stripped, at least 4 characters); ``past block``: the completion goes on past
the hole's block, i.e. a later line is indented less than the hole's first line, or a single-line hole got
more than one line.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lookahead_lsp.context.postprocess import WordEnd, make_stop_fn
from lookahead_lsp.decoder.types import Decoder
from lookahead_lsp.evaluation.speed import ContextBuilder, Progress
from lookahead_lsp.evaluation.workloads import Hole
from lookahead_lsp.lsp_server.completion import Cursor, Limits, finish_completion, plan_completion, visible_text
from lookahead_lsp.lsp_server.config import Config

VARIANTS = ("raw", "stop", "stop+trim")
DEADLINE_VARIANT = "stop+trim+deadlines"
MIN_SUFFIX_LINE = 4


def levenshtein(a: str, b: str) -> int:
    """Edit distance (insertions, deletions, substitutions) in O(len(a) * len(b)) time, O(len(b)) memory."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def edit_similarity(completion: str, reference: str) -> float:
    a, b = completion.rstrip(), reference.rstrip()
    longest = max(len(a), len(b))
    return 1.0 - levenshtein(a, b) / longest if longest else 1.0


def repeats_suffix(completion: str, suffix: str) -> bool:
    """Whether the completion holds the first non-blank line that follows the hole."""
    first = next((line.strip() for line in suffix.split("\n") if line.strip()), "")
    return len(first) >= MIN_SUFFIX_LINE and first in (line.strip() for line in completion.split("\n"))


def runs_past_block(completion: str, hole: Hole) -> bool:
    """Whether the completion goes on past the hole's block (see the module docstring)."""
    lines = [line for line in completion.split("\n") if line.strip()]
    if "\n" not in hole.middle:
        return len(lines) > 1
    cursor_line = hole.prefix.rsplit("\n", 1)[-1]
    indent = len(cursor_line) - len(cursor_line.lstrip())
    return any(len(line) - len(line.lstrip()) < indent for line in completion.split("\n")[1:] if line.strip())


@dataclass(frozen=True)
class Scored:
    """One completion of one hole, scored."""

    hole_id: str
    workload: str
    kind: str
    workspace: bool
    variant: str
    completion: str
    exact: bool
    similarity: float
    repeats_suffix: bool
    past_block: bool

    def to_dict(self) -> dict[str, Any]:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in self.__dict__.items()}


def score(hole: Hole, completion: str, workspace: bool, variant: str) -> Scored:
    return Scored(
        hole.id,
        hole.workload,
        hole.kind,
        workspace,
        variant,
        completion,
        exact=completion.rstrip() == hole.middle.rstrip(),
        similarity=edit_similarity(completion, hole.middle),
        repeats_suffix=repeats_suffix(completion, hole.suffix),
        past_block=runs_past_block(completion, hole),
    )


def stop_point(stop: Callable[[Sequence[int]], int | None], tokens: Sequence[int]) -> int:
    """How many tokens a greedy decode with ``stop`` keeps: ``stop`` is called after each new token."""
    for n in range(1, len(tokens) + 1):
        keep = stop(tokens[:n])
        if keep is not None:
            return max(keep, 0)
    return len(tokens)


@dataclass
class StepClock:
    """A stop callback that stops nothing: it notes when the decoder reached each length (once per step)."""

    times: list[tuple[int, float]] = field(default_factory=list)

    def __call__(self, tokens: Sequence[int]) -> int | None:
        self.times.append((len(tokens), time.perf_counter()))
        return None


def with_deadlines(
    make_stop: Callable[..., Callable[[Sequence[int]], int | None]],
    tokens: Sequence[int],
    clock: StepClock,
    key_time: float,
    line_ms: int | None,
    block_ms: int | None,
    cap_ms: int | None = None,
) -> tuple[int, Any]:
    """Replay a decode's steps against the daemon's deadlines counted from ``key_time``: (tokens kept, the
    :class:`~context.postprocess.WordEnd` of the runaway-line cap that cuts the kept text, or None).
    ``make_stop(out_of_time, line_end, line_late=...)`` builds the daemon's stop function."""
    now = [key_time]

    def late(ms: int | None) -> Callable[[], bool] | None:
        return None if ms is None else (lambda: (now[0] - key_time) * 1000.0 >= ms)

    cap_clock = late(cap_ms)
    line_end = WordEnd(cap_clock) if cap_clock is not None else None
    stop = make_stop(late(block_ms), line_end, line_late=late(line_ms))
    for length, at in clock.times:
        now[0] = at
        keep = stop(tokens[:length])
        if keep is not None:
            return max(keep, 0), line_end
    return len(tokens), line_end


@dataclass
class QualityResult:
    meta: dict[str, Any]
    holes: list[Hole]
    scored: list[Scored] = field(default_factory=list)

    @property
    def workloads(self) -> list[str]:
        return list(dict.fromkeys(h.workload for h in self.holes))

    @property
    def groups(self) -> list[str]:
        """Each workload, then each midline kind (cursor between tokens / inside a token) on its own."""
        kinds = [f"midline:{k}" for k in dict.fromkeys(h.kind for h in self.holes if h.workload == "midline")]
        return [*self.workloads, *kinds]


@dataclass(frozen=True)
class QualitySummary:
    workload: str
    workspace: bool
    variant: str
    holes: int
    exact: int
    similarity: float  # mean
    repeats_suffix: int
    past_block: int

    def to_dict(self) -> dict[str, Any]:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in self.__dict__.items()}


def summarize_quality(result: QualityResult) -> list[QualitySummary]:
    """One row per (workload, midline kind or "all"; workspace on/off; variant)."""
    rows = []
    for workload in [*result.groups, "all"]:
        for workspace in (True, False):
            for variant in (*VARIANTS, DEADLINE_VARIANT):
                group = [
                    s
                    for s in result.scored
                    if workload in ("all", s.workload, f"{s.workload}:{s.kind}")
                    and s.workspace == workspace
                    and s.variant == variant
                ]
                if group:
                    rows.append(
                        QualitySummary(
                            workload,
                            workspace,
                            variant,
                            len(group),
                            sum(s.exact for s in group),
                            sum(s.similarity for s in group) / len(group),
                            sum(s.repeats_suffix for s in group),
                            sum(s.past_block for s in group),
                        )
                    )
    return rows


def run_quality(
    decoder: Decoder,
    builder: ContextBuilder,
    holes: Sequence[Hole],
    limits: Limits,
    meta: dict[str, Any],
    progress: Progress | None = None,
    deadlines_after_ms: float | None = None,
    workspaces: Sequence[bool] = (True, False),
) -> QualityResult:
    """Decode each hole with workspace context and without (``workspaces``: which of the two) and score every
    variant (with ``deadlines_after_ms``, also :data:`DEADLINE_VARIANT`).

    The plan is the daemon's (``lsp_server/completion.py``); the decode runs without stopping (its stop
    callback only notes the step times) and the plan's stop function is applied to its tokens afterwards."""
    tokenizer = builder.tokenizer
    result = QualityResult(meta, list(holes))
    started = time.perf_counter()
    for i, hole in enumerate(holes):
        cursor = Cursor(hole.text_before_typing, len(hole.prefix), hole.path)
        for workspace in workspaces:
            inputs = builder.inputs(hole, workspace)
            plan = plan_completion(tokenizer, inputs.built, cursor, limits, inputs.extra_drafts)
            clock = StepClock()
            called = time.perf_counter()
            out = decoder.generate(dataclasses.replace(plan.request, stop=clock))
            kept = out.token_ids[: stop_point(plan.stop, out.token_ids)]
            truncated = len(kept) == len(out.token_ids) and out.stats.finish_reason == "length"
            completions = {
                "raw": visible_text(plan, out.token_ids),
                "stop": visible_text(plan, kept),
                "stop+trim": finish_completion(plan, kept, truncated),
            }
            if deadlines_after_ms is not None:
                config = Config()
                key_time = called + (out.stats.prefill_ms - deadlines_after_ms) / 1000.0
                n, line_end = with_deadlines(
                    functools.partial(make_stop_fn, plan.text_of, plan.rules, plan.healed_text),
                    out.token_ids,
                    clock,
                    key_time,
                    config.line_deadline_ms,
                    config.multiline_deadline_ms,
                    config.line_cap_ms,
                )
                cut_short = n == len(out.token_ids) and out.stats.finish_reason == "length"
                late_plan = dataclasses.replace(plan, line_end=line_end)
                completions[DEADLINE_VARIANT] = finish_completion(late_plan, out.token_ids[:n], cut_short)
            for variant, completion in completions.items():
                result.scored.append(score(hole, completion, workspace, variant))
        if progress is not None:
            elapsed = time.perf_counter() - started
            progress(f"hole {i + 1}/{len(holes)} {hole.id} ({elapsed:.0f} s)", (i + 1) / len(holes))
    return result
