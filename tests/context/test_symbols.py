"""context/symbols.py: the definitions of a file in each language with a grammar, and the stubs a prompt shows."""

from __future__ import annotations

import pytest

from lookahead_lsp.context.languages import detect_language
from lookahead_lsp.context.symbols import Definition, definitions

PYTHON = '''import os

LIMIT = 3


class FileError(Exception):
    """Raised if a file cannot be opened."""

    def __init__(self, filename: str, hint: str | None = None) -> None:
        super().__init__(filename)
        self.filename = filename
        self.hint = hint

    def _private(self):
        return 1

    def format_message(self) -> str:
        return f"{self.filename}: {self.hint}"


@decorated
def get_text_stderr(
    encoding: str | None = None,
    errors: str | None = None,
):
    """The standard error stream, as text."""
    stream = os.fdopen(2, "w")
    stream.reconfigure(encoding=encoding)
    return stream
'''


def by_name(found: list[Definition]) -> dict[str, Definition]:
    return {d.name: d for d in found}


def test_python_definitions_and_stubs() -> None:
    found = by_name(definitions(PYTHON, detect_language(path="m.py")))
    assert {"LIMIT", "FileError", "__init__", "format_message", "get_text_stderr"} <= set(found)
    assert found["LIMIT"].kind == "constant" and found["LIMIT"].stub == "LIMIT = 3\n"
    assert found["__init__"].container == "FileError" and found["__init__"].kind == "method"
    cls = found["FileError"].stub
    # header, docstring's first line, the constructor's and public members' headers, not bodies or private ones
    assert cls.startswith("class FileError(Exception):\n")
    assert '"""Raised if a file cannot be opened."""' in cls
    assert "    def __init__(self, filename: str, hint: str | None = None) -> None:\n" in cls
    assert "def format_message(self) -> str:" in cls and "_private" not in cls and "super()" not in cls
    function = found["get_text_stderr"].stub
    assert function.startswith("def get_text_stderr(\n    encoding: str | None = None,")
    assert "The standard error stream, as text." in function and "fdopen" not in function


@pytest.mark.parametrize(
    ("path", "text", "expected"),
    [
        (
            "a.js",
            "/** Adds two numbers. */\nexport function add(a, b) {\n  const s = a + b;\n  log(s);\n  return s;\n}\n"
            "class Box {\n  constructor(width, height) {\n    this.w = width;\n    this.h = height;\n  }\n}\n",
            {"add": "// Adds two numbers.\nexport function add(a, b)", "Box": "constructor(width, height)"},
        ),
        (
            "A.java",
            "package p;\n\npublic class Account {\n    public static final int LIMIT = 5;\n"
            "    public Account(String owner, int balance) {\n        this.owner = owner;\n    }\n"
            "    public int deposit(int amount) {\n        balance += amount;\n        return balance;\n    }\n}\n",
            {"Account": "public Account(String owner, int balance)", "deposit": "public int deposit(int amount)"},
        ),
        (
            "g.go",
            "package geo\n\n// Scale multiplies every coordinate.\nfunc Scale(v []float64, f float64) []float64 {\n"
            "\tout := make([]float64, len(v))\n\tfor i := range v {\n\t\tout[i] = v[i] * f\n\t}\n\treturn out\n}\n"
            "type Point struct {\n\tX, Y float64\n}\n",
            {"Scale": "func Scale(v []float64, f float64) []float64", "Point": "type Point struct"},
        ),
        (
            "r.rs",
            "pub struct Meters(f64);\n\nimpl Meters {\n    pub fn new(value: f64) -> Self {\n        let v = value;\n"
            "        assert!(v >= 0.0);\n        Meters(v)\n    }\n}\n",
            {"Meters": "pub struct Meters(f64);", "new": "pub fn new(value: f64) -> Self"},
        ),
        (
            "h.h",
            "#define MAX_ITEMS 16\nint list_push(struct list *l, void *item);\nstruct list {\n  int n;\n};\n",
            {"MAX_ITEMS": "#define MAX_ITEMS 16", "list_push": "int list_push(struct list *l, void *item);"},
        ),
    ],
)
def test_brace_languages(path: str, text: str, expected: dict[str, str]) -> None:
    found = by_name(definitions(text, detect_language(path=path)))
    for name, fragment in expected.items():
        assert name in found, (name, sorted(found))
        assert fragment in found[name].stub, (name, found[name].stub)


def test_no_grammar_and_broken_code_never_raise() -> None:
    assert definitions("def f(:\n", detect_language(path="x.txt")) == []
    broken = by_name(definitions("def ok(a):\n    return a\n\ndef broken(:\n", detect_language(path="b.py")))
    assert "ok" in broken
