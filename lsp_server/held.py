"""Completions held per document state: a bounded LRU cache keyed by (uri, version, cursor offset).

An entry is what the daemon has for one state: the completion it answered with and, while decoding goes on in
the background (progressive ghost text), every longer version of it that the continuation publishes. Asking
again at the same state is answered from the entry with no model work, and so is asking after typing
characters that match the held text (:func:`lsp_server.pipeline.typed_through`, against the entry's latest
text; all of it while its run still goes on: the rest is coming). Pure bookkeeping: the event loop alone
reads and writes it.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from lookahead_lsp.lsp_server.documents import Document
from lookahead_lsp.lsp_server.pipeline import Completion, Edit, Shown, typed_through

Key = tuple[str, object, int]

TYPED_THROUGH_ENTRIES = 4  # a document's most recent entries tried for typed-through (each compares its text)


def state_key(doc: Document, offset: int) -> Key:
    """The document state at a cursor: its URI, its version (else a hash of its text) and the offset."""
    return (doc.uri, doc.version if doc.version is not None else hash(doc.text), offset)


@dataclass
class Held:
    """What the daemon holds for one document state."""

    doc: Document
    offset: int
    request_id: str
    edit: Edit
    tokens: int  # tokens decoded behind ``edit`` (a later publication of the same run has more)
    final: bool  # decoding ended: nothing more will come
    running: bool = True  # the run that fills it is still going (False: ended, cancelled or superseded)
    answered: bool = False  # the client got an answer from this entry (later growth is worth a notification)

    def shown(self) -> Shown:
        return Shown(self.doc, self.edit, self.request_id)


class CompletionCache:
    """Held completions, least recently used dropped beyond ``size`` (each keeps its document version's text)."""

    def __init__(self, size: int = 16) -> None:
        self.size = size
        self._entries: OrderedDict[Key, Held] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def hold(self, completion: Completion) -> tuple[Held, bool]:
        """Take a publication of a run (partial or final): ``(entry, grew)``, where ``grew`` says whether the
        entry's text changed. A publication older than what the entry holds changes nothing."""
        snapshot = completion.snapshot
        key = state_key(snapshot.doc, snapshot.offset)
        entry = self._entries.get(key)
        tokens = len(completion.token_ids)
        if entry is not None and entry.request_id == completion.request_id:
            if (entry.final, entry.tokens) > (completion.final, tokens):
                return entry, False
            grew = entry.edit != completion.edit
            entry.edit, entry.tokens, entry.final = completion.edit, tokens, completion.final
            entry.running = entry.running and not completion.final
            self._entries.move_to_end(key)
            return entry, grew
        entry = Held(snapshot.doc, snapshot.offset, completion.request_id, completion.edit, tokens, completion.final)
        entry.running = not completion.final
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
        return entry, True

    def ended(self, request_id: str, doc: Document, offset: int) -> None:
        """The run behind an entry ended (done, cancelled or superseded): no more growth will come."""
        entry = self._entries.get(state_key(doc, offset))
        if entry is not None and entry.request_id == request_id:
            entry.running = False

    def answer(self, doc: Document, offset: int) -> tuple[Held, Edit] | None:
        """The held answer at this state: the entry itself, or the rest of one the user typed through.

        An entry whose run stopped before it was whole (cancelled in the background) is no answer at its own
        state: a new run will do better."""
        entry = self._entries.get(state_key(doc, offset))
        if entry is not None and (entry.final or entry.running):
            self._entries.move_to_end(state_key(doc, offset))
            return entry, entry.edit
        for held in self.recent(doc.uri, TYPED_THROUGH_ENTRIES):
            rest = typed_through(held.shown(), doc, offset, whole=held.running)
            if rest is not None:
                return held, rest
        return None

    def recent(self, uri: str, limit: int) -> list[Held]:
        """A document's most recently used entries, newest first."""
        found: list[Held] = []
        for held in reversed(self._entries.values()):
            if held.doc.uri == uri:
                found.append(held)
                if len(found) == limit:
                    break
        return found

    def running(self, uri: str) -> Held | None:
        """The entry of a document whose run still goes on, if any."""
        for held in reversed(self._entries.values()):
            if held.doc.uri == uri and held.running:
                return held
        return None

    def drop(self, uri: str) -> None:
        """Forget a document (closed)."""
        for key in [k for k, held in self._entries.items() if held.doc.uri == uri]:
            del self._entries[key]
