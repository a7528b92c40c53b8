"""Which language a document is in: LSP languageId or file extension -> :class:`LanguageSpec`.

A spec names the official tree-sitter grammar wheel (loaded lazily, compiled once) and the syntax traits the
shape detection and stop rules need. A language without a grammar is :data:`UNKNOWN` (``grammar`` is
``None``): indentation rules then stand in for the parse.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from pathlib import PurePath

from tree_sitter import Language, Parser


@dataclass(frozen=True)
class LanguageSpec:
    """The traits of a language that prompt building, shape detection and stop rules need."""

    name: str
    grammar: tuple[str, str] | None = None  # (module, function) returning the tree-sitter language capsule
    braces: bool = False  # blocks are delimited by { } (else by indentation)
    line_comment: str | None = None
    block_types: frozenset[str] = frozenset()  # tree-sitter node types of brace-delimited blocks
    comment_types: frozenset[str] = frozenset({"comment", "line_comment", "block_comment"})
    quote_strings: bool = True  # ' delimits strings (else it is a char literal or a lifetime: 'a', '\\n', 'a)


_C_BLOCKS = frozenset({"compound_statement", "field_declaration_list", "enumerator_list", "initializer_list"})
_JS_BLOCKS = frozenset({"statement_block", "class_body", "object", "switch_body", "object_type", "interface_body"})
_GO_BLOCKS = frozenset({"block", "field_declaration_list", "literal_value", "interface_type"})
_RUST_BLOCKS = frozenset({"block", "declaration_list", "field_declaration_list", "match_block", "enum_variant_list"})
_JAVA_BLOCKS = frozenset({"block", "class_body", "interface_body", "enum_body", "switch_block", "constructor_body"})


def _braces(name: str, module: str, blocks: frozenset[str], function: str = "language") -> LanguageSpec:
    """A C-family language: ``{}`` blocks, ``//`` comments; ``'`` quotes strings only in JS/TS."""
    quote_strings = name in ("javascript", "typescript", "tsx")
    return LanguageSpec(name, (module, function), True, "//", blocks, quote_strings=quote_strings)


LANGUAGES: dict[str, LanguageSpec] = {
    spec.name: spec
    for spec in (
        LanguageSpec("python", ("tree_sitter_python", "language"), line_comment="#"),
        _braces("javascript", "tree_sitter_javascript", _JS_BLOCKS),
        _braces("typescript", "tree_sitter_typescript", _JS_BLOCKS, "language_typescript"),
        _braces("tsx", "tree_sitter_typescript", _JS_BLOCKS, "language_tsx"),
        _braces("go", "tree_sitter_go", _GO_BLOCKS),
        _braces("rust", "tree_sitter_rust", _RUST_BLOCKS),
        _braces("java", "tree_sitter_java", _JAVA_BLOCKS),
        _braces("c", "tree_sitter_c", _C_BLOCKS),
        _braces("cpp", "tree_sitter_cpp", _C_BLOCKS | frozenset({"declaration_list"})),
    )
}

UNKNOWN = LanguageSpec("unknown")

# LSP languageId -> our name (ids equal to our names need no entry).
_LANGUAGE_IDS = {
    "javascriptreact": "javascript",
    "typescriptreact": "tsx",
    "c++": "cpp",
    "cuda-cpp": "cpp",
    "objective-c": "c",
    "py": "python",
}

_EXTENSIONS = {
    ".py": "python",
    ".pyi": "python",
    ".pyw": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".c++": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
    ".hxx": "cpp",
    ".ino": "cpp",
}


def detect_language(language_id: str | None = None, path: str | None = None) -> LanguageSpec:
    """The language of an LSP languageId (first) or a file extension; :data:`UNKNOWN` if neither is known."""
    if language_id:
        key = language_id.lower()
        name = _LANGUAGE_IDS.get(key, key)
        if name in LANGUAGES:
            return LANGUAGES[name]
    if path:
        name = _EXTENSIONS.get(PurePath(path).suffix.lower(), "")
        if name:
            return LANGUAGES[name]
    return UNKNOWN


@functools.cache
def _language(module: str, function: str) -> Language:
    return Language(getattr(importlib.import_module(module), function)())


def get_parser(spec: LanguageSpec) -> Parser | None:
    """A fresh parser for ``spec`` (the compiled grammar is cached); ``None`` for a language without one."""
    if spec.grammar is None:
        return None
    try:
        return Parser(_language(*spec.grammar))
    except (ImportError, AttributeError, ValueError):
        return None
