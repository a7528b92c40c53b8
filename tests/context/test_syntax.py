"""Shape detection at a cursor: line or block, the block's indentation and end, comments, languages."""

from __future__ import annotations

import time

import pytest

from lookahead_lsp.context.languages import LANGUAGES, UNKNOWN, detect_language, get_parser
from lookahead_lsp.context.syntax import CompletionShape, analyze, bracket_balance, bracket_events


def at(marked: str, language: str | None = None, path: str | None = None) -> CompletionShape:
    """The shape at the ``|`` in ``marked``."""
    offset = marked.index("|")
    return analyze(marked[:offset] + marked[offset + 1 :], offset, language, path)


@pytest.mark.parametrize(
    ("language_id", "path", "name"),
    [
        ("python", None, "python"),
        ("typescriptreact", None, "tsx"),
        ("javascriptreact", None, "javascript"),
        (None, "src/main.rs", "rust"),
        (None, "a/b/Main.java", "java"),
        (None, "x.hpp", "cpp"),
        (None, "x.h", "c"),
        (None, "x.go", "go"),
        (None, "x.ts", "typescript"),
        ("plaintext", "x.py", "python"),  # an unknown id falls back on the extension
        ("cobol", "x.cbl", "unknown"),
    ],
)
def test_detect_language(language_id: str | None, path: str | None, name: str) -> None:
    assert detect_language(language_id, path).name == name


def test_every_grammar_loads() -> None:
    for spec in LANGUAGES.values():
        parser = get_parser(spec)
        assert parser is not None, spec.name
        assert parser.parse(b"").root_node.type != "ERROR", spec.name
    assert get_parser(UNKNOWN) is None


def test_mid_line_is_line_with_rest() -> None:
    shape = at("x = foo(|, y)\n", "python")
    assert shape.kind == "line"
    assert shape.line_rest == ", y)"
    assert shape.may_close == 0


def test_end_of_plain_line_is_line() -> None:
    shape = at("x = 1|\ny = 2\n", "python")
    assert (shape.kind, shape.line_rest) == ("line", "")


def test_open_paren_at_end_of_line_may_close_it() -> None:
    shape = at("x = foo(a|\n", "python")
    assert shape.kind == "line" and shape.may_close == 1


def test_python_block_opener_is_block_with_deeper_indent() -> None:
    shape = at("def f(x):\n    if x:|\n    return 2\n", "python")
    assert shape.kind == "block" and shape.opens_block
    assert shape.indent == "        "
    assert shape.may_close == 0


def test_colon_in_a_dict_does_not_open_a_block() -> None:
    assert at('d = {"a":|\n', "python").kind == "line"


def test_an_annotation_colon_in_a_signature_does_not_open_a_block() -> None:
    shape = at("class V:\n    def visit(self, node: |\n        pass\n", "python")
    assert shape.kind == "line" and shape.may_close == 1  # the signature's ``(`` may close
    assert at("class V:\n    def visit(self, node: Node) -> None:|\n", "python").kind == "block"


def test_blank_line_in_python_block_ends_at_dedent() -> None:
    text = "def f(x):\n    if x:\n        y = 1\n        |\n        z = 2\n    return y\n"
    shape = at(text, "python")
    assert shape.kind == "block"
    assert shape.indent == "        "
    assert shape.block_end_line == 4  # z = 2; "return y" is outside


def test_empty_line_infers_indent_from_opener_above() -> None:
    shape = at("def f(x):\n|\n", "python")
    assert shape.kind == "block" and shape.indent == "    "


def test_tab_indentation_is_kept() -> None:
    shape = at("def f(x):\n\tif x:|\n", "python")
    assert shape.indent == "\t\t"


def test_two_space_indentation_is_detected() -> None:
    shape = at("function f() {\n  if (x) {|\n  }\n}\n", "javascript")
    assert shape.indent == "    " and shape.block_closed and shape.may_close == 0


@pytest.mark.parametrize(
    ("language", "text", "end_line"),
    [
        ("c", "int f() {\n  if (x) {\n    |\n  }\n  return 1;\n}\n", 3),
        ("cpp", "int f() {\n  for (;;) {\n    |\n  }\n}\n", 3),
        ("java", "class A {\n  void f() {\n    |\n  }\n}\n", 3),
        ("go", "func f() {\n\tif x {\n\t\t|\n\t}\n}\n", 3),
        ("rust", "fn f() {\n    if x {\n        |\n    }\n}\n", 3),
        ("javascript", "function f() {\n  |\n  return 1;\n}\n", 3),
        ("typescript", "function f(): number {\n  |\n  return 1;\n}\n", 3),
    ],
)
def test_brace_block_end_from_tree_sitter(language: str, text: str, end_line: int) -> None:
    shape = at(text, language)
    assert shape.kind == "block"
    assert shape.block_end_line == end_line


def test_unclosed_brace_block_may_be_closed_by_the_completion() -> None:
    shape = at("int f() {|\n", "c")
    assert shape.kind == "block" and not shape.block_closed and shape.may_close == 1


@pytest.mark.parametrize(
    ("language", "text"),
    [
        ("python", "def f(\n    self, node: t.Optional[|\n) -> None:\n    pass\n"),
        ("java", "class A {\n  void f() {\n    int[] a = new int[] {|\n  }\n}\n"),
    ],
)
def test_a_closer_of_an_outer_bracket_after_the_cursor_leaves_the_cursors_bracket_open(
    language: str, text: str
) -> None:
    """The line after the cursor closes the bracket of the line above (less indented, or another kind): the
    completion may still close the one the cursor's line opened (``Optional[Node] = None``)."""
    shape = at(text, language)
    assert shape.kind == "block" and not shape.block_closed and shape.may_close == 1
    closed = at(text.replace("|\n", "|\n    ]\n" if language == "python" else "|\n    };\n", 1), language)
    assert closed.block_closed and closed.may_close == 0


def test_autopaired_braces_are_a_block() -> None:
    shape = at("function f() {|}\n", "javascript")
    assert shape.kind == "block" and shape.line_rest == "}" and shape.may_close == 0


def test_cursor_in_comment_is_line() -> None:
    assert at("x = 1  # explain|\n", "python").in_comment
    assert at("int x; // note|\n", "c").kind == "line"
    assert not at("/* done */|\n", "c").in_comment


def test_unknown_language_uses_indentation() -> None:
    shape = at("task:\n  steps:|\n", None, "ci.yaml")
    assert shape.language == "unknown" and shape.kind == "block" and shape.indent == "    "


def test_unicode_before_the_cursor() -> None:
    shape = at('s = "日本語"|  # ok\n', "python")
    assert shape.kind == "line" and shape.line_rest == "  # ok"


def test_bracket_events_skip_strings_comments_and_char_literals() -> None:
    py = LANGUAGES["python"]
    assert bracket_balance('f("(", x)  # )', py) == (0, 0)
    assert bracket_balance('"""(\n(""" + g(', py) == (0, 1)
    rust = LANGUAGES["rust"]
    assert bracket_balance("fn f<'a>(x: &'a str) -> char { '{' }", rust) == (0, 0)
    assert [d for _, d in bracket_events("a) /* ( */ (", LANGUAGES["c"])] == [-1, 1]


def test_big_document_is_fast() -> None:
    body = "def f{i}(x):\n    if x:\n        return {i}\n    return -x\n\n"
    text = "".join(body.format(i=i) for i in range(90_000))  # ~5 MB
    assert len(text) > 5_000_000
    offset = len(text) // 2
    offset = text.index("return", offset)
    started = time.perf_counter()
    shape = analyze(text, offset, "python")
    assert time.perf_counter() - started < 0.5
    assert shape.kind == "line"


JS_LOOPS = """function f(xs) {
  for (let i = 0; i < xs.length; i++) {
    if (xs[i] > 0) {
      g(xs[i]);
    CURSOR
  }
  return 0;
}
"""


@pytest.mark.parametrize(
    ("line", "may_close"),
    [
        ("    }", 0),  # the if's closer is there after the cursor
        ("    h();", 1),  # a statement at the if's indentation: its closer is missing
        ("", 1),  # the for's closer follows, indented less than the if: the if's is missing
    ],
)
def test_blank_line_may_close_the_blocks_left_open_above(line: str, may_close: int) -> None:
    """A blank line after a block's last statement, with that block's closer not in the text (an editor's
    buffer before the ``}`` is typed): the completion may write it (HumanEval's JavaScript and Java holes)."""
    text = JS_LOOPS.replace("    CURSOR\n", "    \n" + (line + "\n" if line else ""))
    offset = text.index("      g(xs[i]);\n") + len("      g(xs[i]);\n") + 4
    shape = analyze(text, offset, "javascript")
    assert shape.kind == "block" and shape.may_close == may_close


def test_a_closed_bracket_above_is_not_counted() -> None:
    text = "def f():\n    x = g(1,\n          2)\n    \n    return x\n"
    shape = analyze(text, text.index("    \n") + 4, "python")
    assert shape.may_close == 0


def test_the_documents_end_leaves_the_blocks_above_open() -> None:
    text = "function f(x) {\n\tif (x) {\n\t\treturn x - 1;\n\n"
    assert analyze(text, len(text) - 1, "javascript").may_close == 2  # the if's and the function's
    assert analyze(text + "\t}\n}\n", len(text) - 1, "javascript").may_close == 0
