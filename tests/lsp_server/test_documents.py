"""Documents: UTF-16 positions (non-ASCII, emoji), incremental edits, positions outside the text."""

from __future__ import annotations

from lsprotocol import types

from lookahead_lsp.lsp_server.documents import Document, DocumentStore, code_units


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
    doc = Document("u", "ab\r\ncd\ref")  # a lone \r is a line break too (LSP counts \r, \n and \r\n)
    assert doc.line_count == 3
    assert doc.offset_at(pos(1, 1)) == 5
    assert doc.offset_at(pos(1, 99)) == 6
    assert doc.offset_at(pos(2, 1)) == 8
    assert doc.line_rest(0) == "ab"
    assert doc.position_at(3) == pos(0, 2)  # inside the line break: the line's end
    assert doc.position_at(7) == pos(2, 0)


def test_edits_across_carriage_returns_keep_the_line_table_true() -> None:
    """Joining a \r and a \n (or splitting them) changes the line count; the table must follow."""
    doc = Document("u", "a\rb\rc")
    assert doc.line_count == 3
    joined = doc.apply([change((1, 0), (1, 1), "\n")], version=2)  # "a\r\n\rc": \r\n is one break
    assert joined.text == "a\r\n\rc"
    assert list(joined.starts) == list(Document("u", joined.text).starts)
    split = joined.apply([change((0, 1), (0, 1), "x")], version=3)  # "a" + "x" inserted before the \r
    assert list(split.starts) == list(Document("u", split.text).starts)
    between = Document("u", "a\r\nb").apply([change((0, 1), (0, 1), "z")], version=2)
    assert between.line_count == 2


def test_lone_surrogates_are_replaced_at_the_boundary() -> None:
    store = DocumentStore()
    doc = store.open(types.TextDocumentItem(uri="u", language_id="python", version=1, text="a\ud800b\n"))
    assert doc.text == "a\ufffdb\n"
    assert doc.offset_at(pos(0, 2)) == 2  # one UTF-16 unit before and after: positions unchanged
    after = doc.apply([change((0, 3), (0, 3), "\udc00x")], version=2)
    assert after.text == "a\ufffdb\ufffdx\n"
    after.text.encode("utf-8")  # no lone surrogate left for the tokenizer


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
