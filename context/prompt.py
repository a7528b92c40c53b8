"""The Qwen2.5-Coder prompt for one completion, within an exact token budget and in a stable layout.

Repository-level fill-in-the-middle (Qwen2.5-Coder technical report, "Repo-Level FIM format")::

    <|repo_name|>{repo}\\n
    <|file_sep|>{path}\\n{snippet}\\n          (context sections, ordered by path and line)
    <|file_sep|>{current path}\\n<|fim_prefix|>{prefix}<|fim_suffix|>{suffix}<|fim_middle|>

With no section of another file the two header lines go too: the prompt is the report's plain FIM
(``<|fim_prefix|>{prefix}<|fim_suffix|>{suffix}<|fim_middle|>``). Under a header with nothing in it the 1.5B
wrote placeholder comments (``# Your code here``) at a function's first line (docs/benchmarks.md). A request
with no section to choose from reserves no room for them either: the prefix and the suffix take it.

The format above is the ``"psm"`` layout (prefix, suffix, middle), the one the report documents. ``"spm"`` puts the
suffix first (``<|fim_suffix|>{suffix}<|fim_prefix|>{prefix}<|fim_middle|>``) so that typing at the cursor,
which changes only the end of the prefix, leaves everything before it in the KV cache, suffix included; in
"psm" each keystroke invalidates the suffix too. ``PromptBudget.suffix_max`` caps the suffix (a short window
after the cursor: "psm" with little to re-prefill). ``"psm-line"`` keeps the trained order and the whole
suffix yet re-prefills little: what is typed of the cursor's line is not in the prefix but opens the middle,
after ``<|fim_middle|>``, as if the model had written it (the report's own protocol asks at a line start, the
middle being the whole line), so a key on the line changes only the tokens after the suffix, and a line break
prefills the suffix again. ``"psm-lines"`` opens the middle with the cursor's last lines, from a line whose
number is a multiple of ``PromptBudget.middle_lines`` (4): the suffix is prefilled again once every few lines,
and the model continues lines it takes for its own. Which one a model answers better is measured per model
(docs/benchmarks.md): off the report's protocol the 1.5B wrote a placeholder comment at a function's first
line, while the 0.5B Instruct writes better lines continuing its "own".
:data:`PROMPT_LAYOUTS` names the measured combinations (docs/benchmarks.md, "Prompt layout and budget").

Every part is tokenized on its own and the ids concatenated, so each part's count is exact and adding a
character at the cursor changes only the tail of the prefix: the context sections and the head of the prefix
keep their token ids and the decoder's KV prefix reuse hits. For that the prefix starts on a line whose number
is a multiple of ``PromptBudget.snap_lines`` (the start moves only every few lines of typing), and room that an
uncut prefix or suffix leaves unused reaches the context in steps of ``PromptBudget.context_quantum`` tokens
(a cut one's slack does not: it changes as the user types, and the context, which comes first, would move).

A document's earlier prompts can hold the prefix's start still for longer (``PromptInput.anchor_line``, kept by
the daemon per document: ``context/anchors.py``; honoured by a builder made ``anchored``, the daemon's on a CPU,
where a re-prefilled prefix costs seconds, while on a GPU it costs milliseconds and the longest prefix wins):
the start stays on that line while the prefix fits, and when it must move it moves ahead of need, leaving
``PromptBudget.headroom_share`` of the prefix free for the lines typed next. A prompt built in idle time
(``PromptInput.settled``: the background prefill's) already moves it once less than
``PromptBudget.settled_free_share`` is free, so that the re-prefill falls between keystrokes; a document's first
prompt leaves that share free too, so that the keys after it keep its start. A prompt built in idle time may also
be ``grown`` (the daemon's ``idleTokenBudget``: :func:`layout_builder`'s ``grown_from``): a larger budget, its
suffix no longer than on the keystrokes' budget, the room added going to the prefix and the context; the
keystrokes after it keep that budget while its head holds (``context/anchors.py``).

The prompt never exceeds ``PromptBudget.total``: the fixed tokens (special tokens, repo name, path) first; of
the rest the prefix gets up to ``prefix_share`` (cut at its start, on a line boundary where possible), the
suffix up to ``suffix_share`` (cut at its end), the context sections the remainder (best-scored snippets first,
the last one cut at a line boundary). Room the context sections leave (few snippets pass the relevance bar:
``context/snippets.py``) goes to a prefix that had to be cut: the code above the cursor is worth more than
nothing (the snippets, so this room, change only with the cursor's block), with the room a whole suffix leaves
short of a quantum; beside a whole prefix it goes to a suffix that had to be cut. So a file that fits the budget
is seen whole, as the model is asked in its report. An anchored builder's first prompt of a document starts on
the earliest line that fits (not a snapped one): that start becomes the anchor, which holds it from then on.
"""

from __future__ import annotations

import bisect
import copy
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from lookahead_lsp.context.healing import Healing, heal_ids
from lookahead_lsp.context.imports import Statement
from lookahead_lsp.context.snippets import Snippet

Layout = Literal["psm", "spm", "psm-line"]
PromptLayout = Literal["psm", "spm", "psm-short", "psm-line", "psm-lines"]
SHORT_SUFFIX_TOKENS = 32  # the suffix window of "psm-short"
PROMPT_LAYOUTS: dict[str, tuple[Layout, int | None, int]] = {
    "psm": ("psm", None, 1),
    "spm": ("spm", None, 1),
    "psm-short": ("psm", SHORT_SUFFIX_TOKENS, 1),
    "psm-line": ("psm-line", None, 1),
    "psm-lines": ("psm-line", None, 4),
}
"""Named layouts: (token order, suffix cap in tokens or None, ``PromptBudget.middle_lines``)."""
CHARS_PER_TOKEN = 8  # generous: a char window of cap * 8 holds at least cap tokens of ordinary code
MIN_SECTION_TOKENS = 16  # a context section cut to fewer tokens than this is left out
SPARE_STEP = 32  # room the context leaves reaches a cut prefix in steps of this many tokens
SPLIT_SLACK = 2  # "psm-line": tokens the prefix's cap leaves for tokenizing it in two parts
IMPORTS_SHARE = 0.25  # the import lines above a cut prefix: at most this share of its tokens, from the context's room

SPECIAL_TOKENS = ("<|repo_name|>", "<|file_sep|>", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>")


@dataclass(frozen=True)
class PromptBudget:
    """Token budget of a prompt. Defaults suit a CPU (a cold 1536-token prefill costs seconds there; later
    keystrokes reuse the KV cache): half the free room for the code before the cursor, which matters most,
    a sixth for the code after it, the rest for snippets from other files."""

    total: int = 1536
    prefix_share: float = 0.5
    suffix_share: float = 0.16
    snap_lines: int = 8
    context_quantum: int = 128
    suffix_max: int | None = None  # at most this many suffix tokens (a short window after the cursor)
    headroom_share: float = 0.3  # an anchored prefix's start, when it moves, leaves this share of its cap free
    settled_free_share: float = 0.05  # in idle time it moves once less than this share is free (about a line)
    middle_lines: int = 1  # "psm-line" order: the middle starts on the last line whose number is a multiple of this

    def __post_init__(self) -> None:
        if self.total <= 0 or self.snap_lines <= 0 or self.context_quantum <= 0 or self.middle_lines <= 0:
            raise ValueError("prompt budget: total, snap_lines, context_quantum and middle_lines must be positive")
        if self.suffix_max is not None and self.suffix_max < 0:
            raise ValueError("prompt budget: suffix_max must be >= 0")
        if not (self.prefix_share >= 0 and self.suffix_share >= 0 and self.prefix_share + self.suffix_share <= 1):
            raise ValueError("prompt budget: shares must be >= 0 and prefix_share + suffix_share <= 1")
        if not 0 <= self.settled_free_share <= self.headroom_share < 1:
            raise ValueError("prompt budget: 0 <= settled_free_share <= headroom_share < 1")


@dataclass(frozen=True)
class PromptInput:
    """One completion request: the document, the cursor (a ``str`` index) and the chosen snippets."""

    path: str
    text: str
    offset: int
    repo_name: str = ""
    snippets: Sequence[Snippet] = ()
    anchor_line: int | None = None  # the line this document's last prompt started its prefix on (None: stateless)
    settled: bool = False  # built in idle time (background prefill): an anchored start may move ahead of need
    imports: Sequence[Statement] = ()  # the file's import statements: shown above a prefix cut below them
    grown: bool = False  # on the document's idle-time budget: built in idle time, or on a head built so


@dataclass(frozen=True)
class BuiltPrompt:
    """The prompt's ids and what went into them."""

    token_ids: list[int]
    suffix_ids: list[int]  # the suffix part alone: a draft source for the decoder
    prefix_text: str  # the code before the cursor that the prompt holds (after healing)
    suffix_text: str
    sections: tuple[Snippet, ...]  # context sections as included (cut ones hold the kept text)
    counts: dict[str, int]  # tokens per part: header, context, prefix, suffix, total
    layout: Layout = "psm"
    healing: Healing | None = None
    prefix_line: int = 0  # the line of the document the prefix starts on

    @property
    def healed_text(self) -> str:
        """Characters before the cursor that healing removed: the completion re-types them first."""
        return self.healing.removed_text if self.healing else ""


class PromptTooSmall(ValueError):
    """The budget cannot even hold the fixed tokens (special tokens, repo name, path)."""


@dataclass
class _Fitted:
    ids: list[int]
    text: str
    start: int = 0  # where ``text`` starts in the text it was cut from


class PromptBuilder:
    """Builds prompts for one tokenizer; caches the token ids of context sections across keystrokes."""

    def __init__(
        self,
        tokenizer: Any,
        budget: PromptBudget | None = None,
        layout: Layout = "psm",
        heal: bool = False,
        cache_size: int = 256,
        anchored: bool = False,
    ) -> None:
        if layout not in _LAYOUTS:
            raise ValueError(f"unknown prompt layout {layout!r}; known: {', '.join(_LAYOUTS)}")
        self.tokenizer = tokenizer
        self.budget = budget or PromptBudget()
        self.layout: Layout = layout
        self.heal = heal
        self.anchored = anchored  # honour PromptInput.anchor_line (where a moved prompt head costs seconds: a CPU)
        self._special = {name: _special_id(tokenizer, name) for name in SPECIAL_TOKENS}
        self._cache: OrderedDict[str, list[int]] = OrderedDict()
        self._cache_size = cache_size

    def encode(self, text: str) -> list[int]:
        """Token ids of plain text (special-token strings in it stay text)."""
        return list(self.tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True))

    def stateless(self) -> PromptBuilder:
        """This builder with anchors ignored: every prompt the longest that fits, as a document's prompts would be
        chosen with no memory of the last one (its encoding cache shared)."""
        twin = copy.copy(self)
        twin.anchored = False
        return twin

    def _encode_cached(self, text: str) -> list[int]:
        ids = self._cache.get(text)
        if ids is None:
            ids = self.encode(text)
            self._cache[text] = ids
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(text)
        return ids

    def _offsets(self, text: str) -> list[int]:
        """Start offset (in ``text``) of each token of ``text``."""
        encoded = self.tokenizer(text, add_special_tokens=False, split_special_tokens=True, return_offsets_mapping=True)
        return [start for start, _ in encoded["offset_mapping"]]

    def build(self, request: PromptInput) -> BuiltPrompt:
        budget = self.budget
        offset = max(0, min(request.offset, len(request.text)))
        # the repository format only around other files' sections: with none to choose from, no room for it
        framed = bool(request.snippets)
        header = self._header(request.repo_name) if framed else []
        file_header = [self._special["<|file_sep|>"], *self._encode_cached(request.path + "\n")] if framed else []
        fixed = len(header) + len(file_header) + 3  # + fim_prefix, fim_suffix, fim_middle
        available = budget.total - fixed
        if available < 0:
            raise PromptTooSmall(f"a budget of {budget.total} tokens cannot hold the {fixed} fixed tokens")
        prefix_cap = int(available * budget.prefix_share)
        suffix_cap = int(available * budget.suffix_share)
        if budget.suffix_max is not None:
            suffix_cap = min(suffix_cap, budget.suffix_max)
        before = request.text[:offset]
        after = request.text[offset:]
        suffix = self._fit_suffix(after, suffix_cap)
        suffix_whole = len(suffix.text) == len(after)
        suffix_unused = suffix_cap - len(suffix.ids) if suffix_whole else 0
        quantum = budget.context_quantum
        context_cap = available - prefix_cap - suffix_cap + suffix_unused // quantum * quantum
        prefix_cap = max(0, prefix_cap - SPLIT_SLACK) if self.layout == "psm-line" else prefix_cap
        # the import lines above a cut prefix take the context's room: the code above the cursor stays whole (it is
        # also what the decoder drafts from); decided by the prefix that fits its own cap, as steady as its start
        tentative = self._anchored_prefix(before, prefix_cap, request)
        head, head_end = self._imports_head(request, before, tentative, int(prefix_cap * IMPORTS_SHARE))
        context_cap = max(0, context_cap - len(head))
        sections, context_ids = self._fit_sections(request.snippets, context_cap)
        # as steady as the snippets (context_cap moves in whole quanta); a cut section's last partial line is no room;
        # with it the whole suffix's room that did not reach the context (less than a quantum: the text after the
        # cursor changes only by an edit there, and the prefix's start is anchored)
        spare = (context_cap - len(context_ids) + suffix_unused % quantum) // SPARE_STEP * SPARE_STEP
        # a cut prefix takes that room (with none, it is the tentative one: the same fit, not tokenized again)
        prefix = self._anchored_prefix(before, prefix_cap + spare, request) if spare else tentative
        if prefix.start == 0 and len(prefix.ids) <= prefix_cap:  # an uncut one lends its own to the context
            unused = prefix_cap - len(prefix.ids) + suffix_unused
            context_cap = available - prefix_cap - suffix_cap + unused // quantum * quantum
            sections, context_ids = self._fit_sections(request.snippets, context_cap)
            # a cut suffix takes the room the context leaves of its own share (not the prefix's: it shrinks as
            # the user types, and the suffix would move with it)
            more = (available - prefix_cap - suffix_cap - len(context_ids)) // SPARE_STEP * SPARE_STEP
            if more > 0 and not suffix_whole and budget.suffix_max is None:
                suffix = self._fit_suffix(after, suffix_cap + more)
        if before.count("\n", 0, prefix.start) < head_end:
            head = []  # the prefix grew into the import lines: they are in it
        prefix_line = before.count("\n", 0, prefix.start)
        line_middle = self.layout == "psm-line"
        prefix, middle = self._split_middle(prefix, prefix_line) if line_middle else (prefix, _Fitted([], "", offset))
        healing = None
        if self.heal:  # the prompt's last part: the middle's start in psm-line, else the prefix
            healing, healed = _healed(self.tokenizer, middle if line_middle else prefix)
            prefix, middle = (prefix, healed) if line_middle else (healed, middle)
        if not sections:  # the repository format only around other files' sections: alone, the report's plain FIM
            header, file_header = [], []
        parts = _Parts(header, context_ids, file_header, head + prefix.ids, suffix.ids, self._special, middle.ids)
        ids = _LAYOUTS[self.layout](parts)
        counts = {
            "header": len(header) + len(file_header) + 3,
            "context": len(context_ids),
            "prefix": len(prefix.ids) + len(middle.ids),
            "imports": len(head),
            "suffix": len(suffix.ids),
            "total": len(ids),
        }
        return BuiltPrompt(
            ids, suffix.ids, prefix.text + middle.text, suffix.text, sections, counts, self.layout, healing, prefix_line
        )

    def _imports_head(self, request: PromptInput, before: str, prefix: _Fitted, cap: int) -> tuple[list[int], int]:
        """The ids of the import statements that end above ``prefix``'s first line (followed by a blank line), and
        the line after the last of them: at most ``cap`` tokens (:data:`IMPORTS_SHARE` of the prefix's), all of them
        if they fit, else the project's own (``Statement.local``), cut at a statement. None when the prefix is
        whole, or holds an import statement before the cursor (the cursor is among the imports: the prefix's
        start, so the head, would change from key to key)."""
        first_line, cursor_line = before.count("\n", 0, prefix.start), before.count("\n")
        statements = request.imports
        if prefix.start == 0 or any(first_line <= s.start < cursor_line for s in statements):
            return [], 0
        above = [s for s in statements if s.end <= first_line]
        local = [s for s in above if s.local]
        chosen = above
        for chosen in (above, local) if local and len(local) < len(above) else (above,):
            ids = self._encode_cached("\n".join(s.text for s in chosen) + "\n\n") if chosen else []
            if len(ids) <= cap:
                return ids, max((s.end for s in chosen), default=0)
        while len(chosen) > 1:
            chosen = chosen[:-1]
            ids = self._encode_cached("\n".join(s.text for s in chosen) + "\n\n")
            if len(ids) <= cap:
                return ids, max(s.end for s in chosen)
        return [], 0

    def _split_middle(self, prefix: _Fitted, first_line: int) -> tuple[_Fitted, _Fitted]:
        """ "psm-line" order: the prefix up to the start of the last line whose number is a multiple of
        ``PromptBudget.middle_lines`` (1: the cursor's line), and the rest, which opens the middle (written after
        ``<|fim_middle|>``, as if the model had written it). Typing there changes only the tokens after the
        suffix, and a line break moves the split (so the suffix is prefilled again) once every ``middle_lines``."""
        cut = self._middle_cut(prefix.text, first_line)
        head, rest = prefix.text[:cut], prefix.text[cut:]
        return _Fitted(self._encode_cached(head), head, prefix.start), _Fitted(
            self.encode(rest), rest, prefix.start + cut
        )

    def _middle_cut(self, text: str, first_line: int) -> int:
        """Where "psm-line" order splits ``text`` (code before the cursor from line ``first_line`` of the
        document on): the start of its last line whose number is a multiple of ``PromptBudget.middle_lines``."""
        last_line = first_line + text.count("\n")
        split_line = last_line - last_line % self.budget.middle_lines
        return (_nth_line_start(text, split_line - first_line) or 0) if split_line > first_line else 0

    def _tail_ids(self, text: str, first_line: int) -> list[int]:
        """Token ids of ``text`` (code before the cursor from line ``first_line`` on) as the prompt holds them: in
        "psm-line" order its two parts (:meth:`_split_middle`) tokenized apart, the first from the cache (the same
        while the user types within its lines: a key tokenizes only the lines after the split); else as one."""
        if self.layout != "psm-line":
            return self.encode(text)
        cut = self._middle_cut(text, first_line)
        return [*self._encode_cached(text[:cut]), *self.encode(text[cut:])]

    def _header(self, repo_name: str) -> list[int]:
        if not repo_name:
            return []
        return [self._special["<|repo_name|>"], *self._encode_cached(repo_name + "\n")]

    def _anchored_prefix(self, text: str, cap: int, request: PromptInput) -> _Fitted:
        """The prefix within ``cap`` tokens: from ``request.anchor_line`` while that start is still good, else
        from a start that leaves headroom; without an anchor, the longest snapped tail (:meth:`_fit_prefix`),
        leaving ``settled_free_share`` of ``cap`` free in an anchored builder (a document's first prompt: a
        prefix that filled its cap would move at the next key, and its re-prefill fall on that key).

        The anchor is good while the prefix from it fits (in idle time: leaving ``settled_free_share`` of
        ``cap`` free) and is not much shorter than a moved one (the cursor has not moved up towards it)."""
        if not self.anchored:
            return self._fit_prefix(text, cap)
        budget = self.budget
        if request.anchor_line is None:  # the start it takes becomes the anchor: no snapping, as for a moved one
            return self._fit_prefix(text, cap - int(cap * budget.settled_free_share), snap=False)
        keep_free = int(cap * budget.settled_free_share) if request.settled else 0
        headroom = int(cap * budget.headroom_share)
        anchor = _nth_line_start(text, request.anchor_line)
        if anchor is not None:
            tail = text[anchor:]
            ids = self._tail_ids(tail, request.anchor_line)
            # it fits, and the cursor has not moved up towards it (a start chosen now would hold much more)
            if cap - 2 * headroom <= len(ids) <= cap - keep_free:
                return _Fitted(ids, tail, anchor)
        return self._fit_prefix(text, cap - headroom, snap=False)

    def _fit_prefix(self, text: str, cap: int, snap: bool = True) -> _Fitted:
        """The longest tail of ``text`` within ``cap`` tokens, starting on a line (``snap``: a snapped line where
        possible; an anchored start needs no snapping to stay still)."""
        window_start = _line_start_at_or_after(text, max(0, len(text) - cap * CHARS_PER_TOKEN))
        if window_start == 0:
            ids = self._tail_ids(text, 0)
            if len(ids) <= cap:
                return _Fitted(ids, text, 0)
        window = text[window_start:]
        starts = self._offsets(window)
        first_line = text.count("\n", 0, window_start)
        line_starts = [window_start] + [window_start + i + 1 for i, c in enumerate(window) if c == "\n"]
        snapped = [p for n, p in enumerate(line_starts, first_line) if n % self.budget.snap_lines == 0]
        for candidates in (snapped, line_starts) if snap else (line_starts,):
            fitted = self._first_fit(text, candidates, starts, window_start, cap)
            if fitted is not None:
                return fitted
        token_starts = [window_start + s for s in starts]
        return self._first_fit(text, token_starts, starts, window_start, cap) or _Fitted([], "", len(text))

    def _first_fit(
        self, text: str, candidates: list[int], starts: list[int], window_start: int, cap: int
    ) -> _Fitted | None:
        """The earliest start in ``candidates`` whose tail of ``text`` fits ``cap`` (estimated, then exact)."""
        for position in candidates:
            estimate = len(starts) - bisect.bisect_left(starts, position - window_start)
            if estimate > cap + 2:
                continue
            ids = self._tail_ids(text[position:], text.count("\n", 0, position))
            if len(ids) <= cap:
                return _Fitted(ids, text[position:], position)
        return None

    def _fit_suffix(self, text: str, cap: int) -> _Fitted:
        """The longest head of ``text`` within ``cap`` tokens, ending at a line end where possible."""
        window = text[: cap * CHARS_PER_TOKEN]
        ids = self.encode(window)
        if len(ids) <= cap and len(window) == len(text):
            return _Fitted(ids, text)
        starts = self._offsets(window)
        line_ends = [i + 1 for i in range(len(window) - 1, -1, -1) if window[i] == "\n"]
        token_ends = [starts[k] for k in range(min(cap, len(starts) - 1), 0, -1)]
        for end in (*line_ends, *token_ends):
            if bisect.bisect_left(starts, end) > cap + 2:
                continue
            ids = self.encode(window[:end])
            if len(ids) <= cap:
                return _Fitted(ids, window[:end])
        return _Fitted([], "")

    def _fit_sections(self, snippets: Sequence[Snippet], cap: int) -> tuple[tuple[Snippet, ...], list[int]]:
        """Best-scored snippets first while they fit; then ordered by path and line for a stable prompt."""
        chosen: list[tuple[Snippet, list[int]]] = []
        room = cap
        for snippet in sorted(snippets, key=lambda s: (-s.score, s.path, s.start_line)):
            ids = self._section_ids(snippet)
            if len(ids) > room:
                cut = self._cut_section(snippet, room)
                if cut is None:
                    continue
                snippet, ids = cut
            chosen.append((snippet, ids))
            room -= len(ids)
        chosen.sort(key=lambda pair: (pair[0].path, pair[0].start_line))
        return tuple(s for s, _ in chosen), [i for _, ids in chosen for i in ids]

    def _section_ids(self, snippet: Snippet) -> list[int]:
        body = snippet.text if snippet.text.endswith("\n") else snippet.text + "\n"
        return [self._special["<|file_sep|>"], *self._encode_cached(f"{snippet.path}\n{body}")]

    def _cut_section(self, snippet: Snippet, room: int) -> tuple[Snippet, list[int]] | None:
        """``snippet`` cut to its first lines that fit ``room`` tokens, or ``None`` if too little would remain."""
        if room < MIN_SECTION_TOKENS:
            return None
        lines = snippet.text.splitlines(keepends=True)
        low, high = 0, len(lines)  # the most lines that fit, by bisection on the line count
        while low < high:
            mid = (low + high + 1) // 2
            if len(self._section_ids(_with_text(snippet, "".join(lines[:mid])))) <= room:
                low = mid
            else:
                high = mid - 1
        if low == 0:
            return None
        cut = _with_text(snippet, "".join(lines[:low]))
        ids = self._section_ids(cut)
        return (cut, ids) if len(ids) >= MIN_SECTION_TOKENS else None


def _healed(tokenizer: Any, part: _Fitted) -> tuple[Healing, _Fitted]:
    """``part`` (the prompt's last) healed: its last tokens removed for the model to re-type (:func:`heal_ids`)."""
    healing = heal_ids(tokenizer, part.ids)
    kept_text = part.text[: len(part.text) - len(healing.removed_text)]
    return healing, _Fitted(list(healing.kept_ids or ()), kept_text, part.start)


def _with_text(snippet: Snippet, text: str) -> Snippet:
    return Snippet(snippet.path, text, snippet.score, snippet.start_line)


def _nth_line_start(text: str, line: int) -> int | None:
    """Where line ``line`` (0-based) of ``text`` starts, or None if ``text`` has fewer lines."""
    if line < 0:
        return None
    position = 0
    for _ in range(line):
        newline = text.find("\n", position)
        if newline < 0:
            return None
        position = newline + 1
    return position


def _line_start_at_or_after(text: str, position: int) -> int:
    if position <= 0:
        return 0
    newline = text.find("\n", position - 1)
    return position if newline < 0 else newline + 1


def _special_id(tokenizer: Any, token: str) -> int:
    token_id = tokenizer.convert_tokens_to_ids(token)
    if not isinstance(token_id, int) or token_id == getattr(tokenizer, "unk_token_id", None):
        raise ValueError(f"the tokenizer has no {token} token: not a Qwen2.5-Coder tokenizer")
    return token_id


@dataclass
class _Parts:
    header: list[int]
    context: list[int]
    file_header: list[int]
    prefix: list[int]
    suffix: list[int]
    special: dict[str, int] = field(default_factory=dict)
    middle: list[int] = field(default_factory=list)  # "psm-line": the start of the middle, already written


def _psm(parts: _Parts) -> list[int]:
    s = parts.special
    return [
        *parts.header,
        *parts.context,
        *parts.file_header,
        s["<|fim_prefix|>"],
        *parts.prefix,
        s["<|fim_suffix|>"],
        *parts.suffix,
        s["<|fim_middle|>"],
        *parts.middle,
    ]


def _spm(parts: _Parts) -> list[int]:
    s = parts.special
    return [
        *parts.header,
        *parts.context,
        *parts.file_header,
        s["<|fim_suffix|>"],
        *parts.suffix,
        s["<|fim_prefix|>"],
        *parts.prefix,
        s["<|fim_middle|>"],
    ]


_LAYOUTS: dict[str, Callable[[_Parts], list[int]]] = {"psm": _psm, "spm": _spm, "psm-line": _psm}


def layout_budget(name: PromptLayout, total: int) -> tuple[Layout, PromptBudget]:
    """The token order and budget of a named layout (:data:`PROMPT_LAYOUTS`) for ``total`` tokens."""
    if name not in PROMPT_LAYOUTS:
        raise ValueError(f"unknown prompt layout {name!r}; known: {', '.join(PROMPT_LAYOUTS)}")
    order, suffix_max, middle_lines = PROMPT_LAYOUTS[name]
    return order, PromptBudget(total=total, suffix_max=suffix_max, middle_lines=middle_lines)


def layout_builder(
    tokenizer: Any, name: PromptLayout, total: int, heal: bool, anchored: bool = False, grown_from: int | None = None
) -> PromptBuilder:
    """The prompt builder of a named layout and budget: the daemon's and the benchmarks' (one construction).
    ``anchored``: prefixes follow their document's anchor (``PromptInput.anchor_line``). ``grown_from``: the
    builder of a document's prompts grown in idle time from that budget to ``total`` (``PromptInput.grown``):
    the suffix no longer than at ``grown_from`` (a line break prefills the suffix again: its cost stays what it
    was), the room added going to the prefix and the context."""
    order, budget = layout_budget(name, total)
    if grown_from is not None:
        kept = int(grown_from * budget.suffix_share)
        budget = replace(budget, suffix_max=kept if budget.suffix_max is None else min(kept, budget.suffix_max))
    return PromptBuilder(tokenizer, budget, order, heal=heal, anchored=anchored)
