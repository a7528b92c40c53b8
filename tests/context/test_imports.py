"""context/imports.py: import statements, the names they bind and their modules as path parts."""

from __future__ import annotations

import pytest

from lookahead_lsp.context.imports import Imported, file_imports
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
