"""context/imports.py: import statements, the names they bind and their modules as path parts."""

from __future__ import annotations

import pytest

from lookahead_lsp.context.imports import Imported, file_imports, imported_uses
from lookahead_lsp.context.languages import detect_language


def imports_of(path: str, text: str):  # type: ignore[no-untyped-def]
    return file_imports(text, detect_language(path=path), path)


PYTHON = (
    "import os\nimport numpy as np\nfrom ..core import (\n    Context,\n    Command as Cmd,  # the base\n)\n"
    "from .exceptions import BadArgumentUsage\nfrom . import utils\n\ndef f():\n    pass\n"
)
JAVASCRIPT = (
    'import fs from "fs";\nimport { join, resolve as abs } from "../lib/paths.js";\n'
    'import * as util from "./util";\nconst { parse } = require("./parser");\n'
)
CLICK, APP = ("src", "click"), ("src", "app")


@pytest.mark.parametrize(
    ("path", "text", "names", "modules", "statements"),
    [
        (  # relative, absolute, aliases, a parenthesised list with a comment, a module imported from a package
            "src/click/sub/mod.py",
            PYTHON,
            {
                "Context": Imported((*CLICK, "core"), "Context"),
                "Cmd": Imported((*CLICK, "core"), "Command"),
                "BadArgumentUsage": Imported((*CLICK, "sub", "exceptions"), "BadArgumentUsage"),
            },
            {"np": ("numpy",), "utils": (*CLICK, "sub", "utils")},
            [(0, 1, False), (1, 2, False), (2, 6, True), (6, 7, True), (7, 8, True)],
        ),
        (  # default, named, aliased, namespace imports and require
            "src/app/main.js",
            JAVASCRIPT,
            {
                "join": Imported(("src", "lib", "paths"), "join"),
                "abs": Imported(("src", "lib", "paths"), "resolve"),
                "parse": Imported((*APP, "parser"), "parse"),
            },
            {"util": (*APP, "util")},
            [(0, 1, False), (1, 2, True), (2, 3, True), (3, 4, True)],
        ),
    ],
)
def test_names_modules_and_statements(
    path: str,
    text: str,
    names: dict[str, Imported],
    modules: dict[str, tuple[str, ...]],
    statements: list[tuple[int, int, bool]],
) -> None:
    found = imports_of(path, text)
    assert {local: found.names[local] for local in names} == names
    assert {local: found.modules[local] for local in modules} == modules
    assert [(s.start, s.end, s.local) for s in found.statements] == statements


def test_java_go_rust_and_c() -> None:
    java = imports_of("A.java", "package a;\nimport com.acme.bank.Account;\nimport static com.acme.Util.max;\n")
    assert java.names["Account"] == Imported(("com", "acme", "bank", "Account"), "Account")
    assert java.names["max"] == Imported(("com", "acme", "Util"), "max")
    go = imports_of("main.go", 'package main\n\nimport (\n\t"fmt"\n\tgeo "example.com/x/geometry"\n)\n')
    assert go.modules["fmt"] == ("fmt",) and go.modules["geo"] == ("example.com", "x", "geometry")
    rust = imports_of("src/main.rs", "use crate::units::{Meters, convert::to_feet as feet};\nuse std::fmt;\n")
    assert rust.names["Meters"] == Imported(("units",), "Meters")
    assert rust.names["feet"] == Imported(("units", "convert"), "to_feet")
    c = imports_of("src/main.c", '#include <stdio.h>\n#include "list.h"\n')
    assert c.includes == [("src", "list")]


@pytest.mark.parametrize(
    ("line", "uses"),
    [
        ("    raise BadArgumentUsage(msg)", [(10, "BadArgumentUsage")]),
        # ``from . import utils``: the name ``utils`` of the package, or the module ``utils``
        ("    x = utils.make_str(Cmd)", [(8, "utils"), (8, "make_str"), (23, "Command")]),
        ("    ctx: Context = Context(cmd)", [(9, "Context"), (19, "Context")]),  # an annotation is a use
        ("    Cmd = self.Cmd or Cmd2", []),  # a local that shadows the import; a member of self
        ("    f(Context=1, ctx=Context)", [(21, "Context")]),  # a keyword argument binds, a value uses
        ("def Context(self) -> None:", []),  # a definition of the same name
        ("    if Cmd == other: pass", [(7, "Command")]),
    ],
)
def test_imported_uses_skip_names_that_are_not_the_import(line: str, uses: list[tuple[int, str]]) -> None:
    imports = imports_of("src/click/sub/mod.py", PYTHON)
    assert [(u.column, u.name) for u in imported_uses(line, imports)] == uses


def test_only_the_files_own_imports_are_top_level() -> None:
    text = (
        "import os\nif t.TYPE_CHECKING:\n    from .core import (\n        Context,\n    )\n\n"
        "try:\n    import ujson as json\nexcept ImportError:\n    import json\n\n"
        "def wrap(x):\n    from ._textwrap import TextWrapper\n    if x:\n        import shutil\n"
        "class A:\n    import re\n"
    )
    found = {s.text: s.top_level for s in imports_of("src/click/formatting.py", text).statements}
    assert found == {
        "import os": True,
        "from .core import (\n    Context,\n)": True,  # dedented, continuation lines too
        "import ujson as json": True,
        "import json": True,
        "from ._textwrap import TextWrapper": False,  # a function's own
        "import shutil": False,
        "import re": False,
    }
