"""One completion, top to bottom: snapshot, deadlines, prompt, the completion core, the edit, stats.

The core (shape, stop rules, healing, decode, trim) is ``lsp_server/completion.py``, shared with the benchmarks.
Besides the workspace index and the suffix, a completion drafts from its document's last completion where the
cursor lies within the text that one covered (``lsp_server/previous.py``), and is kept as that document's last.

:func:`complete` runs on the model worker for the server and directly for ``lookahead-lsp complete``.
It returns plain data (:class:`Completion`): the server turns it into LSP items and a stats notification.
:func:`warm` is the idle-time counterpart: it builds the same prompt and only prefills it (background
prefill, so that the next keystroke at that cursor prefills a short tail). Also here, pure: where the
completion's edit ends (:func:`edit_for`), the typed-through shortcut (:func:`typed_through`) and where an
edit left the cursor (:func:`edit_end`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from lookahead_lsp.context.prompt import BuiltPrompt, PromptBuilder, PromptInput
from lookahead_lsp.decoder.backend import Backend
from lookahead_lsp.decoder.drafts import DraftSource
from lookahead_lsp.decoder.types import CancelToken, DecodeStats
from lookahead_lsp.lsp_server.completion import (
    Cursor,
    Limits,
    StageClock,
    decode_completion,
    plan_completion,
    trim_visible,
)
from lookahead_lsp.lsp_server.config import BlockEnd, Config
from lookahead_lsp.lsp_server.documents import Document
from lookahead_lsp.lsp_server.previous import PreviousCompletions

COMPARE_BLOCK = 4096  # characters compared at a time by edit_end


class CompletionEngine(Protocol):
    """What a completion reads from the engine (``lsp_server/engine.py``): the model host's settings, tokenizer,
    prompt builder and backend, and the workspace's prompt input and draft sources."""

    @property
    def config(self) -> Config: ...

    @property
    def tokenizer(self) -> Any: ...

    @property
    def stop_ids(self) -> frozenset[int]: ...

    def backend(self) -> Backend:
        """The backend for the current settings (only the model worker calls it)."""
        ...

    def prompt_builder(self, grown: bool = False) -> PromptBuilder:
        """The prompt builder in force (``grown``: for prompts on the idle-time budget)."""
        ...

    def block_end(self) -> BlockEnd:
        """Where a block ends for the model loaded (``Config.block_end_for``)."""
        ...

    def prompt_input(self, path: Path, text: str, offset: int, settled: bool = False) -> PromptInput:
        """The prompt's input at a cursor: the path as the prompt names it, the repository, the snippets and
        the document's anchor (``settled``: built in idle time, so its slow parts may be chosen again)."""
        ...

    def prompt_built(self, request: PromptInput, built: BuiltPrompt) -> None:
        """``built`` is the prompt of ``request``: the document's next prompt starts from it."""
        ...

    def prompt_moves(self, request: PromptInput, built: BuiltPrompt) -> bool:
        """Whether ``built`` (the prompt of ``request``) starts otherwise than the document's last prompt:
        snippets ranked again, the prefix's first line moved (``context/anchors.py``)."""
        ...

    def draft_sources(self) -> list[DraftSource]:
        """The draft sources besides the suffix (the workspace index once it is built)."""
        ...

    def set_current(self, path: Path | None) -> None:
        """Prefer drafts from this file (and the open ones)."""
        ...

    @property
    def previous(self) -> PreviousCompletions:
        """Each document's last completion, a draft source for its next one (``lsp_server/previous.py``)."""
        ...


@dataclass(frozen=True)
class Snapshot:
    """What one request completes: a document version and a cursor offset (code points)."""

    doc: Document
    offset: int
    request_id: str

    @property
    def path(self) -> Path:
        return self.doc.path or Path(self.doc.uri.rsplit("/", 1)[-1] or "untitled")


@dataclass(frozen=True)
class Edit:
    """The completion as an edit: insert ``text`` in place of ``[start, end)`` (code points)."""

    text: str
    start: int
    end: int


@dataclass
class Completion:
    """The outcome of one completion request."""

    request_id: str
    snapshot: Snapshot
    edit: Edit
    token_ids: list[int]
    decode: DecodeStats
    latency_ms: dict[str, float] = field(default_factory=dict)
    final: bool = True  # False: shown at a deadline while decoding goes on (progressive ghost text)
    context_files: tuple[str, ...] = ()  # the other files whose sections the prompt held, as it names them

    @property
    def text(self) -> str:
        return self.edit.text

    def stats(self) -> dict[str, Any]:
        """The ``lookahead/completionStats`` notification's params."""
        d = self.decode
        return {
            "requestId": self.request_id,
            "latencyMs": {k: round(v, 2) for k, v in self.latency_ms.items()},
            "promptTokens": d.prompt_tokens,
            "prefilledTokens": d.prefilled_tokens,
            "reusedTokens": d.reused_tokens,
            "newTokens": d.new_tokens,
            "steps": d.steps,
            "acceptedPerStep": round(d.mean_accepted, 3),
            "tokensPerSecond": round(d.tokens_per_s, 2),
            "hitsBySource": dict(d.hits_by_source),
            "tokensBySource": dict(d.tokens_by_source),
            "finishReason": d.finish_reason,
            "contextFiles": list(self.context_files),
        }


@dataclass(frozen=True)
class Warmed:
    """The outcome of one background prefill."""

    request_id: str
    uri: str
    version: int | None  # the document version whose cursor's prompt was prefilled
    prompt_tokens: int
    prefilled_tokens: int | None  # None: the backend has no cache to warm (remote)
    ms: float
    cancelled: bool

    def stats(self) -> dict[str, Any]:
        return {
            "requestId": self.request_id,
            "uri": self.uri,
            "version": self.version,
            "promptTokens": self.prompt_tokens,
            "prefilledTokens": self.prefilled_tokens,
            "ms": round(self.ms, 1),
            "cancelled": self.cancelled,
        }


def complete(
    snapshot: Snapshot,
    engine: CompletionEngine,
    cancel: CancelToken,
    queue_ms: float = 0.0,
    publish: Callable[[Completion], None] | None = None,
) -> Completion:
    """Complete at ``snapshot``; a cancelled run returns what it has (the caller drops it).

    The keystroke deadlines (counted from the key: ``queue_ms`` before now) end a completion at a line end
    (a runaway first line at a word end, ``line_cap_ms``). With ``publish`` they are publish points instead:
    ``publish`` gets the completion as it would have ended there (``final`` False; a cut that shows nothing yet
    is not published: the request waits for text) and decoding goes on, on
    the same KV and under the same stop rules, to the whole completion (returned, ``final`` True)."""
    clock = StageClock(queue=queue_ms)
    key_time = time.perf_counter() - queue_ms / 1000.0
    config = engine.config
    limits = Limits(
        config.max_new_tokens,
        engine.stop_ids,
        block_deadline=deadline(config.multiline_deadline_ms, key_time),
        line_deadline=deadline(config.line_deadline_ms, key_time),
        line_cap=deadline(config.line_cap_ms, key_time),
        block_end=engine.block_end(),
    )
    doc, offset = snapshot.doc, snapshot.offset
    cursor = Cursor(doc.text, offset, str(snapshot.path), doc.language_id or None)

    def published(tokens: Sequence[int], visible: str) -> None:
        if publish is not None and not cancel.cancelled:
            text = trim_visible(plan, visible, truncated=False)
            if not text:
                return  # nothing to show yet: the request waits for the first text or the whole run
            stats = DecodeStats(prompt_tokens=len(built.token_ids), new_tokens=len(tokens), finish_reason="stop")
            edit = edit_for(doc, offset, text)
            publish(Completion(snapshot.request_id, snapshot, edit, list(tokens), stats, clock.total(), final=False))

    with clock.stage("prompt"):
        built = prompt_for(snapshot, engine)
        on_deadline = published if publish is not None else None
        drafts = [*engine.draft_sources(), *engine.previous.sources(cursor.path, offset)]
        plan = plan_completion(engine.tokenizer, built, cursor, limits, drafts, cancel, on_deadline)
        engine.set_current(doc.path)
    decoded = decode_completion(engine.backend(), plan, clock)
    engine.previous.remember(cursor.path, offset, decoded.result.token_ids, len(decoded.text))

    with clock.stage("postprocess"):
        edit = edit_for(doc, offset, decoded.text)

    result = decoded.result
    files = tuple(dict.fromkeys(section.path for section in built.sections))
    return Completion(
        snapshot.request_id, snapshot, edit, result.token_ids, result.stats, clock.total(), context_files=files
    )


def prompt_for(snapshot: Snapshot, engine: CompletionEngine) -> BuiltPrompt:
    """A completion's prompt at ``snapshot``, remembered as its document's anchor.

    A prompt on the idle-time budget (``PromptInput.grown``) is kept only while its head is the one idle time
    prefilled: one whose head moved (the cursor left the prefix's reach) is built again on the keystrokes' budget,
    a smaller prefill at the key, and the next idle time grows it again."""
    prompt_input, built = _build(snapshot, engine, settled=False)
    if prompt_input.grown and engine.prompt_moves(prompt_input, built):
        prompt_input = replace(prompt_input, grown=False)
        built = engine.prompt_builder(False).build(prompt_input)
    engine.prompt_built(prompt_input, built)
    return built


def _build(snapshot: Snapshot, engine: CompletionEngine, settled: bool) -> tuple[PromptInput, BuiltPrompt]:
    """The prompt at ``snapshot`` and its input (the same for a completion and for its background prefill, which
    builds it ``settled``: in idle time, when the prompt's slow parts may move).

    A settled prompt grows (``PromptInput.grown``) only where the keystrokes' budget cuts the code before the
    cursor: where all of it fits, that prompt is the one built (its suffix has the room the prefix leaves, which
    a grown prompt's does not: ``context/prompt.py``'s ``layout_builder``)."""
    prompt_input = engine.prompt_input(snapshot.path, snapshot.doc.text, snapshot.offset, settled)
    if prompt_input.grown and settled:
        kept = replace(prompt_input, grown=False)
        fresh = engine.prompt_builder(False).build(replace(kept, anchor_line=None))  # the earliest line that fits
        if fresh.prefix_line == 0:
            return kept, engine.prompt_builder(False).build(kept)
    return prompt_input, engine.prompt_builder(prompt_input.grown).build(prompt_input)


def warm(snapshot: Snapshot, engine: CompletionEngine, cancel: CancelToken) -> Warmed:
    """Prefill the prompt at ``snapshot`` in idle time; stops between two layers once ``cancel`` is set.

    A prompt whose head moved (``CompletionEngine.prompt_moves``) becomes the document's anchor only once the
    cache holds it whole: a keystroke that stops it half-way builds its prompt on the old head, which the cache
    still holds (the prefill went to a spare: ``decoder/slots.py``), instead of prefilling the whole prompt."""
    started = time.perf_counter()
    prompt_input, built = _build(snapshot, engine, settled=True)
    moves = engine.prompt_moves(prompt_input, built)
    backend, slot = engine.backend(), str(snapshot.path)
    prefilled = None if cancel.cancelled else backend.warm(built.token_ids, cancel, slot)
    if not moves or backend.holds(built.token_ids, slot):
        engine.prompt_built(prompt_input, built)
    ms = (time.perf_counter() - started) * 1000.0
    doc = snapshot.doc
    return Warmed(snapshot.request_id, doc.uri, doc.version, len(built.token_ids), prefilled, ms, cancel.cancelled)


# ---- pure helpers ------------------------------------------------------------------------------------


def deadline(budget_ms: int | None, since: float) -> Callable[[], bool] | None:
    """A clock that says when ``budget_ms`` have passed since ``since`` (``time.perf_counter``); None: no limit."""
    if budget_ms is None:
        return None
    end = since + budget_ms / 1000.0
    return lambda: time.perf_counter() >= end


def edit_end(old: str, new: str) -> int:
    """Where an edit that turned ``old`` into ``new`` left the cursor: the end of the changed text in ``new``.

    Compares a block of characters at a time (C speed: a keystroke in a 5 MB document costs a few ms)."""
    limit = min(len(old), len(new))
    head = _common_length(old, new, limit, _head)
    tail = _common_length(old, new, limit - head, _tail)
    return len(new) - tail


def _head(text: str, i: int, j: int) -> str:
    return text[i:j]


def _tail(text: str, i: int, j: int) -> str:
    return text[len(text) - j : len(text) - i]


def _common_length(a: str, b: str, limit: int, cut: Callable[[str, int, int], str]) -> int:
    """How many leading (``_head``) or trailing (``_tail``) characters ``a`` and ``b`` share, at most ``limit``."""
    known = 0
    while known < limit:
        step = min(COMPARE_BLOCK, limit - known)
        if cut(a, known, known + step) == cut(b, known, known + step):
            known += step
            continue
        low, high = known, known + step - 1  # the first difference lies in [known, known + step)
        while low < high:
            mid = (low + high + 1) // 2
            if cut(a, known, mid) == cut(b, known, mid):
                low = mid
            else:
                high = mid - 1
        return low
    return known


def edit_for(doc: Document, offset: int, completion: str) -> Edit:
    """The completion as an edit that replaces nothing the user does not see in it.

    Mid-line, when the completion ends with the rest of the line (``foo(`` + ``bar)`` before ``)``), the
    edit replaces that rest; otherwise it only inserts at the cursor.
    """
    rest = doc.line_rest(offset)
    visible_rest = rest.rstrip()
    if visible_rest and completion.rstrip().endswith(visible_rest):
        return Edit(completion.rstrip(), offset, offset + len(visible_rest))
    return Edit(completion, offset, offset)


@dataclass(frozen=True)
class Shown:
    """The last completion shown for a document, kept to answer typed-through requests."""

    doc: Document
    edit: Edit
    request_id: str


def typed_through(shown: Shown, doc: Document, offset: int, whole: bool = False) -> Edit | None:
    """The rest of ``shown`` when the user has typed exactly its start since it was shown, else None.

    Holds when the text before the old cursor and after the replaced range are unchanged and the text
    in between is a proper prefix of the completion (``whole``: or all of it, for a completion still growing)
    followed by the replaced text still there.
    """
    old, edit = shown.doc.text, shown.edit
    typed_len = offset - edit.start
    if typed_len <= 0 or typed_len > len(edit.text) or (typed_len == len(edit.text) and not whole):
        return None
    replaced = old[edit.start : edit.end]
    tail = old[edit.end :]
    if len(doc.text) != len(old) + typed_len:
        return None
    if (
        doc.text[offset:] != replaced + tail
        or doc.text[edit.start : offset] != edit.text[:typed_len]
        or doc.text[: edit.start] != old[: edit.start]
    ):
        return None
    return Edit(edit.text[typed_len:], offset, offset + len(replaced))
