"""What a source file imports: its import statements, the names they bind and the modules those come from.

:func:`file_imports` reads the import statements of Python, JavaScript/TypeScript, Java, Go, Rust and C/C++
(``#include "..."``) with regular expressions (no parse: a file being typed is often not valid) and returns
:class:`FileImports`:

- ``statements``: each import statement's text and lines (what the prompt shows when its prefix starts below
  them: ``context/definitions.py``);
- ``names``: local name -> :class:`Imported` (the module, as path parts, and the name inside it: ``from
  .exceptions import BadArgumentUsage as Bad`` binds ``Bad`` to ``BadArgumentUsage`` of ``<dir>/exceptions``);
- ``modules``: local name -> module path parts, for names that stand for a whole module (``import numpy as np``,
  ``import * as fs from "./fs"``, a Go package, ``from . import utils``), whose attributes the code uses;
- ``includes``: the path parts of C/C++ headers included with quotes.

:func:`imported_uses` finds where a line of code uses those names (the daemon's choice of definitions and the
cross-file benchmark holes both ask it).

Module paths are lists of path components, made absolute where the language says how (Python's relative
imports against the file's package, JavaScript's ``./`` and ``../`` against the file's directory): the symbol
table matches them against the files of the workspace (``context/definitions.py``).
"""

from __future__ import annotations

import posixpath
import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field

from lookahead_lsp.context.languages import LanguageSpec

MAX_SCANNED_CHARS = 200_000  # imports are looked for in the file's head only; later ones are rare


@dataclass(frozen=True)
class Imported:
    """A name bound by an import: ``name`` inside the module at ``module`` (path parts)."""

    module: tuple[str, ...]
    name: str


@dataclass(frozen=True)
class Statement:
    """One import statement: its text and the lines it spans (0-based, ``end`` exclusive)."""

    text: str
    start: int
    end: int
    local: bool = False  # it names a module of this project (relative for certain; else as the symbol table finds)
    module: tuple[str, ...] = ()  # the module it imports from (path parts)
    top_level: bool = True  # the file's own: at column 0, or (dedented) in a top-level ``if``/``try`` block; not
    # an import inside a function or class, which binds its names there only


@dataclass
class FileImports:
    """A file's imports (the module docstring)."""

    statements: list[Statement] = field(default_factory=list)
    names: dict[str, Imported] = field(default_factory=dict)
    modules: dict[str, tuple[str, ...]] = field(default_factory=dict)
    includes: list[tuple[str, ...]] = field(default_factory=list)


_PY_FROM = re.compile(r"^[ \t]*from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#]*(?:\\\n[^\n#]*)*)", re.M)
_PY_IMPORT = re.compile(
    r"^[ \t]*import[ \t]+([\w.]+(?:[ \t]+as[ \t]+\w+)?(?:[ \t]*,[ \t]*[\w.]+(?:[ \t]+as[ \t]+\w+)?)*)", re.M
)
_JS_IMPORT = re.compile(
    r"^[ \t]*import[ \t]+(?:type[ \t]+)?([^;'\"]*?)[ \t\n]*from[ \t]*['\"]([^'\"\n]+)['\"][ \t]*;?", re.M
)
_JS_REQUIRE = re.compile(
    r"^[ \t]*(?:const|let|var)[ \t]+(\{[^}]*\}|[\w$]+)[ \t]*=[ \t]*"
    r"require\([ \t]*['\"]([^'\"\n]+)['\"][ \t]*\)[ \t]*;?",
    re.M,
)
_JAVA_IMPORT = re.compile(r"^[ \t]*import[ \t]+(static[ \t]+)?([\w.]+?)(\.\*)?[ \t]*;", re.M)
_GO_IMPORT = re.compile(r"^import[ \t]*(?:\(([^)]*)\)|([\w.]*[ \t]*\"[^\"\n]+\"))", re.M)
_GO_SPEC = re.compile(r"([\w.]+)?[ \t]*\"([^\"\n]+)\"")
_RUST_USE = re.compile(r"^[ \t]*(?:pub(?:\([^)]*\))?[ \t]+)?use[ \t]+([^;]+);", re.M)
_C_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*\"([^\"\n]+)\"", re.M)
_AS = re.compile(r"^([\w$.*]+)(?:\s+as\s+([\w$]+))?$")


def file_imports(text: str, language: LanguageSpec, path: str = "") -> FileImports:
    """The imports of ``text``, a file at ``path`` (relative to the workspace root, ``/``-separated)."""
    head = text[:MAX_SCANNED_CHARS]
    directory = posixpath.dirname(path)
    out = FileImports()
    reader = _READERS.get(language.name)
    if reader is not None:
        reader(head, directory, out)
    out.statements.sort(key=lambda s: s.start)
    return out


def _statement(text: str, match: re.Match[str], local: bool, module: tuple[str, ...] = ()) -> Statement:
    start = text.count("\n", 0, match.start())
    body = match.group(0).strip("\n")
    top_level = not body[:1].isspace() or _in_top_level_block(text, match.start())
    return Statement(textwrap.dedent(body), start, start + body.count("\n") + 1, local, module, top_level)


_BLOCK = re.compile(r"(?:if|elif|else|try|except|finally|with)\b")


def _in_top_level_block(text: str, offset: int) -> bool:
    """Whether the indented line at ``offset`` is in a block opened at column 0 by a conditional (``if
    TYPE_CHECKING:``, ``try:``/``except ImportError:``), by the nearest less-indented line above it."""
    line_start = text.rfind("\n", 0, offset) + 1
    indent = len(text[line_start:]) - len(text[line_start:].lstrip(" \t"))
    end = line_start - 1
    while end > 0:
        start = text.rfind("\n", 0, end) + 1
        line = text[start:end]
        stripped = line.lstrip(" \t")
        if stripped and not stripped.startswith("#") and len(line) - len(stripped) < indent:
            return line == stripped and _BLOCK.match(stripped) is not None
        end = start - 1
    return False


def _parts(dotted: str, separator: str) -> tuple[str, ...]:
    return tuple(part for part in dotted.split(separator) if part)


def _python(text: str, directory: str, out: FileImports) -> None:
    for match in _PY_FROM.finditer(text):
        module, names = match.group(1), match.group(2)
        dots = len(module) - len(module.lstrip("."))
        base: tuple[str, ...] = ()
        if dots:
            package = _parts(directory, "/")
            base = package[: len(package) - (dots - 1)] if dots - 1 <= len(package) else ()
        parts = base + _parts(module.lstrip("."), ".")
        out.statements.append(_statement(text, match, dots > 0, parts))
        for item in names.strip("()").replace("\\\n", " ").split(","):
            bound = _AS.match(item.split("#")[0].strip())
            if bound is None or bound.group(1) == "*":
                continue
            name, local = bound.group(1), bound.group(2) or bound.group(1)
            out.names[local] = Imported(parts, name)
            out.modules.setdefault(local, (*parts, name))  # ``from pkg import module``: maybe a module
    for match in _PY_IMPORT.finditer(text):
        out.statements.append(_statement(text, match, False, _parts(match.group(1).split(",")[0].split()[0], ".")))
        for item in match.group(1).split(","):
            bound = _AS.match(item.strip())
            if bound is None:
                continue
            dotted = bound.group(1)
            if bound.group(2):
                out.modules[bound.group(2)] = _parts(dotted, ".")
            else:  # ``import a.b`` binds ``a``; ``a.b.f`` is used in full
                out.modules[dotted.split(".")[0]] = _parts(dotted.split(".")[0], ".")
                out.modules[dotted] = _parts(dotted, ".")


def _js_module(source: str, directory: str) -> tuple[tuple[str, ...], bool]:
    """A JavaScript module specifier as path parts (extension and ``index`` dropped) and whether it is relative."""
    if source.startswith("."):
        joined = posixpath.normpath(posixpath.join(directory, source))
        parts = _parts(joined, "/")
        relative = True
    else:
        parts = _parts(source, "/")
        relative = False
    if parts:
        stem = parts[-1].rsplit(".", 1)[0] if parts[-1].rsplit(".", 1)[-1] in _JS_EXTENSIONS else parts[-1]
        parts = (*parts[:-1], stem)
    return parts, relative


_JS_EXTENSIONS = frozenset({"js", "mjs", "cjs", "jsx", "ts", "tsx", "mts", "cts"})


def _javascript(text: str, directory: str, out: FileImports) -> None:
    for match in (*_JS_IMPORT.finditer(text), *_JS_REQUIRE.finditer(text)):
        clause, source = match.group(1), match.group(2)
        parts, relative = _js_module(source, directory)
        out.statements.append(_statement(text, match, relative, parts))
        braces = re.search(r"\{([^}]*)\}", clause)
        if braces is not None:
            for item in braces.group(1).split(","):
                item = re.sub(r"^type\s+", "", item.strip()).replace(":", " as ")
                bound = _AS.match(re.sub(r"\s+", " ", item))
                if bound is not None:
                    out.names[bound.group(2) or bound.group(1)] = Imported(parts, bound.group(1))
            clause = clause[: braces.start()] + clause[braces.end() :]
        for item in clause.split(","):
            item = item.strip()
            star = re.match(r"\*\s+as\s+([\w$]+)$", item)
            if star is not None:
                out.modules[star.group(1)] = parts
            elif re.fullmatch(r"[\w$]+", item):  # a default import: the module's default export, or the module
                out.modules[item] = parts
                out.names[item] = Imported(parts, item)


def _java(text: str, directory: str, out: FileImports) -> None:
    for match in _JAVA_IMPORT.finditer(text):
        static, dotted, star = match.group(1), match.group(2), match.group(3)
        parts = _parts(dotted, ".")
        out.statements.append(_statement(text, match, False, parts if not static else parts[:-1]))
        if not parts:
            continue
        if star:
            out.modules["*" + dotted] = parts
        elif static:
            out.names[parts[-1]] = Imported(parts[:-1], parts[-1])
        else:  # a class: its file is <package path>/<Class>.java
            out.names[parts[-1]] = Imported(parts, parts[-1])
            out.modules[parts[-1]] = parts


def _go(text: str, directory: str, out: FileImports) -> None:
    for match in _GO_IMPORT.finditer(text):
        specs = list(_GO_SPEC.finditer(match.group(1) or match.group(2) or ""))
        out.statements.append(_statement(text, match, False, _parts(specs[0].group(2), "/") if specs else ()))
        for spec in specs:
            alias, source = spec.group(1), spec.group(2)
            parts = _parts(source, "/")
            if parts and alias not in ("_", "."):
                out.modules[alias or parts[-1]] = parts


def _rust(text: str, directory: str, out: FileImports) -> None:
    for match in _RUST_USE.finditer(text):
        tree = re.sub(r"\s*(::|\{|\}|,)\s*", r"\1", re.sub(r"\s+", " ", match.group(1).strip()))
        local = tree.startswith(("crate::", "self::", "super::"))
        paths = _rust_paths(tree)
        module = tuple(p for p in paths[0][0][:-1] if p not in ("crate", "self", "super")) if paths else ()
        out.statements.append(_statement(text, match, local, module))
        for path, alias in paths:
            parts = tuple(p for p in path if p not in ("crate", "self", "super"))
            if not parts:
                continue
            name = parts[-1]
            out.names[alias or name] = Imported(parts[:-1], name)
            out.modules[alias or name] = parts


def _rust_paths(tree: str) -> list[tuple[list[str], str]]:
    """``a::{b, c::d as e}`` -> ([a, b], ""), ([a, c, d], "e")."""
    brace = tree.find("{")
    if brace < 0:
        path, _, alias = tree.partition(" as ")
        return [(path.strip().split("::"), alias.strip())] if path and not path.endswith("*") else []
    head = [p for p in tree[:brace].split("::") if p]
    inner, depth, items, current = tree[brace + 1 : tree.rfind("}")], 0, [], ""
    for char in inner:
        depth += char == "{"
        depth -= char == "}"
        if char == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    items.append(current)
    out: list[tuple[list[str], str]] = []
    for item in filter(None, items):
        for sub, alias in _rust_paths(item):
            out.append((head + [p for p in sub if p != "self"] if sub != ["self"] else head, alias))
    return out


def _c(text: str, directory: str, out: FileImports) -> None:
    for match in _C_INCLUDE.finditer(text):
        joined = posixpath.normpath(posixpath.join(directory, match.group(1)))
        out.includes.append(_parts(joined.rsplit(".", 1)[0], "/"))
        out.statements.append(_statement(text, match, True, out.includes[-1]))


@dataclass(frozen=True)
class Use:
    """A use of an imported name on a line: its column, and the name inside the module it comes from."""

    column: int
    name: str
    module: tuple[str, ...]


IDENTIFIER = re.compile(r"[A-Za-z_$][\w$]*")  # a name in any of the languages read here
_MEMBER = re.compile(r"\s*(?:\.|::|->)\s*([A-Za-z_$][\w$]*)")
_BOUND_AFTER = re.compile(r"\s*=(?![=>])")  # ``command = ...``, a keyword argument ``f(command=...)``
_DEFINED_BEFORE = re.compile(r"(?:^|\W)(?:def|class|function|fn|func|struct|interface|enum|trait)$")


def imported_uses(line: str, imports: FileImports, bound: frozenset[str] = frozenset()) -> Iterator[Use]:
    """Where ``line`` uses a name the file imports (``BadArgumentUsage(``), or a member of a module it imports
    (``exc.FileError``: the name ``FileError``), left to right. A same-spelled name that is not the import is
    skipped: a member of something else (``self.command``), a name the line binds (``command = ...``,
    ``f(command=1)``; an annotation ``x: Command = ...`` is a use) or defines (``def command(``), and one of
    ``bound``, the names the line's function binds itself (``context/scopes.py``: a parameter ``prompt``)."""
    for match in IDENTIFIER.finditer(line):
        if match.group(0) in bound:
            continue
        imported = imports.names.get(match.group(0))
        module = imports.modules.get(match.group(0))
        if imported is None and module is None:
            continue
        before, after = line[: match.start()].rstrip(), line[match.end() :]
        if before.endswith((".", "::", "->")) or _DEFINED_BEFORE.search(before):
            continue
        if _BOUND_AFTER.match(after) and not before.endswith(":"):
            continue
        if imported is not None:
            yield Use(match.start(), imported.name, imported.module)
        member = _MEMBER.match(after)
        if module is not None and member is not None:
            yield Use(match.start(), member.group(1), module)


_READERS = {
    "python": _python,
    "javascript": _javascript,
    "typescript": _javascript,
    "tsx": _javascript,
    "java": _java,
    "go": _go,
    "rust": _rust,
    "c": _c,
    "cpp": _c,
}
