"""Documents: UTF-16 positions (non-ASCII, emoji), incremental edits, positions outside the text."""

from __future__ import annotations

from lsprotocol import types

from lsp_server.documents import Document, code_units


def pos(line: int, character: int) -> types.Position:
    return types.Position(line=line, character=character)


def change(start: tuple[int, int], end: tuple[int, int], text: str) -> types.TextDocumentContentChangePartial:
    return types.TextDocumentContentChangePartial(range=types.Range(start=pos(*start), end=pos(*end)), text=text)


def test_code_units() -> None:
    assert code_units("abc", "utf-16") == 3
    assert code_units("é😀", "utf-16") == 3
    assert code_units("é😀", "utf-8") == 6
    assert code_units("é😀", "utf-32") == 2


def test_offsets_count_utf16_units() -> None:
    doc = Document("file:///x.py", 'x = "😀é"\ny = 1\n')
    assert doc.offset_at(pos(0, 5)) == 5  # before the emoji
    assert doc.offset_at(pos(0, 7)) == 6  # after the emoji (2 UTF-16 units)
    assert doc.offset_at(pos(0, 8)) == 7  # after é
    assert doc.offset_at(pos(1, 0)) == doc.text.index("y")
    assert doc.offset_at(pos(0, 7), "utf-8") == 5  # 😀 is 4 UTF-8 units: 5 + 2 lands inside it
    assert doc.position_at(7) == pos(0, 8)
    assert doc.position_at(doc.text.index("y") + 1) == pos(1, 1)


def test_positions_outside() -> None:
    doc = Document("file:///x.py", "ab\ncd")
    assert doc.line_count == 2
    assert doc.offset_at(pos(2, 0)) is None
    assert doc.offset_at(pos(0, 99)) == 2  # past the end of a line: its end (LSP)
    assert doc.offset_at(pos(0, 99), strict=True) is None
    assert Document("u", "").offset_at(pos(0, 0)) == 0
    assert Document("u", "a\n").offset_at(pos(1, 0)) == 2


def test_crlf_lines() -> None:
    doc = Document("u", "ab\r\ncd\ref")  # a lone \r is no line break
    assert doc.line_count == 2
    assert doc.offset_at(pos(1, 1)) == 5
    assert doc.offset_at(pos(1, 99)) == len(doc.text)
    assert doc.line_rest(0) == "ab"
    assert doc.position_at(3) == pos(0, 2)  # inside the line break: the line's end


def test_incremental_changes_with_emoji() -> None:
    doc = Document("u", "a😀b\nsecond\n", version=1)
    doc = doc.apply([change((0, 3), (0, 3), "X")], version=2)  # after the emoji
    assert doc.text == "a😀Xb\nsecond\n" and doc.version == 2
    doc = doc.apply([change((0, 0), (1, 3), "Z"), change((0, 1), (0, 1), "!")], version=3)
    assert doc.text == "Z!ond\n"
    doc = doc.apply([types.TextDocumentContentChangeWholeDocument(text="new")], version=4)
    assert doc.text == "new"
    doc = doc.apply([change((5, 0), (6, 0), "!")], version=5)  # past the end: appended
    assert doc.text == "new!"


def test_line_table_follows_edits() -> None:
    doc = Document("u", "one\ntwo\nthree\n")
    edits = [((1, 1), (2, 2), "X\nY\nZ"), ((0, 0), (0, 0), "\n"), ((3, 0), (5, 0), ""), ((0, 0), (9, 0), "a\r\nb")]
    for i, (start, end, text) in enumerate(edits):
        doc = doc.apply([change(start, end, text)], version=i)
        assert doc.starts.tolist() == Document("u", doc.text).starts.tolist(), doc.text


def test_line_rest_and_path() -> None:
    doc = Document("file:///tmp/a%20b.py", "foo(bar)\n")
    assert doc.line_rest(4) == "bar)"
    assert str(doc.path) == "/tmp/a b.py"
    assert Document("untitled:1", "").path is None
