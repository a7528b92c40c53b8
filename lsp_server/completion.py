"""The completion core: from a built prompt to the text to insert, a chain of small free functions.

In run order::

    plan_completion    analyze (the shape at the cursor) -> stop rules -> stop function (with the deadline
                       clocks) -> token-healing constraint, and no stray closer on a blank line
                       (:func:`~context.postprocess.completion_constraint`) -> DecodeRequest
    decode_completion  backend.generate (the decoder or the remote engine: token ids only), then
      finish_completion  strip the re-typed healed characters (:func:`visible_text`) -> trim

:func:`plan_completion` then :func:`decode_completion` run for the daemon (``lsp_server/pipeline.py:
complete``), the layout curve (``evaluation/layouts.py``) and the decoder replay (``evaluation/remote_bench.py``).
``eval`` (``evaluation/quality.py``) decodes once without stopping and applies the plan's stop function and
:func:`finish_completion` afterwards, to score each stage. ``bench`` (``evaluation/speed.py``) builds its
requests with :func:`decode_request` and no stop rules: its lossless check compares raw token ids.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from lookahead_lsp.context.healing import healing_constraint, strip_healed
from lookahead_lsp.context.postprocess import (
    Publish,
    StopRules,
    WordEnd,
    completion_constraint,
    make_stop_fn,
    text_decoder,
    trim_by,
)
from lookahead_lsp.context.prompt import BuiltPrompt
from lookahead_lsp.context.syntax import CompletionShape, analyze
from lookahead_lsp.decoder.drafts import DraftSource, SequenceNgrams
from lookahead_lsp.decoder.types import CancelToken, Decoder, DecodeRequest, DecodeResult, StopFn, TokenConstraint
from lookahead_lsp.lsp_server.config import BlockEnd

SUFFIX_CHARS = 20_000  # the text after the cursor that stop rules and trimming look at

Clock = Callable[[], bool]
"""A deadline: says True once its time has passed."""


@dataclass(frozen=True)
class Cursor:
    """The document state a completion is for: its text, the cursor (a ``str`` index), its path and language."""

    text: str
    offset: int
    path: str
    language_id: str | None = None  # an LSP languageId; None: by the path's extension

    @property
    def suffix(self) -> str:
        return self.text[self.offset : self.offset + SUFFIX_CHARS]


@dataclass(frozen=True)
class Limits:
    """How long a completion may run: tokens, end-of-text ids and the deadline clocks (None: no deadline)."""

    max_new_tokens: int
    eos_ids: frozenset[int] = frozenset()
    block_deadline: Clock | None = None  # once it says so, a multi-line completion ends at its next complete line
    line_deadline: Clock | None = None  # once it says so on the first line, the completion ends where that line does
    line_cap: Clock | None = None  # once it says so, a runaway first line ends where its current word does
    block_end: BlockEnd = "indent"  # where a block ends: a line dedenting out of it, or the model's end-of-text


@dataclass(frozen=True)
class Plan:
    """One completion ready to decode: its request and what finishing its output needs."""

    shape: CompletionShape
    suffix: str
    rules: StopRules
    healed_text: str  # characters before the cursor that healing removed from the prompt
    text_of: Callable[[Sequence[int]], str]
    line_end: WordEnd | None  # where a runaway line ended (set while decoding; None when deadlines only publish)
    stop: StopFn  # the request's stop function (fresh: it keeps the length it last saw)
    request: DecodeRequest


@dataclass(frozen=True)
class Decoded:
    """A decoded completion: the text to insert and the decoder's result (token ids, statistics)."""

    text: str
    result: DecodeResult


class StageClock:
    """Milliseconds per named stage."""

    def __init__(self, **already: float) -> None:
        self.ms: dict[str, float] = dict(already)
        self._started = time.perf_counter()

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.ms[name] = self.ms.get(name, 0.0) + (time.perf_counter() - start) * 1000.0

    def total(self) -> dict[str, float]:
        return {
            **self.ms,
            "total": self.ms.get("queue", 0.0) + (time.perf_counter() - self._started) * 1000.0,
        }


def decode_completion(backend: Decoder, plan: Plan, clock: StageClock | None = None) -> Decoded:
    """Decode a planned completion and finish it; ``clock`` (if given) gets its "prefill", "decode" and
    "postprocess" stages."""
    clock = clock or StageClock()
    result = backend.generate(plan.request)
    clock.ms["prefill"] = result.stats.prefill_ms
    clock.ms["decode"] = result.stats.decode_ms
    with clock.stage("postprocess"):
        text = finish_completion(plan, result.token_ids, truncated=result.stats.finish_reason == "length")
    return Decoded(text, result)


def plan_completion(
    tokenizer: Any,
    built: BuiltPrompt,
    cursor: Cursor,
    limits: Limits,
    drafts: Sequence[DraftSource] = (),
    cancel: CancelToken | None = None,
    publish: Publish | None = None,
) -> Plan:
    """The shape at the cursor, its stop rules and stop function, the healing constraint and the request.

    ``publish``: the deadlines are publish points (progressive ghost text): each one calls it with the tokens
    and the visible text it would have ended with, and decoding goes on (:func:`~context.postprocess.make_stop_fn`)."""
    shape = analyze(cursor.text, cursor.offset, cursor.language_id, cursor.path)
    rules = StopRules(shape, cursor.suffix, dedent=limits.block_end == "indent")
    text_of = text_decoder(tokenizer)
    line_end = WordEnd(limits.line_cap) if limits.line_cap is not None else None
    stop = make_stop_fn(
        text_of,
        rules,
        built.healed_text,
        limits.block_deadline,
        line_end,
        line_late=limits.line_deadline,
        publish=publish,
    )
    healing = healing_constraint(tokenizer, built.healing) if built.healing else None
    constraint = completion_constraint(tokenizer, shape, healing)
    request = decode_request(built, limits, drafts, stop=stop, constraint=constraint, cancel=cancel, slot=cursor.path)
    ended_by = line_end if publish is None else None  # a published cut never ends the text
    return Plan(shape, cursor.suffix, rules, built.healed_text, text_of, ended_by, stop, request)


def decode_request(
    built: BuiltPrompt,
    limits: Limits,
    drafts: Sequence[DraftSource] = (),
    *,
    stop: StopFn | None = None,
    constraint: TokenConstraint | None = None,
    cancel: CancelToken | None = None,
    slot: str | None = None,
) -> DecodeRequest:
    """The decoder's request for ``built``: the suffix after the cursor is the first extra draft source; ``slot``
    the KV cache it continues (the document's path: :mod:`decoder.slots`)."""
    return DecodeRequest(
        prompt_ids=built.token_ids,
        max_new_tokens=limits.max_new_tokens,
        eos_ids=limits.eos_ids,
        stop=stop,
        cancel=cancel,
        constraint=constraint,
        drafts=[SequenceNgrams("suffix", built.suffix_ids), *drafts],
        slot=slot,
    )


def visible_text(plan: Plan, token_ids: Sequence[int]) -> str:
    """The decoded text from the cursor on: without the healed characters, cut where a late line ended."""
    text = strip_healed(plan.text_of(token_ids), plan.healed_text)
    return plan.line_end.apply(text) if plan.line_end is not None else text


def finish_completion(plan: Plan, token_ids: Sequence[int], truncated: bool) -> str:
    """The text to insert; ``truncated``: decoding ended on the token limit (its last line is not whole)."""
    return trim_visible(plan, visible_text(plan, token_ids), truncated)


def trim_visible(plan: Plan, visible: str, truncated: bool) -> str:
    """The text to insert for the visible decoded text (from the cursor on)."""
    return trim_by(plan.rules, visible, truncated=truncated)
