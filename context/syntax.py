"""The shape of the completion wanted at a cursor: one line, or a block of lines and where that block ends.

``analyze(text, offset, language)`` looks only at a bounded window of lines around the cursor (a 5 MB document
costs no more than a small one): tree-sitter, with the official grammars, tells whether the cursor sits in a
comment and where an enclosing brace block ends; the rest is indentation and bracket rules, which also serve
languages without a grammar.

Rules (``offset`` is a ``str`` index into ``text``):
- text after the cursor on its line (not only whitespace) -> ``"line"`` with ``line_rest``; except the
  auto-paired ``{|}`` of a brace language, a block to fill;
- cursor after the last non-blank character of a line -> ``"line"``, unless the line opens a block
  (``:`` after a compound statement keyword, or an open ``{``, ``(``, ``[`` at its end) -> ``"block"``;
- blank (or whitespace-only) line -> ``"block"`` at the indentation of the cursor (inferred from the lines
  above when the line is empty);
- inside a comment -> ``"line"``.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Literal

from tree_sitter import Node, Tree

from lookahead_lsp.context.languages import LANGUAGES, UNKNOWN, LanguageSpec, detect_language, get_parser

TAB_SIZE = 4
WINDOW_LINES_BEFORE = 300  # lines parsed above the cursor (then back to a line at column 0, at most 200 more)
WINDOW_LINES_AFTER = 300
WINDOW_MAX_CHARS = 200_000  # each side of the cursor
SCAN_LINES = 2000  # indentation scans after the cursor stop here

OPENERS = "([{"
CLOSERS = ")]}"
_PY_BLOCK_KEYWORDS = re.compile(
    r"^\s*(async\s+)?(def|class|if|elif|else|for|while|try|except|finally|with|match|case|lambda)\b"
)
_DEFINITION_LINE = re.compile(r"^\s*(async\s+)?def\b")  # a line opening a function (indentation languages)
_CASE_LABEL = re.compile(r"^\s*(case\b.*|default\s*):$")


@dataclass(frozen=True)
class CompletionShape:
    """What the completion at a cursor may look like; consumed by the stop rules and trimming."""

    kind: Literal["line", "block"]
    language: str = "unknown"
    line_rest: str = ""  # text after the cursor on its line, without the line break
    line_indent: str = ""  # leading whitespace of the cursor's line
    indent: str = ""  # indentation of the block's body: a completion line indented less leaves the block
    opens_block: bool = False  # the text before the cursor opens a block that the completion fills
    block_closed: bool = True  # the opened block is already closed after the cursor (its closer exists)
    block_end_line: int | None = None  # 0-based last line of the enclosing block in the document
    may_close: int = 0  # closing brackets the completion may emit for openers before the cursor
    in_comment: bool = False
    scope_indent: int | None = None  # columns of the outermost def line around the cursor (indentation languages)

    @property
    def multiline(self) -> bool:
        return self.kind == "block"

    @property
    def spec(self) -> LanguageSpec:
        return LANGUAGES.get(self.language, UNKNOWN)


def indent_width(line: str) -> int:
    """Columns of ``line``'s leading whitespace (tabs count :data:`TAB_SIZE`)."""
    stripped = line[: len(line) - len(line.lstrip(" \t"))]
    return len(stripped.expandtabs(TAB_SIZE))


def leading_ws(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


_CHAR_LITERAL = re.compile(r"'(\\.[^'\n]{0,8}|[^'\\\n])'")


def bracket_events(text: str, spec: LanguageSpec, start: int = 0) -> Iterator[tuple[int, int]]:
    """``(index, +1 | -1)`` for each bracket of ``text`` outside strings and comments, from ``start`` on.

    A lexer-level approximation good for code fragments: quotes (Python's triple quotes too), ``\\`` escapes,
    line comments and ``/* */``; a one-line string ends at its line's end.
    """
    i, n = start, len(text)
    quote = ""
    while i < n:
        c = text[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if text.startswith(quote, i):
                i += len(quote)
                quote = ""
                continue
            if c == "\n" and len(quote) == 1 and quote != "`":
                quote = ""
            i += 1
            continue
        if spec.line_comment and text.startswith(spec.line_comment, i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if spec.braces and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        if c == "'" and not spec.quote_strings:
            literal = _CHAR_LITERAL.match(text, i)
            i = literal.end() if literal else i + 1
            continue
        if c in "\"'`":
            quote = c * 3 if c != "`" and text.startswith(c * 3, i) else c
            i += len(quote)
            continue
        if c in OPENERS:
            yield i, 1
        elif c in CLOSERS:
            yield i, -1
        i += 1


def bracket_balance(text: str, spec: LanguageSpec) -> tuple[int, int]:
    """``(unmatched closers, unmatched openers)`` of ``text``."""
    depth = lowest = 0
    for _, delta in bracket_events(text, spec):
        depth += delta
        lowest = min(lowest, depth)
    return -lowest, depth - lowest


@dataclass(frozen=True)
class _Window:
    """The lines around the cursor that are looked at: ``lines[cursor_index]`` is the cursor's line."""

    lines: list[str]
    cursor_index: int
    first_line: int  # document line number of lines[0]
    start: int  # str offset of lines[0] in the document
    at_end: bool = False  # the window reaches the document's end


def _line_starts_back(text: str, line_start: int, count: int) -> int:
    pos = line_start
    for _ in range(count):
        if pos <= 0:
            return 0
        prev = text.rfind("\n", 0, pos - 1)
        pos = prev + 1
    return pos


def _window(text: str, offset: int) -> _Window:
    line_start = text.rfind("\n", 0, offset) + 1
    start = _line_starts_back(text, line_start, WINDOW_LINES_BEFORE)
    for _ in range(200):  # back to a top-level line so the parse starts at a statement boundary
        if start == 0 or (text[start : start + 1].strip() and not text[start].isspace()):
            break
        start = _line_starts_back(text, start, 1)
    if offset - start > WINDOW_MAX_CHARS:
        start = text.find("\n", offset - WINDOW_MAX_CHARS) + 1 or line_start
        start = min(start, line_start)
    end = offset
    for _ in range(WINDOW_LINES_AFTER):
        nxt = text.find("\n", end)
        if nxt < 0:
            end = len(text)
            break
        end = nxt + 1
    if end - offset > WINDOW_MAX_CHARS:
        line_end = text.find("\n", offset)
        end = max(text.rfind("\n", offset, offset + WINDOW_MAX_CHARS), line_end) + 1
    lines = text[start:end].split("\n")
    cursor_index = text.count("\n", start, offset)
    first_line = text.count("\n", 0, start)
    return _Window(lines, cursor_index, first_line, start, at_end=end >= len(text))


def _indent_unit(window: _Window, line_indent: str) -> str:
    """The document's indentation step: a tab, or the smallest positive indentation increase seen above."""
    if "\t" in line_indent:
        return "\t"
    above = window.lines[: window.cursor_index + 1]
    if any("\t" in leading_ws(line) for line in above):
        return "\t"
    widths = [indent_width(line) for line in above if line.strip()]
    steps = [b - a for a, b in zip(widths, widths[1:], strict=False) if b > a]
    return " " * (min(steps) if steps else 4)


def _strip_line_comment(code: str, spec: LanguageSpec) -> str:
    marker = spec.line_comment
    if marker and marker in code and not any(q in code for q in "\"'`"):
        code = code[: code.index(marker)]
    return code.rstrip()


def opens_block(code_before_cursor: str, spec: LanguageSpec) -> bool:
    """Whether a line ending with ``code_before_cursor`` opens a block that the next lines fill."""
    code = _strip_line_comment(code_before_cursor, spec)
    if not code:
        return False
    if code[-1] in OPENERS:
        return True
    if code.endswith(":") and not bracket_balance(code, spec)[1]:  # ``def f(self, node:``: an annotation
        if spec.braces:
            return bool(_CASE_LABEL.match(code))
        return spec.name != "python" or bool(_PY_BLOCK_KEYWORDS.match(code))
    return False


def _is_closed(window: _Window, opener_index: int, opener: str, rest_of_opener_line: str) -> bool:
    """Whether the bracket ``opener`` that ends line ``opener_index``'s code has its closer after the cursor.

    The first non-blank line after the opener that is not indented deeper than the opener decides: it closes
    the bracket if it starts, at the opener line's indentation, with the bracket that matches it. A line less
    indented, or one starting with another closer, closes an outer bracket (``def f(`` above a cursor after
    ``x: t.Optional[`` before ``) -> None:``): this one is still open. Without such a line before the window
    ends, it is open.
    """
    if rest_of_opener_line.strip()[:1] in tuple(CLOSERS):
        return True
    width = indent_width(window.lines[opener_index])
    decider = _deciding_line(window, width)
    closer = CLOSERS[OPENERS.index(opener)]
    return decider is not None and indent_width(decider) == width and decider.strip()[0] == closer


def _deciding_line(window: _Window, width: int) -> str | None:
    """The first non-blank line after the cursor's indented ``width`` or less (the one that tells whether a
    bracket opened on a line of that indentation is closed), or None within :data:`SCAN_LINES`."""
    after = window.lines[window.cursor_index + 1 : window.cursor_index + 1 + SCAN_LINES]
    return next((line for line in after if line.strip() and indent_width(line) <= width), None)


def _unmatched_opener_lines(window: _Window, spec: LanguageSpec) -> list[int]:
    """Window line indices of the brackets opened above the cursor's line and not closed before it, innermost
    first (a bracket that a later one above the cursor closed is not counted)."""
    above = "\n".join(window.lines[: window.cursor_index])
    stack: list[int] = []
    for index, delta in bracket_events(above, spec):
        if delta > 0:
            stack.append(index)
        elif stack:
            stack.pop()
    line_starts = [0]
    for line in window.lines[: window.cursor_index]:
        line_starts.append(line_starts[-1] + len(line) + 1)
    return [bisect.bisect_right(line_starts, index) - 1 for index in reversed(stack)]


def unclosed_blocks(window: _Window, spec: LanguageSpec) -> int:
    """How many of the innermost brackets open at the cursor have no closer after it: what a completion on a
    blank line may close (an editor's buffer with a ``}`` not typed yet, or one line of a block left out).

    Innermost first, a bracket's closer is the first non-blank line after the cursor indented no deeper than the
    bracket's line: it is there when that line is at the same indentation and starts with a closing bracket.
    A line indented less, a statement at its indentation, or the document's end means the closer is missing;
    counting stops at the first bracket that is closed, or whose closer the window does not show."""
    scanned_to_end = window.at_end and len(window.lines) - window.cursor_index - 1 < SCAN_LINES
    count = 0
    for opener in _unmatched_opener_lines(window, spec):
        width = indent_width(window.lines[opener])
        decider = _deciding_line(window, width)
        if decider is None and not scanned_to_end:
            break
        if decider is not None and indent_width(decider) == width and decider.strip()[0] in CLOSERS:
            break
        count += 1
    return count


def _block_end_by_indent(window: _Window, width: int) -> int:
    """Last document line of the block whose body is indented ``width``, scanning down from the cursor."""
    last = window.cursor_index
    for i in range(window.cursor_index + 1, min(len(window.lines), window.cursor_index + 1 + SCAN_LINES)):
        line = window.lines[i]
        if not line.strip():
            continue
        if indent_width(line) < width:
            break
        last = i
    return window.first_line + last


@dataclass(frozen=True)
class _TreeFacts:
    in_comment: bool = False
    block_end_line: int | None = None


def _tree_facts(tree: Tree, cursor_byte: int, spec: LanguageSpec, first_line: int) -> _TreeFacts:
    root = tree.root_node
    in_comment = False
    if cursor_byte > 0:
        node: Node | None = root.descendant_for_byte_range(cursor_byte - 1, cursor_byte)
        while node is not None:
            if node.type in spec.comment_types:
                closed_here = node.end_byte <= cursor_byte and (node.text or b"").rstrip().endswith(b"*/")
                in_comment = not closed_here and node.start_byte < cursor_byte
                break
            node = node.parent
    block_end = None
    node = root.descendant_for_byte_range(cursor_byte, cursor_byte)
    while node is not None:
        if node.type in spec.block_types and node.start_byte < cursor_byte < node.end_byte:
            last = node.child(node.child_count - 1) if node.child_count else None
            if last is not None and not last.is_missing and last.type == "}":
                block_end = first_line + node.end_point.row
            break
        node = node.parent
    return _TreeFacts(in_comment, block_end)


def _parse_facts(text: str, offset: int, window: _Window, spec: LanguageSpec) -> _TreeFacts:
    parser = get_parser(spec)
    if parser is None:
        return _TreeFacts()
    source = "\n".join(window.lines)
    cursor_byte = len(text[window.start : offset].encode("utf-8", "surrogatepass"))
    tree = parser.parse(source.encode("utf-8", "surrogatepass"))
    return _tree_facts(tree, cursor_byte, spec, window.first_line)


def _previous_nonblank(window: _Window) -> int | None:
    for i in range(window.cursor_index - 1, -1, -1):
        if window.lines[i].strip():
            return i
    return None


def _block_shape(
    shape: CompletionShape, window: _Window, spec: LanguageSpec, opener: int | None, indent: str
) -> CompletionShape:
    """``shape`` as a block at ``indent``; ``opener``: the line opening it (the cursor's or above)."""
    closed = True
    may_close = 0
    if opener is not None:
        opener_line = window.lines[opener]
        code = opener_line[: len(opener_line) - len(shape.line_rest)] if opener == window.cursor_index else opener_line
        last = _strip_line_comment(code, spec)[-1:]
        if last and last in OPENERS:
            closed = _is_closed(window, opener, last, shape.line_rest if opener == window.cursor_index else "")
            may_close = 0 if closed else max(1, bracket_balance(code, spec)[1])
    else:  # the cursor on a blank line: blocks above it may be left open
        may_close = unclosed_blocks(window, spec)
    end = shape.block_end_line
    if end is None:
        end = _block_end_by_indent(window, indent_width(indent))
    return replace(
        shape,
        kind="block",
        scope_indent=None if spec.braces else _definition_indent(window, indent_width(indent)),
        indent=indent,
        opens_block=opener is not None,
        block_closed=closed,
        block_end_line=end,
        may_close=may_close,
    )


def _definition_indent(window: _Window, width: int) -> int | None:
    """The indentation of the outermost function (``def``) line enclosing a line at ``width`` columns at the
    cursor (lines above it, each less indented than the last; None: none in the window)."""
    limit, found = width, None
    for line in reversed(window.lines[: window.cursor_index]):
        if not line.strip() or indent_width(line) >= limit:
            continue
        limit = indent_width(line)
        if _DEFINITION_LINE.match(line):
            found = limit
        if limit == 0:
            break
    return found


def analyze(
    text: str, offset: int, language: str | LanguageSpec | None = None, path: str | None = None
) -> CompletionShape:
    """The completion shape at ``offset``; ``language``: an LSP languageId, a spec, or None (by ``path``)."""
    spec = language if isinstance(language, LanguageSpec) else detect_language(language, path)
    offset = max(0, min(offset, len(text)))
    window = _window(text, offset)
    line = window.lines[window.cursor_index].rstrip("\r")
    column = offset - (text.rfind("\n", 0, offset) + 1)
    before, after = line[:column], line[column:]
    line_indent = leading_ws(line)
    facts = _parse_facts(text, offset, window, spec)
    pending = bracket_balance(before, spec)[1] - bracket_balance(after, spec)[0]
    shape = CompletionShape(
        "line",
        language=spec.name,
        line_rest=after,
        line_indent=line_indent,
        indent=line_indent,
        block_end_line=facts.block_end_line,
        may_close=max(0, pending),
        in_comment=facts.in_comment,
    )
    autopair = spec.braces and before.rstrip().endswith("{") and after.strip().startswith("}")
    if facts.in_comment or (after.strip() and not autopair):
        return shape
    unit = _indent_unit(window, line_indent)
    if before.strip():
        if not opens_block(before, spec):
            return shape
        return _block_shape(shape, window, spec, window.cursor_index, line_indent + unit)
    prev = _previous_nonblank(window)
    if prev is not None and opens_block(window.lines[prev], spec):
        indent = before or leading_ws(window.lines[prev]) + unit
        return _block_shape(shape, window, spec, prev, indent)
    indent = before if before or prev is None else leading_ws(window.lines[prev])
    return _block_shape(shape, window, spec, None, indent)
