"""Where a completion's text must stop, while decoding and after it: stop rules on text, the StopFn adapter, trim.

Rules, by the :class:`~context.syntax.CompletionShape` at the cursor (all are pure functions of the text):
- ``"line"``: stop at the first line break; in the middle of a line also where the completion reaches the rest
  of the line (its remaining text starts with that rest at bracket depth 0: cut before it);
- ``"block"``: stop where a line dedents out of the enclosing block (indentation languages, outside brackets;
  not for a model that ends its middles itself: :attr:`StopRules.dedent`), where a new unindented line follows
  a blank line at the top level, and where the completion starts repeating the next non-blank lines after the
  cursor;
- any shape: stop before a closing bracket that the completion did not open and that the code before the cursor
  does not leave open (it is already there after the cursor); a block the cursor opens, still unclosed in the
  document, ends with the line that closes it.

:meth:`StopRules.check` only reports cuts that more text cannot undo, so it is safe to call after every step;
:func:`trim` applies the rules to the final text (its last line counts as complete) and tidies the result.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from lookahead_lsp.context.healing import VocabIndex, is_word_char, strip_healed, vocab_index
from lookahead_lsp.context.languages import LanguageSpec
from lookahead_lsp.context.syntax import CompletionShape, bracket_events, indent_width, opens_block
from lookahead_lsp.decoder.types import StopFn, TokenConstraint

CLOSING = b")]};,"  # what a line of closing brackets alone holds
REPEAT_LINES = 2  # suffix lines compared when the first one is too short to be telling
MIN_TELLING_LINE = 8  # a suffix line this long (stripped, with a letter or digit) is telling on its own


@dataclass(frozen=True)
class _Brackets:
    """Bracket depth of a completion at any index (depth counts the completion's own brackets from 0)."""

    indices: list[int]
    depths: list[int]  # depth after each event

    def depth_at(self, index: int) -> int:
        """Depth just before ``text[index]``."""
        k = bisect.bisect_left(self.indices, index)
        return self.depths[k - 1] if k else 0


def _brackets(text: str, shape: CompletionShape) -> _Brackets:
    indices: list[int] = []
    depths: list[int] = []
    depth = 0
    for index, delta in bracket_events(text, shape.spec):
        depth += delta
        indices.append(index)
        depths.append(depth)
    return _Brackets(indices, depths)


@dataclass(frozen=True)
class _Line:
    start: int
    text: str
    complete: bool  # a line break follows (or the completion is final)


def _lines(text: str, final: bool) -> list[_Line]:
    out: list[_Line] = []
    start = 0
    for part in text.split("\n"):
        end = start + len(part)
        out.append(_Line(start, part.rstrip("\r"), final or end < len(text)))
        start = end + 1
    return out


def _telling(line: str) -> bool:
    stripped = line.strip()
    return len(stripped) >= MIN_TELLING_LINE and any(c.isalnum() for c in stripped)


@dataclass(frozen=True)
class StopRules:
    """The stop rules for one completion: the shape at the cursor and the document text after it.

    ``dedent``: a line that dedents out of the cursor's block ends the completion. Off for a model that ends its
    middles itself with its end-of-text token (the 1.5B: ``lsp_server/config.py``'s ``MODEL_BLOCK_ENDS``), where
    the lines after the block are often the hole's (the rest of the function): then a line ends it only where it
    leaves the definition the cursor is in, or reaches the first column (:attr:`dedent_floor`)."""

    shape: CompletionShape
    suffix: str = ""
    dedent: bool = True

    @cached_property
    def rest_key(self) -> str:
        return self.shape.line_rest.strip()

    @cached_property
    def next_lines(self) -> list[str]:
        """The first non-blank lines after the cursor's line, with their indentation (what a block must not
        repeat: a ``}`` at another indentation closes another block)."""
        after_line = self.suffix.split("\n", 1)[1] if "\n" in self.suffix else ""
        found: list[str] = []
        for line in after_line.split("\n"):
            if line.strip():
                found.append(line.rstrip())
                if len(found) == REPEAT_LINES:
                    break
        return found

    @cached_property
    def dedent_floor(self) -> int:
        """The least indentation (columns) a line of the completion may have in an indentation language: the
        cursor's block's; without ``dedent``, one more than the outermost ``def`` line around the cursor (a
        nested function's hole may go on in the function around it; a method's ``def`` is the outermost one in
        its class), 1 where there is none: a line at the first column leaves every block the cursor is in."""
        width = indent_width(self.shape.indent)
        if self.dedent or width == 0:
            return width
        scope = self.shape.scope_indent
        return min(width, 1 if scope is None else scope + 1)

    def check(self, completion: str) -> int | None:
        """The char index where ``completion`` must be cut, or ``None`` to go on decoding."""
        return _find_cut(completion, self, final=False)

    def complete_lines(self, completion: str) -> int | None:
        """Where ``completion`` ends if it must end now: after its last line that has code and closes every
        bracket opened before it (None: no such line yet)."""
        brackets = _brackets(completion, self.shape)
        end = completion.rfind("\n")
        while end > 0 and completion[:end].strip():
            if brackets.depth_at(end) <= 0:
                return end
            end = completion.rfind("\n", 0, end)
        return None

    def final_cut(self, completion: str) -> int:
        """Like :meth:`check` for a finished completion: its last line is complete; no cut is its length."""
        cut = _find_cut(completion, self, final=True)
        return len(completion) if cut is None else cut


def _first(*cuts: int | None) -> int | None:
    found = [c for c in cuts if c is not None]
    return min(found) if found else None


def _find_cut(text: str, rules: StopRules, final: bool) -> int | None:
    shape = rules.shape
    if shape.kind == "line":
        newline = _first(*(i for i in (text.find("\n"), text.find("\r")) if i >= 0))
        line = text if newline is None else text[:newline]
        brackets = _brackets(line, shape)
        return _first(
            newline,
            _closer_cut(line, shape, brackets, final),
            _rest_cut(line, rules, brackets, final or newline is not None),
        )
    brackets = _brackets(text, shape)
    return _first(_closer_cut(text, shape, brackets, final), _block_line_cut(text, rules, brackets, final))


def _closer_cut(text: str, shape: CompletionShape, brackets: _Brackets, final: bool) -> int | None:
    """Before a closing bracket that was not pending; after the line closing the pending ones of a block."""
    floor = -shape.may_close
    reopened_until = -1  # the end of a `} else {` line: its brackets are judged by where it ends
    for index, depth in zip(brackets.indices, brackets.depths, strict=True):
        if index < reopened_until:
            continue
        if depth < floor:
            line_start = text.rfind("\n", 0, index) + 1
            closer_led = not text[line_start:index].strip()
            if closer_led and shape.kind == "block":  # `} else {` closes a block and opens the next one
                newline = text.find("\n", index)
                if newline < 0 and not final:
                    return None  # the rest of the line tells
                reopened_until = len(text) if newline < 0 else newline
                if brackets.depth_at(reopened_until) >= floor:
                    continue
            return line_start if closer_led else index
        if depth == floor and floor < 0 and shape.kind == "block":
            newline = text.find("\n", index)
            if newline >= 0:
                return newline
            return len(text) if final else None
    return None


def _rest_cut(line: str, rules: StopRules, brackets: _Brackets, line_done: bool) -> int | None:
    """Where a mid-line completion reaches the rest of the line (at the completion's bracket depth 0)."""
    key = rules.rest_key
    if not key:
        return None
    spec = rules.shape.spec
    found = line.find(key)
    while found >= 0:
        if brackets.depth_at(found) == 0 and _in_code(line, found, spec):
            return _before_space(line, found, rules.shape)
        found = line.find(key, found + 1)
    if not line_done:
        return None
    for index in range(len(line)):  # a finished line whose tail is the start of the rest: drop the tail
        tail = line[index:].lstrip()
        if tail and key.startswith(tail) and brackets.depth_at(index) == 0 and _in_code(line, index, spec):
            return _before_space(line, index, rules.shape)
    return None


def _in_code(text: str, index: int, spec: LanguageSpec) -> bool:
    """Whether ``text[index]`` is code (not in a string or comment): a bracket put there would count."""
    events = list(bracket_events(text[:index] + "(", spec))
    return bool(events) and events[-1][0] == index


def _before_space(line: str, index: int, shape: CompletionShape) -> int:
    """Cut at ``index``, also before spaces there when the rest of the line starts with its own space."""
    if shape.line_rest[:1].isspace():
        return len(line[:index].rstrip(" \t"))
    return index


def _block_line_cut(text: str, rules: StopRules, brackets: _Brackets, final: bool) -> int | None:
    shape = rules.shape
    width = indent_width(shape.indent)
    lines = _lines(text, final)
    for k, line in enumerate(lines):
        if not line.text.strip():
            continue
        outside_brackets = brackets.depth_at(line.start) <= 0
        if k and outside_brackets and not shape.spec.braces and indent_width(line.text) < rules.dedent_floor:
            return line.start
        if k and outside_brackets and width == 0 and not line.text[0].isspace() and not lines[k - 1].text.strip():
            return line.start
        one_telling_line = rules.dedent or k == 0  # a model that ends its middles: a later line needs two
        if _repeats_suffix(lines, k, rules.next_lines, shape.line_indent, one_telling_line):
            return line.start
    return None


def _repeats_suffix(
    lines: list[_Line], k: int, next_lines: list[str], cursor_indent: str, one_telling_line: bool = True
) -> bool:
    """Whether the completion's lines from ``k`` on are the next lines after the cursor, at their indentation
    (the completion's first line starts at the cursor, after ``cursor_indent``). ``one_telling_line``: a telling
    first line (:func:`_telling`) is enough; else all :data:`REPEAT_LINES` must repeat (a model that ends its
    middles itself sees the suffix: one line like it, a second ``return False``, is more often its own)."""
    if not next_lines:
        return False
    wanted = next_lines[:1] if one_telling_line and _telling(next_lines[0]) else next_lines
    got = [(i, line) for i, line in enumerate(lines[k:], k) if line.text.strip()][: len(wanted)]
    return len(got) == len(wanted) and all(
        line.complete and ((cursor_indent if i == 0 else "") + line.text).rstrip() == want
        for (i, line), want in zip(got, wanted, strict=True)
    )


def _balanced_prefix(text: str, shape: CompletionShape) -> str:
    """``text`` cut back to its last line end at bracket depth 0 when it ends inside brackets it opened."""
    brackets = _brackets(text, shape)
    if not brackets.depths or brackets.depths[-1] <= 0:
        return text
    newline = text.rfind("\n")
    while newline > 0:
        if brackets.depth_at(newline) <= 0 and text[:newline].strip():
            return text[:newline]
        newline = text.rfind("\n", 0, newline)
    return text


def _without_bodiless_opener(text: str, rules: StopRules) -> str:
    """``text`` without its last line when that line (not the first) opens a block in an indentation language
    and neither the completion nor the code after the cursor holds its body (``else:`` before a line of the
    suffix at the same indentation: a syntax error shown)."""
    shape = rules.shape
    newline = text.rfind("\n")
    last = text[newline + 1 :]
    if shape.spec.braces or newline < 0 or not opens_block(last, shape.spec):
        return text
    after = rules.next_lines[0] if rules.next_lines else ""
    if after and indent_width(after) > indent_width(last):
        return text
    return text[:newline].rstrip()


def trim(
    completion: str, shape: CompletionShape, suffix: str = "", *, truncated: bool = False, dedent: bool = True
) -> str:
    """The completion to insert: cut at the stop point, tidy, never repeating what follows the cursor.

    ``truncated``: decoding ended on the token limit, so a multi-line completion's last line is dropped.
    ``dedent``: :attr:`StopRules.dedent`.
    """
    return trim_by(StopRules(shape, suffix, dedent), completion, truncated=truncated)


def trim_by(rules: StopRules, completion: str, *, truncated: bool = False) -> str:
    """:func:`trim` under ``rules`` already made (a completion's plan holds them)."""
    shape = rules.shape
    text = completion[: rules.final_cut(completion)]
    if shape.kind == "line":
        return text.rstrip(" \t") if not shape.line_rest or shape.line_rest[:1].isspace() else text
    if truncated and "\n" in text.strip("\n"):
        text = text[: text.rstrip("\n").rfind("\n")]
    text = _without_bodiless_opener(_balanced_prefix(text.rstrip(), shape), rules)
    if shape.line_rest.strip() and "\n" in text:  # a block filled in before a closer on the cursor's line
        text += "\n" + shape.line_indent
    return text


@dataclass
class NoStrayCloser:
    """A :class:`~decoder.types.TokenConstraint` for a blank line where no bracket is left open: its first line
    may not end as closing brackets alone (``}``, ``});``: the stop rules would cut such a line to nothing, so
    the model's next choice is the line to show), while ``} else {`` may still be written. ``inner``: the
    healing constraint, applied first."""

    vocab: VocabIndex
    inner: TokenConstraint | None = None

    def allowed(self, generated: Sequence[int]) -> Sequence[int] | None:
        inner = self.inner.allowed(generated) if self.inner is not None else None
        written = b"".join(self.vocab.token_bytes(t) for t in generated)
        code = written.strip(b" \t")
        if b"\n" in written or code.strip(CLOSING):
            return inner  # the first line is done, or holds more than closers: the stop rules take over
        return self.vocab.excluding(inner, self.vocab.closers_line_end(blank_allowed=not code))


def completion_constraint(
    tokenizer: Any, shape: CompletionShape, healing: TokenConstraint | None
) -> TokenConstraint | None:
    """The decoding constraint at a cursor: ``healing``'s, and on a blank line that leaves no bracket open
    (``shape.may_close`` 0) :class:`NoStrayCloser` around it."""
    if shape.kind != "block" or shape.line_rest.strip() or shape.may_close > 0:
        return healing
    return NoStrayCloser(vocab_index(tokenizer), healing)


def _tokens_to_keep(decode: Callable[[Sequence[int]], str], tokens: Sequence[int], chars: int) -> int:
    """The fewest leading tokens whose text reaches ``chars`` characters (the token crossing the cut included)."""
    low, high = 0, len(tokens)
    while low < high:
        mid = (low + high) // 2
        if len(decode(tokens[:mid])) >= chars:
            high = mid
        else:
            low = mid + 1
    return low


def text_decoder(tokenizer: Any) -> Callable[[Sequence[int]], str]:
    """Token ids -> text with the tokenizer, special tokens kept: the ``decode`` that :func:`make_stop_fn` takes."""

    def decode(ids: Sequence[int]) -> str:
        return str(tokenizer.decode(list(ids), skip_special_tokens=False))

    return decode


Publish = Callable[[Sequence[int], str], None]
"""A publish point: (the tokens kept, the visible text cut there); decoding goes on after it."""


def make_stop_fn(
    decode: Callable[[Sequence[int]], str],
    rules: StopRules,
    healed_text: str = "",
    out_of_time: Callable[[], bool] | None = None,
    line_end: WordEnd | None = None,
    *,
    line_late: Callable[[], bool] | None = None,
    publish: Publish | None = None,
) -> StopFn:
    """Adapt ``rules`` to the decoder's :data:`~decoder.types.StopFn` (tokens in, tokens to keep out).

    ``healed_text``: characters before the cursor that token healing removed from the prompt; the generated
    text starts with them, and the rules apply to what follows. The text is decoded whole at each step
    (cheap for a few hundred tokens) and checked only when it grew.

    The keystroke deadlines (clocks that say when they have passed; a line is never cut by them, except by
    the runaway cap):
    ``out_of_time``: once it says so, a completion with a complete line ends at its last complete line
    (:meth:`StopRules.complete_lines`), so a block on a slow device shows the lines it has instead of waiting.
    ``line_late``: once it says so while the completion is still on its first line, the completion ends where
    that line ends (as llama.cpp's ``t_max_predict_ms`` only counts after the first line break).
    ``line_end``: the hard cap for a runaway first line: once its clock says so, a completion still on its
    first line ends where its current word does (:class:`WordEnd`).

    ``publish``: deadlines become publish points instead of stop points: each cut calls ``publish`` and
    decoding goes on (the stop rules still end it). A block's first complete line is published as soon as it
    is there, deadline or not (the typist sees a whole line while the block is decoded), and so is every
    further complete line (and, after a runaway cap, the rest of the first line).
    """
    last = {"length": -1, "published": -1}
    lines_due = {"now": False}

    def deadline_cut(visible: str) -> int | None:
        first_line = "\n" not in visible
        if first_line and line_late is not None and not lines_due["now"] and line_late():
            lines_due["now"] = True  # late on the first line: it ends with that line
        if not first_line and (publish is not None or lines_due["now"] or (out_of_time and out_of_time())):
            return rules.complete_lines(visible)
        if first_line and line_end is not None:
            return line_end.cut(visible)
        return None

    def stop(tokens: Sequence[int]) -> int | None:
        text = decode(tokens)
        if len(text) == last["length"] or len(text) < len(healed_text):
            return None
        last["length"] = len(text)
        visible = strip_healed(text, healed_text)
        cut = rules.check(visible)
        if cut is not None:
            return _tokens_to_keep(decode, tokens, len(healed_text) + cut)
        cut = deadline_cut(visible)
        if cut is None:
            return None
        keep = _tokens_to_keep(decode, tokens, len(healed_text) + cut)
        if publish is None:
            return keep
        if cut > last["published"]:
            last["published"] = cut
            publish(tokens[:keep], visible[:cut])
        return None

    return stop


class WordEnd:
    """Where a line that ran out of time ends: at the end of the word it was writing when time ran out.

    The first :meth:`cut` after ``out_of_time`` says so notes where the text's trailing word starts (its end,
    if the text ends in a space or punctuation); from then on the cut is the first non-word character at or
    after that point, so a word is never cut in two (``compute_to`` could become ``compute_total``: one more
    step tells). Nothing is cut before the text holds a non-blank character. The decoder keeps whole tokens,
    so :meth:`apply` cuts the final text at the same place (``cut_at``)."""

    def __init__(self, out_of_time: Callable[[], bool]) -> None:
        self.out_of_time = out_of_time
        self.start: int | None = None
        self.cut_at: int | None = None

    def cut(self, text: str) -> int | None:
        if self.start is None:
            if not text.strip() or not self.out_of_time():
                return None
            end = len(text)
            while end > 0 and is_word_char(text[end - 1]):
                end -= 1
            self.start = end
            if end == len(text):
                self.cut_at = len(text.rstrip())
                return self.cut_at
        for i in range(self.start, len(text)):
            if not is_word_char(text[i]):
                self.cut_at = i
                return i
        return None

    def apply(self, text: str) -> str:
        """``text`` (the completion as decoded) cut where :meth:`cut` said, if it did."""
        return text if self.cut_at is None else text[: self.cut_at]
