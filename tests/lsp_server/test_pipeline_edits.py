"""The completion as an edit (what it may replace) and the typed-through shortcut: pure functions."""

from __future__ import annotations

from lookahead_lsp.lsp_server.documents import Document
from lookahead_lsp.lsp_server.pipeline import Edit, Shown, edit_for, typed_through


def test_end_of_line_inserts_only() -> None:
    doc = Document("u", "def f(x):\n    return \n")
    offset = doc.text.index("return ") + 7
    assert edit_for(doc, offset, "x + 1") == Edit("x + 1", offset, offset)


def test_mid_line_replaces_the_rest_only_when_the_completion_shows_it() -> None:
    doc = Document("u", "print(foo)  \n")
    offset = doc.text.index("foo")
    assert edit_for(doc, offset, "x, foo)") == Edit("x, foo)", offset, offset + 4)
    assert edit_for(doc, offset, "x, ") == Edit("x, ", offset, offset)  # the rest stays, nothing replaced


def test_typed_through_answers_the_rest() -> None:
    before = Document("u", "x = \nend\n")
    offset = 4
    shown = Shown(before, Edit("compute(1)", offset, offset), "r1")
    after = Document("u", "x = comp\nend\n")
    assert typed_through(shown, after, offset + 4) == Edit("ute(1)", offset + 4, offset + 4)


def test_typed_through_with_replaced_rest() -> None:
    before = Document("u", "print()\n")
    shown = Shown(before, Edit("x)", 6, 7), "r1")
    after = Document("u", "print(x)\n")
    assert typed_through(shown, after, 7) == Edit(")", 7, 8)


def test_not_typed_through() -> None:
    before = Document("u", "x = \nend\n")
    shown = Shown(before, Edit("compute(1)", 4, 4), "r1")
    assert typed_through(shown, Document("u", "x = cx\nend\n"), 6) is None  # typed something else
    assert typed_through(shown, Document("u", "x = comp\nEND\n"), 8) is None  # the rest changed
    assert typed_through(shown, Document("u", "y = comp\nend\n"), 8) is None  # the start changed
    assert typed_through(shown, Document("u", "x = compute(1)\nend\n"), 14) is None  # all of it typed
    assert typed_through(shown, before, 4) is None  # nothing typed
