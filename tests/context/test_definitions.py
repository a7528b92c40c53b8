"""context/definitions.py: the symbol table, which definitions a cursor gets, and the import lines above a cut
prefix (context/prompt.py)."""

from __future__ import annotations

from typing import Any

from lookahead_lsp.context.definitions import (
    DEFINITION_SCORE,
    SymbolTable,
    cursor_context,
    definitions_at,
    name_words,
)
from lookahead_lsp.context.prompt import PromptBudget, PromptBuilder, PromptInput
from lookahead_lsp.context.snippets import SnippetIndex

EXCEPTIONS = '''class UsageError(Exception):
    """An internal exception that signals a usage error."""

    def __init__(self, message: str, ctx: object = None) -> None:
        super().__init__(message)
        self.ctx = ctx
        self.cmd = None


class BadArgumentUsage(UsageError):
    """Raised if an argument is generally supplied but the use of the argument was incorrect."""

    def __init__(self, message: str, ctx: object = None) -> None:
        super().__init__(message, ctx)
        self.extra = None
        self.more = None
'''
TESTS = "class BadArgumentUsage:\n    pass\n"  # the same name in another module: never chosen
UTILS = "def echo(message: str, err: bool = False) -> None:\n    print(message)\n"
UNRELATED = "def below_zero(operations):\n    balance = 0\n    for op in operations:\n        balance += op\n"
CORE = (
    "import os\nfrom .exceptions import BadArgumentUsage, UsageError\nfrom . import utils\nfrom typing import Any\n\n\n"
    + "".join(f"def helper_{i}(value):\n    return value + {i}\n\n\n" for i in range(40))
    + "def parse(args: list[str]) -> None:\n    if not args:\n        utils.echo('nothing')\n        raise "
)


def table_of(files: dict[str, str]) -> SymbolTable:
    table = SymbolTable()
    for path, text in files.items():
        assert table.update(path, text)
    return table


WORKSPACE = {
    "src/click/exceptions.py": EXCEPTIONS,
    "tests/test_errors.py": TESTS,
    "src/click/utils.py": UTILS,
    "bank.py": UNRELATED,
}


def test_imported_names_resolve_to_their_module_and_the_unused_import_comes_too() -> None:
    table = table_of(WORKSPACE)
    sections, imports = definitions_at(table, "src/click/core.py", CORE, len(CORE))
    by_path = {s.path: s for s in sections}
    assert set(by_path) == {"src/click/exceptions.py", "src/click/utils.py"}  # never the tests' or bank.py
    assert "def echo(message: str, err: bool = False) -> None:" in by_path["src/click/utils.py"].text
    errors = by_path["src/click/exceptions.py"].text
    assert "class BadArgumentUsage(UsageError):" in errors and "def __init__(self, message: str" in errors
    assert all(s.score > DEFINITION_SCORE - 100 for s in sections)
    assert [s.local for s in imports.statements] == [False, True, True, False]


def test_a_name_the_file_uses_far_from_the_cursor_comes_after_those_the_cursor_uses_with_its_use() -> None:
    """``echo`` is imported and called a screen above the cursor's region: its definition comes too (the file's
    vocabulary from other modules), ranked after ``UsageError``, which the cursor's lines use; and the line that
    calls it, the file's own, fitted first: how this file calls it. ``UsageError``'s use is in view: no line."""
    text = (
        "import os\nfrom .utils import echo\nfrom .exceptions import UsageError\n\n\n"
        "def report(message):\n    echo(os.sep + message)\n\n\n"
        + "".join(f"def helper_{i}(value):\n    return value + {i}\n\n\n" for i in range(40))
        + "def parse(args: list[str]) -> None:\n    if not args:\n        raise UsageError('no args')\n    "
    )
    sections, _ = definitions_at(table_of(WORKSPACE), "src/click/core.py", text, len(text))
    by_path = {s.path: s for s in sections}
    assert set(by_path) == {"src/click/exceptions.py", "src/click/utils.py", "src/click/core.py"}
    assert "def echo(message: str, err: bool = False) -> None:" in by_path["src/click/utils.py"].text
    assert by_path["src/click/exceptions.py"].score > by_path["src/click/utils.py"].score
    uses = by_path["src/click/core.py"]
    assert (uses.text, uses.start_line) == ("    echo(os.sep + message)\n", 6)
    assert uses.score > by_path["src/click/exceptions.py"].score


def test_the_uses_shown_are_the_nearest_outside_the_region_and_the_imports_at_most_four() -> None:
    """Six imported helpers, each called twice far above the cursor and never near it: the four ranked first (used
    nearest the cursor) get a line each, their call nearest the cursor, in file order; the import statement is no
    use to show."""
    helpers = [f"check_{word}" for word in ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot")]
    module = "".join(f"def {name}(value):\n    return value\n\n\n" for name in helpers)
    text = (
        f"from .checks import {', '.join(helpers)}\n\n\n"
        + "".join(f"def first_{name}(x):\n    return {name}(x, 1)\n\n\n" for name in helpers)
        + "".join(f"def second_{name}(x):\n    return {name}(x, 2)\n\n\n" for name in helpers)
        + "".join(f"def helper_{i}(value):\n    return value + {i}\n\n\n" for i in range(40))
        + "def run(values):\n    total = 0\n    "
    )
    sections, _ = definitions_at(table_of({"pkg/checks.py": module}), "pkg/run.py", text, len(text))
    (uses,) = [s for s in sections if s.path == "pkg/run.py"]
    lines = uses.text.splitlines()
    assert lines == [f"    return {name}(x, 2)" for name in helpers[2:]]


def test_the_table_follows_edits_and_removals() -> None:
    table = table_of(WORKSPACE)
    assert not table.update("src/click/utils.py", UTILS)  # the same text: nothing changed
    assert table.update("src/click/utils.py", UTILS.replace("err: bool = False", "err: bool = False, nl: bool = True"))
    sections, _ = definitions_at(table, "src/click/core.py", CORE, len(CORE))
    assert any("nl: bool = True" in s.text for s in sections)
    assert table.update("src/click/utils.py", None)
    sections, _ = definitions_at(table, "src/click/core.py", CORE, len(CORE))
    assert all(s.path != "src/click/utils.py" for s in sections)


def test_cursor_context_puts_definitions_before_windows_and_unrelated_files_add_nothing() -> None:
    snippets = SnippetIndex()
    for path, text in WORKSPACE.items():
        snippets.add_document(path, text)
    alone = cursor_context(snippets, table_of(WORKSPACE), "src/click/core.py", CORE, len(CORE))
    workspace = {**WORKSPACE, "weights.js": "function totalWeight(points, factor) {\n  return 0;\n}\n"}
    crowded = cursor_context(snippets, table_of(workspace), "src/click/core.py", CORE, len(CORE))
    assert alone == crowded
    assert alone.snippets[0].score >= DEFINITION_SCORE - 100


def test_go_and_java_see_their_package_and_c_its_headers() -> None:
    table = table_of(
        {
            "geo/scale.go": "package geo\n\nfunc Scale(v []float64, f float64) []float64 {\n\treturn v\n}\n",
            "bank/Account.java": "package bank;\npublic class Account {\n    public Account(String owner) {}\n}\n",
            "lib/list.h": "int list_push(struct list *l, void *item);\n",
        }
    )
    go = "package geo\n\nfunc Double(v []float64) []float64 {\n\treturn Scale(v, 2)\n}\n"
    assert "func Scale(" in definitions_at(table, "geo/double.go", go, len(go) - 3)[0][0].text
    java = 'package bank;\nclass Teller {\n    void open() {\n        Account a = new Account("x");\n    }\n}\n'
    assert "public Account(String owner)" in definitions_at(table, "bank/Teller.java", java, 60)[0][0].text
    c = '#include "list.h"\nvoid f(struct list *l) {\n  list_push(l, 0);\n}\n'
    assert "int list_push(" in definitions_at(table, "lib/f.c", c, len(c) - 3)[0][0].text


def test_import_lines_show_above_a_cut_prefix_within_their_share(tokenizer: Any) -> None:
    table = table_of(WORKSPACE)
    context = cursor_context(SnippetIndex(), table, "src/click/core.py", CORE, len(CORE))
    builder = PromptBuilder(tokenizer, PromptBudget(total=512))
    request = PromptInput("src/click/core.py", CORE, len(CORE), snippets=context.snippets, imports=context.imports)
    built = builder.build(request)
    text = tokenizer.decode(built.token_ids)
    assert built.prefix_line > 5 and 0 < built.counts["imports"] <= int(builder.budget.total * 0.5 * 0.25)
    assert "<|fim_prefix|>import os\nfrom .exceptions import BadArgumentUsage, UsageError\n" in text
    assert len(built.token_ids) <= 512
    uncut = builder.build(PromptInput("src/click/core.py", CORE[:400], 400, imports=context.imports))
    assert uncut.counts["imports"] == 0 and uncut.prefix_line == 0  # they are in the prefix itself


def test_no_import_head_when_the_cursor_is_among_the_imports(tokenizer: Any) -> None:
    text = "".join(f"from .module_{i} import name_{i}, other_name_{i}\n" for i in range(80)) + "from .module_80 import "
    context = cursor_context(SnippetIndex(), table_of({}), "pkg/__init__.py", text, len(text))
    assert len(context.imports) >= 80
    built = PromptBuilder(tokenizer, PromptBudget(total=512)).build(
        PromptInput("pkg/__init__.py", text, len(text), imports=context.imports)
    )
    assert built.prefix_line > 0 and built.counts["imports"] == 0


def test_a_parameter_spelled_like_an_import_is_not_a_use_of_it() -> None:
    """``def validate(self, echo)`` binds its own ``echo``: the cursor's ``if echo`` reads the parameter, so
    utils' ``echo`` is not wanted for it, while ``UsageError``, the import the function does use, is."""
    text = (
        "from .utils import echo\nfrom .exceptions import UsageError\n\n\n"
        "def validate(self, echo: bool) -> None:\n    if not echo:\n        raise UsageError('x')\n    if echo"
    )
    sections, _ = definitions_at(table_of(WORKSPACE), "src/click/core.py", text, len(text))
    assert {s.path for s in sections} == {"src/click/exceptions.py"}


NODES = "".join(
    f'class {name}(Node):\n    """A {name} node."""\n'
    for name in ("Output", "Const", "Template", "Macro", "CallBlock", "FilterBlock", "Assign", "Name", "Getattr")
    + tuple(f"Extra{i}" for i in range(30))
)


def test_name_words_split_every_spelling_of_an_identifier() -> None:
    assert name_words("LINE_COMMENT_PREFIX") == {"line", "comment", "prefix"}
    assert name_words("lineCommentPrefix") == name_words("LineCommentPrefix") == {"line", "comment", "prefix"}
    assert name_words("HTTPError") == {"http", "error"}
    assert name_words("visit_CallBlock") == {"visit", "call", "block"}
    assert name_words("self") == name_words("x_1") == frozenset()


def test_a_member_the_region_does_not_show_comes_first_when_its_lines_name_its_words() -> None:
    """``nodes`` has 39 classes and the cursor's function is ``visit_call_block``: of the members the region does
    not show, ``CallBlock`` shares two of its words and ``FilterBlock`` one, ``Output`` none; ``Const``, which
    the region uses, still comes (the cursor's code calls it), after them."""
    text = (
        "from . import nodes\n\n\n"
        + "".join(f"def helper_{i}(value):\n    return value + {i}\n\n\n" for i in range(40))
        + "def visit_call_block(node, block_frame):\n    value = nodes.Const(1)\n    if isinstance(node, "
    )
    sections, _ = definitions_at(table_of({"src/jinja/nodes.py": NODES}), "src/jinja/compiler.py", text, len(text))
    (section,) = sections
    stubs = [line for line in section.text.split("\n") if line.startswith("class ")]
    assert stubs[:2] == ["class CallBlock(Node):", "class FilterBlock(Node):"]
    assert "class Const(Node):" in stubs and "class Output(Node):" not in stubs


def test_the_named_like_definitions_do_not_change_while_the_cursors_line_is_typed() -> None:
    """The words of the cursor's own line do not count (a key there would move the prompt's cached context):
    typing ``filter_output = `` on it leaves the sections as they were."""
    head = "from . import nodes\n\n\ndef visit_call_block(node):\n    value = nodes.Const(1)\n    "
    table = table_of({"src/jinja/nodes.py": NODES})
    before, _ = definitions_at(table, "src/jinja/compiler.py", head, len(head))
    typed = head + "filter_output = "
    after, _ = definitions_at(table, "src/jinja/compiler.py", typed, len(typed))
    assert before == after and "class CallBlock(Node):" in before[0].text


def test_an_import_lines_words_do_not_make_a_name_named_like_the_code() -> None:
    """``from .filters import apply_filter`` names a module and a function, not what the cursor's code does:
    ``nodes.FilterBlock`` shares its word "filter" and is still not wanted."""
    text = "from . import nodes\nfrom .filters import apply_filter\n\n\ndef run(node):\n    return "
    sections, _ = definitions_at(table_of({"src/jinja/nodes.py": NODES}), "src/jinja/compiler.py", text, len(text))
    assert not any("FilterBlock" in s.text for s in sections)
    code = text.replace("def run(node):", "def run_filter(node):")
    sections, _ = definitions_at(table_of({"src/jinja/nodes.py": NODES}), "src/jinja/compiler.py", code, len(code))
    assert any("class FilterBlock(Node):" in s.text for s in sections)
