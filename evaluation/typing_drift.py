"""Typing line after line, without a model: the tokens each keystroke's prompt re-prefills, anchored or not.

A typist writes lines of real files in order (each line typed anew into the file as it stands, the rest of
the file after it), a keystroke every few characters and a pause at the end of every line. Each keystroke's
prompt is built as the daemon builds it (``context/prompt.py``, the daemon's layout and budget, snippets from
the other files of the corpus, token healing) and is what the KV cache must hold next: its tokens past the
longest prefix it shares with the cache are re-prefilled before the first decoding step. At a pause the
daemon prefills the prompt at the cursor in the background (built ``settled``). Two ways of choosing the
prompt's slow parts (snippets, prefix start) are compared on the same keystrokes:

- ``fresh``: chosen anew at every prompt by the stateless builder (a document's prompts share nothing but the
  cache);
- ``anchored``: kept per document between prompts (``context/anchors.py``, as the daemon does).

Printed per mode: tokens a keystroke re-prefills (mean, p50, p90, max), keystrokes that re-prefill more than
:data:`CLIFF_TOKENS` beyond their prompt's suffix (in "psm" every key re-prefills the suffix), tokens the
pauses prefill, and how much code the prompts hold (prefix and context tokens):
the anchors must not buy their savings with much less code in view. With a model (:func:`completer`), every
few lines the keystroke right after Enter is also completed as the daemon completes it (greedy, stop rules,
trimming) and its first line scored against the real line: what the editor would show, per mode.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from lookahead_lsp.context.anchors import PromptAnchors
from lookahead_lsp.context.definitions import CursorContext, cursor_context
from lookahead_lsp.context.prompt import BuiltPrompt, PromptInput
from lookahead_lsp.decoder.greedy import GreedyDecoder
from lookahead_lsp.decoder.ids import common_prefix_len
from lookahead_lsp.evaluation.report import markdown_table
from lookahead_lsp.evaluation.speed import ContextBuilder, model_limits
from lookahead_lsp.evaluation.workloads import SourceFile
from lookahead_lsp.lsp_server.completion import Cursor, decode_completion, plan_completion

MODES = ("fresh", "anchored")
CLIFF_TOKENS = 128  # a keystroke that re-prefills this many more than its suffix pays for a moved prompt head
KEY_CHARS = 4  # a keystroke's prompt every this many characters typed (and at the line's start and end)

Complete = Callable[[BuiltPrompt, str, int, str], str]
"""(prompt, document text, cursor offset, path) -> the completion the editor shows."""


@dataclass
class Drift:
    """One mode over the typed lines."""

    mode: str
    lines: int = 0
    keystrokes: list[int] = field(default_factory=list)  # tokens re-prefilled per keystroke
    cliffs: int = 0  # keystrokes that re-prefilled more than their suffix and CLIFF_TOKENS
    pauses: list[int] = field(default_factory=list)  # tokens the background prefill re-prefilled per pause
    prefix_tokens: list[int] = field(default_factory=list)  # per keystroke's prompt
    context_tokens: list[int] = field(default_factory=list)
    completed: int = 0  # line starts completed (with a model)
    exact: int = 0  # of them, first lines shown exactly as the real line

    def row(self) -> list[str]:
        keys = sorted(self.keystrokes)
        p90 = keys[min(len(keys) - 1, int(len(keys) * 0.9))] if keys else 0
        cliffs = self.cliffs
        return [
            self.mode,
            str(self.lines),
            str(len(keys)),
            f"{statistics.fmean(keys):.1f}" if keys else "-",
            str(keys[len(keys) // 2]) if keys else "-",
            str(p90),
            str(keys[-1]) if keys else "-",
            f"{cliffs} ({cliffs / max(self.lines, 1):.2f}/line)",
            f"{statistics.fmean(self.pauses):.1f}" if self.pauses else "-",
            f"{statistics.fmean(self.prefix_tokens):.0f}" if self.prefix_tokens else "-",
            f"{statistics.fmean(self.context_tokens):.0f}" if self.context_tokens else "-",
            f"{self.exact}/{self.completed}" if self.completed else "-",
        ]


HEADER = [
    "mode",
    "lines",
    "keystrokes",
    "re-prefill mean",
    "p50",
    "p90",
    "max",
    f"keystrokes > suffix + {CLIFF_TOKENS}",
    "pause prefill mean",
    "prefix tokens",
    "context tokens",
    "first line exact",
]


def typing_events(text: str, first_line: int, lines: int) -> Iterator[tuple[str, int, bool]]:
    """(document text, cursor offset, pause?) as lines ``first_line ..`` of ``text`` are typed anew in order: a
    keystroke at the line's start (Enter), every :data:`KEY_CHARS` characters and at its end, then a pause."""
    starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]
    for line in range(first_line, min(first_line + lines, len(starts) - 1)):
        start, end = starts[line], starts[line + 1] - 1  # the line without its newline
        rest = text[end:]
        typed = [0, *range(KEY_CHARS, end - start, KEY_CHARS), end - start] if end > start else [0]
        for n in typed:
            yield text[:start] + text[start : start + n] + rest, start + n, False
        yield text, end, True


class _Cache:
    """What the KV cache holds: the last prompt prefilled."""

    def __init__(self) -> None:
        self.ids: list[int] = []

    def prefill(self, ids: list[int]) -> int:
        shared = common_prefix_len(self.ids, ids)
        self.ids = ids
        return len(ids) - shared


def type_file(
    context: ContextBuilder,
    source: SourceFile,
    first_line: int,
    lines: int,
    mode: str,
    complete: Complete | None = None,
    every: int = 4,
) -> Drift:
    """Type ``lines`` lines of ``source`` from ``first_line`` in one mode (:data:`MODES`); with ``complete``,
    complete the start of every ``every``-th line and score its first line."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; known: {', '.join(MODES)}")
    drift = Drift(mode)
    anchors = PromptAnchors()
    cache = _Cache()
    builder = context.prompt_builder if mode == "anchored" else context.prompt_builder.stateless()
    for text, offset, pause in typing_events(source.text, first_line, lines):

        def query(text: str = text, offset: int = offset) -> CursorContext:
            return cursor_context(context.snippet_index, context.symbols, source.path, text, offset)

        if mode == "anchored":
            request = anchors.input_for(source.path, text, offset, context.repo_name, pause, query)
        else:
            found = query()
            request = PromptInput(source.path, text, offset, context.repo_name, found.snippets, imports=found.imports)
        built: BuiltPrompt = builder.build(request)
        if mode == "anchored":
            anchors.remember(request, built)
        tokens = cache.prefill(built.token_ids)
        if pause:
            drift.pauses.append(tokens)
            drift.lines += 1
        else:
            at_line_start = offset == 0 or text[offset - 1] == "\n"
            if complete is not None and at_line_start and drift.lines % every == 0:
                shown = complete(built, text, offset, source.path)
                real = source.text[offset:].split("\n", 1)[0]
                drift.completed += 1
                drift.exact += bool(real.strip()) and shown.split("\n", 1)[0].rstrip() == real.rstrip()
            drift.keystrokes.append(tokens)
            drift.cliffs += tokens > built.counts["suffix"] + CLIFF_TOKENS
            drift.prefix_tokens.append(built.counts["prefix"])
            drift.context_tokens.append(built.counts["context"])
    return drift


def completer(loaded: Any, max_new_tokens: int) -> Complete:
    """Completions as the daemon makes them (greedy: the same text as lookahead) on one KV cache of their own."""
    decoder = GreedyDecoder(loaded.model)
    limits = model_limits(loaded, max_new_tokens)

    def complete(built: BuiltPrompt, text: str, offset: int, path: str) -> str:
        plan = plan_completion(loaded.tokenizer, built, Cursor(text, offset, path), limits)
        return decode_completion(decoder, plan).text

    return complete


def merge(drifts: list[Drift]) -> Drift:
    """One mode's drifts over several files as one."""
    merged = Drift(drifts[0].mode)
    for d in drifts:
        merged.lines += d.lines
        merged.keystrokes += d.keystrokes
        merged.cliffs += d.cliffs
        merged.pauses += d.pauses
        merged.prefix_tokens += d.prefix_tokens
        merged.context_tokens += d.context_tokens
        merged.completed += d.completed
        merged.exact += d.exact
    return merged


def markdown(rows: list[Drift]) -> str:
    """The modes as a markdown table."""
    return markdown_table(HEADER, [d.row() for d in rows])
