"""context/imports.py: import statements, the names they bind and their modules as path parts."""

from __future__ import annotations

from lookahead_lsp.context.imports import Imported, file_imports
from lookahead_lsp.context.languages import detect_language


def imports_of(path: str, text: str):  # type: ignore[no-untyped-def]
    return file_imports(text, detect_language(path=path), path)


def test_python_relative_absolute_aliases_and_parentheses() -> None:
    text = (
        "import os\nimport numpy as np\nfrom ..core import (\n    Context,\n    Command as Cmd,  # the base\n)\n"
        "from .exceptions import BadArgumentUsage\nfrom . import utils\n\ndef f():\n    pass\n"
    )
    found = imports_of("src/click/sub/mod.py", text)
    assert found.names["Context"] == Imported(("src", "click", "core"), "Context")
    assert found.names["Cmd"] == Imported(("src", "click", "core"), "Command")
    assert found.names["BadArgumentUsage"] == Imported(("src", "click", "sub", "exceptions"), "BadArgumentUsage")
    assert found.modules["np"] == ("numpy",) and found.modules["utils"] == ("src", "click", "sub", "utils")
    assert [(s.start, s.end, s.local) for s in found.statements] == [
        (0, 1, False),
        (1, 2, False),
        (2, 6, True),
        (6, 7, True),
        (7, 8, True),
    ]


def test_javascript_imports_and_require() -> None:
    text = (
        'import fs from "fs";\nimport { join, resolve as abs } from "../lib/paths.js";\n'
        'import * as util from "./util";\nconst { parse } = require("./parser");\n'
    )
    found = imports_of("src/app/main.js", text)
    assert found.names["join"] == Imported(("src", "lib", "paths"), "join")
    assert found.names["abs"] == Imported(("src", "lib", "paths"), "resolve")
    assert found.modules["util"] == ("src", "app", "util")
    assert found.names["parse"] == Imported(("src", "app", "parser"), "parse")
    assert [s.local for s in found.statements] == [False, True, True, True]


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
