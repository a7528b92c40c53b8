"""Stop rules on completion text, the StopFn adapter, and trimming, in every supported language."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from lookahead_lsp.context.healing import HealingConstraint, vocab_index
from lookahead_lsp.context.postprocess import (
    NoStrayCloser,
    StopRules,
    WordEnd,
    completion_constraint,
    make_stop_fn,
    trim,
)
from lookahead_lsp.context.syntax import CompletionShape, analyze


def split(marked: str, language: str) -> tuple[CompletionShape, str]:
    """The shape at ``|`` and the suffix after it."""
    offset = marked.index("|")
    text = marked[:offset] + marked[offset + 1 :]
    return analyze(text, offset, language), text[offset:]


def finish(marked: str, language: str, completion: str) -> str:
    shape, suffix = split(marked, language)
    return trim(completion, shape, suffix)


# A block completion that runs on past its block: cut at the line that leaves it.
BLOCK_CASES = [
    (
        "python",
        "def f(x):\n    if x:\n        |\n    return 0\n",
        "y = x * 2\n        return y\n    else:\n        return 1\n",
        "y = x * 2\n        return y",
    ),
    (
        "javascript",
        "function f(x) {\n  if (x) {\n    |\n  }\n  return 0;\n}\n",
        "const y = x * 2;\n    return y;\n  }\n  return 1;\n}\n",
        "const y = x * 2;\n    return y;",
    ),
    (
        "typescript",
        "function f(x: number): number {\n  |\n}\n",
        "const y: number = x * 2;\n  return y;\n}\n\nfunction g(): void {}\n",
        "const y: number = x * 2;\n  return y;",
    ),
    (
        "go",
        "func f(x int) int {\n\tif x > 0 {\n\t\t|\n\t}\n\treturn 0\n}\n",
        "y := x * 2\n\t\treturn y\n\t}\n\treturn 1\n}\n",
        "y := x * 2\n\t\treturn y",
    ),
    (
        "rust",
        "fn f(x: i32) -> i32 {\n    if x > 0 {\n        |\n    }\n    0\n}\n",
        "let y = x * 2;\n        return y;\n    }\n    1\n}\n",
        "let y = x * 2;\n        return y;",
    ),
    (
        "java",
        "class A {\n  int f(int x) {\n    |\n  }\n}\n",
        "int y = x * 2;\n    return y;\n  }\n\n  int g() { return 1; }\n}\n",
        "int y = x * 2;\n    return y;",
    ),
    (
        "c",
        "int f(int x) {\n    for (int i = 0; i < x; i++) {\n        |\n    }\n    return x;\n}\n",
        "x += i;\n        if (x > 10) { break; }\n    }\n    return 0;\n}\n",
        "x += i;\n        if (x > 10) { break; }",
    ),
    (
        "cpp",
        "struct S {\n  int f(int x) {\n    |\n  }\n};\n",
        "auto v = std::vector<int>{x, x};\n    return v[0];\n  }\n  int g();\n};\n",
        "auto v = std::vector<int>{x, x};\n    return v[0];",
    ),
]


@pytest.mark.parametrize(("language", "marked", "completion", "expected"), BLOCK_CASES, ids=[c[0] for c in BLOCK_CASES])
def test_block_completion_is_cut_where_it_leaves_the_block(
    language: str, marked: str, completion: str, expected: str
) -> None:
    shape, suffix = split(marked, language)
    assert shape.kind == "block"
    assert trim(completion, shape, suffix) == expected
    cut = StopRules(shape, suffix).check(completion)  # decided while streaming, too
    assert cut is not None and completion[:cut].rstrip() == expected


def test_a_model_that_ends_its_middles_keeps_the_lines_after_the_block() -> None:
    """``dedent=False``: the lines one level out are the rest of the function, up to where the suffix repeats."""
    marked = "def longest(strings):\n    if not strings:\n        |\n    return result\n"
    completion = "return None\n    result = max(strings, key=len)\n    return result\n"
    shape, suffix = split(marked, "python")
    assert trim(completion, shape, suffix) == "return None"
    assert StopRules(shape, suffix, dedent=False).check(completion) is not None  # the suffix, repeated
    assert trim(completion, shape, suffix, dedent=False) == "return None\n    result = max(strings, key=len)"
    top_level = "return None\n    return max(strings)\n\n\nif __name__ == '__main__':\n    main()\n"
    assert trim(top_level, shape, "", dedent=False) == "return None\n    return max(strings)"  # not column 0
    method = "class A:\n    def f(self, x):\n        if x:\n            |\n        return x\n"
    shape, suffix = split(method, "python")
    out = "x += 1\n        x *= 2\n    def g(self):\n        pass\n"  # below the code after the cursor
    assert trim(out, shape, suffix, dedent=False) == "x += 1\n        x *= 2"  # not out of its method
    loop = "def fib4(n):\n    if n < 4:\n        |\n        results.append(1)\n    return results[-1]\n"
    shape, suffix = split(loop, "python")  # the hole ends with the line whose body is the suffix
    out = "return results[n]\n\n    for _ in range(4, n + 1):\n        results.append(1)\n    return results[-1]\n"
    assert trim(out, shape, suffix, dedent=False) == "return results[n]\n\n    for _ in range(4, n + 1):"


def test_a_model_that_ends_its_middles_may_leave_a_nested_function_and_repeat_one_line() -> None:
    marked = "def outer(a):\n    def inner(i):\n        if i:\n            |\n    return inner(a)\n"
    shape, suffix = split(marked, "python")
    out = "return 1\n        return 0\n    total = inner(a)\n\n\nprint(1)\n"
    assert trim(out, shape, suffix, dedent=False) == "return 1\n        return 0\n    total = inner(a)"
    marked = "def f(m):\n    if m < 1:\n        |\n        return False\n    return True\n"
    shape, suffix = split(marked, "python")
    twice = "m += 1\n        return False\n    if m > 12:\n        return False\n    return True\n"
    assert trim(twice, shape, suffix) == "m += 1"  # one telling line like the suffix's is a repeat
    assert trim(twice, shape, suffix, dedent=False) == "m += 1\n        return False\n    if m > 12:"  # two are


def test_a_last_line_opening_a_block_without_its_body_is_dropped() -> None:
    marked = "def f(l):\n    if l:\n        |\n    return False\n"
    shape, suffix = split(marked, "python")
    assert trim("return True\n    else:\n    return False\n", shape, suffix, dedent=False) == "return True"
    body_after = "def f(l):\n    for x in l:\n        |\n            print(x)\n"
    shape, suffix = split(body_after, "python")
    assert trim("y = x\n        if y:\n", shape, suffix) == "y = x\n        if y:"  # the suffix is its body


def test_python_top_level_block_stops_at_the_next_definition() -> None:
    completion = "import sys\nimport re\n\n\ndef main():\n    pass\n"
    assert finish("import os\n|\n", "python", completion) == "import sys\nimport re"


def test_unclosed_block_keeps_its_closing_line() -> None:
    completion = "\n    return 1;\n}\n\nint g() {\n"
    assert finish("int f() {|\n", "c", completion) == "\n    return 1;\n}"


def test_autopaired_block_leaves_the_closer_on_its_own_line() -> None:
    assert finish("function f() {|}\n", "javascript", "\n  return 1;\n}") == "\n  return 1;\n"


def test_mid_line_print_stops_before_the_closing_paren() -> None:
    assert finish("print(|)\n", "python", '"hello")\nprint("again")') == '"hello"'
    assert finish("print(|)\n", "python", "foo(1))") == "foo(1)"


def test_mid_line_call_stops_before_the_rest_of_the_line() -> None:
    assert finish("x = foo(|, y)\n", "python", "a, y)\n") == "a"
    assert finish("x = foo(|, y)\n", "python", "a, b, y)") == "a, b"
    assert finish("x = foo(|, y)\n", "python", "bar(c, y), y)") == "bar(c, y)"


def test_a_signature_cut_at_an_annotation_keeps_its_closing_paren() -> None:
    marked = "class V:\n    def visit_For(self, node: |\n        pass\n"
    completion = "nodes.For, **kwargs: t.Any) -> None:\n        for child in node.body:\n"
    assert finish(marked, "python", completion) == "nodes.For, **kwargs: t.Any) -> None:"


def test_mid_line_completion_never_repeats_a_closer_after_the_cursor() -> None:
    assert finish("x = foo(|, y)\n", "python", "a)") == "a"
    assert finish("if (ok(|)) {\n", "c", "x)) {") == "x"


def test_mid_line_tail_that_starts_the_rest_is_dropped() -> None:
    assert finish("x = foo(|, y)  # note\n", "python", "a, y)") == "a"


def test_mid_line_keeps_a_space_the_rest_needs() -> None:
    assert finish("return |x\n", "python", "not x") == "not "
    assert finish("y = x| + 1\n", "python", " * 2 + 1") == " * 2"


def test_line_shape_stops_at_newline_and_closes_open_parens() -> None:
    shape, suffix = split("x = foo(a|\n", "python")
    assert StopRules(shape, suffix).check(", b)\ny = 2") == len(", b)")
    assert trim(", b)\ny = 2", shape, suffix) == ", b)"
    assert StopRules(shape, suffix).check(", b)") is None  # not decided until the line ends


def test_suffix_repetition_is_cut() -> None:
    marked = "def f(items):\n    total = 0\n    |\n    for item in items:\n        total += item\n    return total\n"
    completion = "count = len(items)\n    for item in items:\n        total += item\n"
    assert finish(marked, "python", completion) == "count = len(items)"


def test_short_suffix_line_needs_two_lines_to_count_as_repetition() -> None:
    marked = "def f(x):\n    |\n    pass\n    return x\n"
    assert finish(marked, "python", "y = 1\n    pass\n    z = 2") == "y = 1\n    pass\n    z = 2"
    assert finish(marked, "python", "y = 1\n    pass\n    return x\n") == "y = 1"


def test_unicode_and_tabs() -> None:
    marked = "def grüße(x):\n\tif x:\n\t\t|\n\treturn 'ü'\n"
    completion = "s = '日本語' + x\n\t\treturn s\n\treturn 'ü'\n"
    assert finish(marked, "python", completion) == "s = '日本語' + x\n\t\treturn s"


def test_brackets_in_strings_do_not_count() -> None:
    assert finish("print(|)\n", "python", '"a(", "b)")') == '"a(", "b)"'


def test_multiline_call_in_python_block_is_not_a_dedent() -> None:
    marked = "def f():\n    |\n"
    completion = "x = g(\n1,\n)\n    return x\nprint(1)\n"
    assert finish(marked, "python", completion) == "x = g(\n1,\n)\n    return x"


def test_truncated_block_drops_the_partial_last_line() -> None:
    shape, suffix = split("def f():\n    |\n", "python")
    assert trim("x = 1\n    y = fo", shape, suffix, truncated=True) == "x = 1"
    assert trim("x = 1\n    y = g(1,", shape, suffix) == "x = 1"  # unbalanced tail goes too


def test_trailing_blank_lines_are_dropped() -> None:
    shape, suffix = split("def f():\n    |\n", "python")
    assert trim("return 1\n    \n\n", shape, suffix) == "return 1"


class FakeTokens:
    """A tokenizer stand-in: token i decodes to ``pieces[i]``."""

    def __init__(self, pieces: Sequence[str]) -> None:
        self.pieces = list(pieces)
        self.calls = 0

    def decode(self, ids: Sequence[int]) -> str:
        self.calls += 1
        return "".join(self.pieces[i] for i in ids)


def test_stop_fn_keeps_tokens_up_to_the_one_crossing_the_cut() -> None:
    shape, suffix = split("print(|)\n", "python")
    tokens = FakeTokens(['"he', 'llo"', ")\n", "x"])
    stop = make_stop_fn(tokens.decode, StopRules(shape, suffix))
    assert stop([0]) is None
    assert stop([0, 1]) is None  # ")" not there yet
    assert stop([0, 1, 2, 3]) == 2  # the cut is before ")", at the end of token 1


def test_stop_fn_cut_inside_a_token_keeps_that_token() -> None:
    shape, suffix = split("x = 1|\n", "python")
    tokens = FakeTokens([" +", " 2\ny", " = 3"])
    stop = make_stop_fn(tokens.decode, StopRules(shape, suffix))
    assert stop([0, 1]) == 2


def test_stop_fn_applies_rules_after_the_healed_text() -> None:
    shape, suffix = split("x = subpr|\n", "python")
    tokens = FakeTokens([" sub", "process", ".run()\n", "y"])
    stop = make_stop_fn(tokens.decode, StopRules(shape, suffix), healed_text=" subpr")
    assert stop([0]) is None  # the healed characters are not all re-typed yet
    assert stop([0, 1, 2]) == 3


def test_stop_fn_skips_work_when_the_text_did_not_grow() -> None:
    shape, suffix = split("x = 1|\n", "python")
    tokens = FakeTokens(["a", ""])
    stop = make_stop_fn(tokens.decode, StopRules(shape, suffix))
    stop([0])
    calls = tokens.calls
    assert stop([0, 1]) is None and tokens.calls == calls + 1


def test_out_of_time_a_block_ends_at_its_next_line_end() -> None:
    shape, suffix = split("def f(a):\n    |\n", "python")
    assert shape.kind != "line"
    tokens = FakeTokens(["\n", "    if a", ":\n", "        return", " 1\n", "    return 2"])
    late = {"now": False}
    stop = make_stop_fn(tokens.decode, StopRules(shape, suffix), out_of_time=lambda: late["now"])
    assert stop([0, 1, 2]) is None  # in time: the block goes on
    late["now"] = True
    assert stop([0, 1, 2, 3]) == 3  # out of time: the lines it has, up to the last complete one
    fresh = make_stop_fn(tokens.decode, StopRules(shape, suffix), out_of_time=lambda: True)
    assert fresh([0]) is None  # a blank line alone is not a completion: wait for a line of code
    assert fresh([0, 1]) is None  # the first line is still being written


def test_out_of_time_a_line_ends_where_its_current_word_ends() -> None:
    shape, suffix = split("x = |\n", "python")
    assert shape.kind == "line"
    tokens = FakeTokens(["comp", "ute", "_total", "(a", ", b)\n"])
    late = {"now": False}
    line_end = WordEnd(lambda: late["now"])
    stop = make_stop_fn(tokens.decode, StopRules(shape, suffix), line_end=line_end)
    assert stop([0]) is None  # in time
    late["now"] = True
    assert stop([0, 1]) is None  # "compute" may go on: one more step tells
    assert stop([0, 1, 2]) is None  # it did: "compute_total"
    assert stop([0, 1, 2, 3]) == 3  # "(" ends the word: the tokens up to it are kept
    assert line_end.apply(tokens.decode([0, 1, 2, 3])) == "compute_total"
    inside = FakeTokens(["comp", "ute_total(a", ")"])
    cut_inside = WordEnd(lambda: True)
    stop = make_stop_fn(inside.decode, StopRules(shape, suffix), line_end=cut_inside)
    assert stop([0]) is None
    assert stop([0, 1]) == 2  # the token holding the word's end is kept whole ...
    assert cut_inside.apply(inside.decode([0, 1])) == "compute_total"  # ... and the text cut inside it


def test_out_of_time_a_line_at_a_word_boundary_ends_at_once_and_a_blank_one_waits() -> None:
    shape, suffix = split("x = |\n", "python")
    tokens = FakeTokens(["  ", "foo", "(", "bar", ")"])
    line_end = WordEnd(lambda: True)
    stop = make_stop_fn(tokens.decode, StopRules(shape, suffix), line_end=line_end)
    assert stop([0]) is None  # nothing to show yet
    assert stop([0, 1]) is None  # "foo" may go on
    assert stop([0, 1, 2]) == 2
    assert line_end.apply(tokens.decode([0, 1, 2])) == "  foo"
    early = WordEnd(lambda: True)
    assert early.cut("print(x, ") == len("print(x,")  # ends on punctuation and a space: cut now, no trailing blank
    assert early.apply("print(x, y)") == "print(x,"
    never = WordEnd(lambda: False)
    assert never.cut("compute") is None and never.apply("compute_total") == "compute_total"


def test_complete_lines_ends_after_a_closed_statement() -> None:
    shape, suffix = split("def f(a):\n    |\n", "python")
    rules = StopRules(shape, suffix)
    assert rules.complete_lines("x = 1\n    y") == 5
    assert rules.complete_lines("x = 1\ny = 2\nz") == 11
    assert rules.complete_lines("\n   \n") is None
    assert rules.complete_lines("x = 1") is None
    assert rules.complete_lines("call(\n    a,\n") is None  # inside the call's brackets: not a statement yet
    assert rules.complete_lines("x = 1\ncall(\n    a,\n") == 5
    assert rules.complete_lines("call(\n    a,\n)\nmore") == 14


def test_a_late_first_line_ends_at_its_line_end_never_inside_it() -> None:
    shape, suffix = split("def f(a):\n    |\n", "python")
    tokens = FakeTokens(["x = comp", "ute_total", "(a)", "\n    y", " = 2\n", "    return"])
    late = {"now": False}
    stop = make_stop_fn(tokens.decode, StopRules(shape, suffix), line_late=lambda: late["now"])
    assert stop([0]) is None
    late["now"] = True
    assert stop([0, 1]) is None and stop([0, 1, 2]) is None  # late, but the line goes on to its end
    assert stop([0, 1, 2, 3]) == 3  # it ended: the first line, nothing more
    early = make_stop_fn(tokens.decode, StopRules(shape, suffix), line_late=lambda: late["now"])
    late["now"] = False
    assert early([0, 1, 2, 3]) is None  # in time on the first line: the block goes on ...
    late["now"] = True
    assert early([0, 1, 2, 3, 4]) is None  # ... and a line deadline passed after it does not end it


def test_deadlines_as_publish_points_publish_the_word_then_the_line_then_each_line() -> None:
    shape, suffix = split("def f(a):\n    |\n", "python")
    tokens = FakeTokens(["x = comp", "ute_total", "(a)", "\n    y", " = 2\n", "    z = 3\n"])
    published: list[tuple[int, str]] = []
    stop = make_stop_fn(
        tokens.decode,
        StopRules(shape, suffix),
        line_end=WordEnd(lambda: True),  # the runaway-line cap has passed
        publish=lambda kept, text: published.append((len(kept), text)),
    )
    for n in range(1, len(tokens.pieces) + 1):
        assert stop(list(range(n))) is None  # deadlines never end it: decoding goes on
    assert published == [
        (2, "x = compute_total"),
        (3, "x = compute_total(a)"),
        (5, "x = compute_total(a)\n    y = 2"),
        (6, "x = compute_total(a)\n    y = 2\n    z = 3"),
    ]


def test_progressive_publishes_a_blocks_first_whole_line_before_any_deadline() -> None:
    shape, suffix = split("def f(a):\n    |\n", "python")
    tokens = FakeTokens(["x = g(", "a,\n", "  b)\n", "    y", " = 2\n"])
    published: list[tuple[int, str]] = []
    never = make_stop_fn(
        tokens.decode,
        StopRules(shape, suffix),
        "",
        lambda: False,  # no deadline passes
        line_late=lambda: False,
        publish=lambda kept, text: published.append((len(kept), text)),
    )
    for n in range(1, len(tokens.pieces) + 1):
        assert never(list(range(n))) is None
    assert published == [  # not "x = g(a,": a line is whole once its brackets close
        (3, "x = g(a,\n  b)"),
        (5, "x = g(a,\n  b)\n    y = 2"),
    ]
    quiet = make_stop_fn(tokens.decode, StopRules(shape, suffix), "", lambda: False, line_late=lambda: False)
    assert all(quiet(list(range(n))) is None for n in range(1, len(tokens.pieces) + 1))  # without publish: no cut


def test_a_blank_line_with_no_open_bracket_may_not_end_as_a_lone_closer(tokenizer: Any) -> None:
    """Where the stop rules would cut a line of ``}`` to nothing, the model's next choice is decoded instead."""
    closed = "function f(a) {\n  if (a) {\n    g();\n    \n  }\n}\n"
    cursor = closed.index("    \n") + 4
    healing = HealingConstraint(vocab_index(tokenizer), " ", word_follows=True)
    constraint = completion_constraint(tokenizer, analyze(closed, cursor, "javascript"), healing)
    assert isinstance(constraint, NoStrayCloser)
    first = set(constraint.allowed([]) or ())
    brace, brace_line, word = (tokenizer.encode(t, add_special_tokens=False)[0] for t in (" }", " }\n", " return"))
    assert brace_line not in first and word in first
    assert brace in first  # `} else {` may be written: only a line of closers alone may not end
    assert tokenizer.encode("\n", add_special_tokens=False)[0] not in set(constraint.allowed([brace]) or ())
    else_ids = tokenizer.encode(" } else {\n", add_special_tokens=False)
    assert else_ids[1] in set(constraint.allowed(else_ids[:1]) or ())
    written = tokenizer.encode(" x", add_special_tokens=False)
    assert constraint.allowed(written) is None  # code written: no constraint left (the healing one is done)
    # the if's closer missing: a blank line there may close it, and the healing constraint alone applies
    open_if = closed.replace("    \n  }\n", "    \n")
    shape = analyze(open_if, cursor, "javascript")
    assert shape.may_close == 1 and completion_constraint(tokenizer, shape, healing) is healing
    assert completion_constraint(tokenizer, analyze("x = f(", 6, "python"), None) is None  # a line: none


def test_a_closer_at_another_indentation_is_not_the_suffix_repeated() -> None:
    """The method's ``}`` left out before the class's: the same character, another block (HumanEval's Java)."""
    text = "class A {\n    long f(String s) {\n        return s.length();\n    \n}\n"
    cursor = text.index("    \n}") + 4
    shape = analyze(text, cursor, "java")
    assert trim("}\n", shape, text[cursor:]) == "}"
    assert trim("}\n}\n", shape, text[cursor:]) == "}"  # the class's own closer after it is the suffix's


def test_a_closer_that_reopens_its_line_is_kept() -> None:
    """``} else {`` on a blank line inside a closed block: the line closes one block and opens the next."""
    text = (
        "class A {\n    int f(int n) {\n        if (n > 0) {\n            n++;\n        \n            n--;\n        }\n"
    )
    cursor = text.index("        \n") + 8
    shape = analyze(text, cursor, "java")
    assert shape.may_close == 0
    assert trim("} else {\n", shape, text[cursor:]) == "} else {"
    assert trim("}\n", shape, text[cursor:]) == ""  # a stray closer alone is still cut
    assert StopRules(shape, text[cursor:]).check("} els") is None  # the rest of the line tells
    # its own brackets are judged by where the line ends: the leading `}` does not make `)` a stray closer
    assert trim("} else if (n == ')') {\n", shape, text[cursor:]) == "} else if (n == ')') {"
    assert trim("} else if (a[n] > 1.7f) {\n", shape, text[cursor:]) == "} else if (a[n] > 1.7f) {"
    assert trim("} else if (n > 1)) {\n", shape, text[cursor:]) == ""  # one `)` too many: still cut
