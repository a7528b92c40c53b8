"""Open documents and LSP positions: immutable snapshots, incremental edits, UTF-16 (or 8/32) code units.

LSP positions count ``character`` in the negotiated encoding's code units (UTF-16 unless the client
offers another); Python strings index code points. Everything here is pure except :class:`DocumentStore`,
a dict of immutable :class:`Document` snapshots that only the event loop mutates: the model worker reads a
snapshot while the next edit makes a new one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from lsprotocol import types
from pygls.uris import to_fs_path


def code_units(text: str, encoding: str) -> int:
    """How many code units of ``encoding`` ("utf-8", "utf-16" or "utf-32") ``text`` takes."""
    if encoding == "utf-32" or text.isascii():
        return len(text)
    if encoding == "utf-8":
        return len(text.encode("utf-8", "surrogatepass"))
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _index_of_units(line: str, units: int, encoding: str) -> int:
    """The code-point index in ``line`` where ``units`` code units end (rounded down inside a character)."""
    if encoding == "utf-32" or line.isascii():
        return min(units, len(line))
    seen = 0
    for index, char in enumerate(line):
        seen += code_units(char, encoding)
        if seen > units:
            return index
    return len(line)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """``text`` with each lone surrogate (valid JSON, no valid Unicode) replaced by U+FFFD.

    Both are one UTF-16 code unit and one code point, so every position and offset stays the same.
    """
    if text.isascii():
        return text
    return _LONE_SURROGATE.sub("\ufffd", text)


def line_starts(text: str) -> np.ndarray:
    """The offset where each line starts: lines end at ``\\n``, ``\\r\\n`` or a lone ``\\r``, as LSP counts."""
    if text.isascii():
        codes = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    else:
        codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    breaks = codes == 10
    lone_cr = codes == 13
    lone_cr[:-1] &= codes[1:] != 10
    breaks |= lone_cr
    return np.concatenate([np.zeros(1, dtype=np.int64), np.flatnonzero(breaks).astype(np.int64) + 1])


@dataclass(frozen=True)
class Document:
    """One version of an open document, with its line table (kept up to date incrementally by edits).

    Lines end at ``\\n``, ``\\r\\n`` or a lone ``\\r`` (old Mac). The text holds no lone surrogates
    (:func:`clean_text` at the store's boundary: :meth:`DocumentStore.open` and :meth:`Document.apply`).
    """

    uri: str
    text: str
    version: int | None = None
    language_id: str = ""
    line_table: np.ndarray | None = field(default=None, repr=False, compare=False)  # None: computed here

    def __post_init__(self) -> None:
        if self.line_table is None:
            object.__setattr__(self, "line_table", line_starts(self.text))

    @property
    def starts(self) -> np.ndarray:
        """Start offset of each line."""
        assert self.line_table is not None
        return self.line_table

    @property
    def path(self) -> Path | None:
        fs_path = to_fs_path(self.uri) if self.uri.startswith("file:") else None
        return Path(fs_path) if fs_path else None

    @property
    def line_count(self) -> int:
        return len(self.starts)

    def line_bounds(self, line: int) -> tuple[int, int]:
        """Offsets of the start and of the content end of ``line`` (which must exist)."""
        start = int(self.starts[line])
        if line + 1 < len(self.starts):
            end = int(self.starts[line + 1]) - 1
            if end > start and self.text[end - 1] == "\r":
                end -= 1
        else:
            end = len(self.text)
        return start, end

    def line_of(self, offset: int) -> int:
        return int(np.searchsorted(self.starts, offset, side="right")) - 1

    def offset_at(self, position: types.Position, encoding: str = "utf-16", strict: bool = False) -> int | None:
        """The code-point offset of an LSP position; None when the line is past the end.

        As the specification says, a character past the end of its line means the end of the line;
        with ``strict``, such a position is outside the document too (None).
        """
        if position.line >= self.line_count:
            return None
        start, end = self.line_bounds(position.line)
        line = self.text[start:end]
        if strict and position.character > code_units(line, encoding):
            return None
        return start + _index_of_units(line, position.character, encoding)

    def position_at(self, offset: int, encoding: str = "utf-16") -> types.Position:
        """The LSP position of a code-point offset (clamped to the document)."""
        offset = max(0, min(offset, len(self.text)))
        line = self.line_of(offset)
        start, end = self.line_bounds(line)
        return types.Position(line=line, character=code_units(self.text[start : min(offset, end)], encoding))

    def line_rest(self, offset: int) -> str:
        """The text from ``offset`` to the end of its line (without the line break)."""
        return self.text[offset : self.line_bounds(self.line_of(offset))[1]]

    def apply(
        self,
        changes: Iterable[types.TextDocumentContentChangeEvent],
        version: int | None,
        encoding: str = "utf-16",
    ) -> Document:
        """The document after ``changes`` (incremental or whole), applied in order."""
        doc = self
        for change in changes:
            if isinstance(change, types.TextDocumentContentChangePartial):
                doc = doc._replace(
                    doc._clamped_offset(change.range.start, encoding),
                    doc._clamped_offset(change.range.end, encoding),
                    clean_text(change.text),
                )
            else:
                doc = replace(doc, text=clean_text(change.text), line_table=None)
        return replace(doc, version=version)

    def _replace(self, start: int, end: int, text: str) -> Document:
        """``[start, end)`` replaced by ``text``; the line table is patched, not recomputed."""
        end = max(start, end)
        new_text = self.text[:start] + text + self.text[end:]
        if "\r" in self.text[max(0, start - 1) : start] + text[:1] + text[-1:] + self.text[end : end + 1]:
            return replace(self, text=new_text, line_table=None)  # a \r\n may be joined or split: count again
        starts = self.starts
        kept = starts[: np.searchsorted(starts, start, side="right")]
        after = starts[np.searchsorted(starts, end, side="right") :] + (len(text) - (end - start))
        inserted = line_starts(text)[1:] + start
        return replace(self, text=new_text, line_table=np.concatenate([kept, inserted, after]))

    def _clamped_offset(self, position: types.Position, encoding: str) -> int:
        offset = self.offset_at(position, encoding)
        return len(self.text) if offset is None else offset


class DocumentStore:
    """The open documents by URI. Mutated on the event loop only; readers keep the snapshot they got."""

    def __init__(self) -> None:
        self._docs: dict[str, Document] = {}

    def open(self, item: types.TextDocumentItem) -> Document:
        doc = Document(uri=item.uri, text=clean_text(item.text), version=item.version, language_id=item.language_id)
        self._docs[item.uri] = doc
        return doc

    def change(self, params: types.DidChangeTextDocumentParams, encoding: str = "utf-16") -> Document | None:
        doc = self._docs.get(params.text_document.uri)
        if doc is None:
            return None
        doc = doc.apply(params.content_changes, params.text_document.version, encoding)
        self._docs[doc.uri] = doc
        return doc

    def close(self, uri: str) -> Document | None:
        return self._docs.pop(uri, None)

    def get(self, uri: str) -> Document | None:
        return self._docs.get(uri)

    def paths(self) -> list[Path]:
        return [p for p in (d.path for d in self._docs.values()) if p is not None]

    def __len__(self) -> int:
        return len(self._docs)
