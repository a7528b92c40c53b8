"""The definitions a source file makes, as the prompt shows them: name, kind, line and a short stub (tree-sitter).

:func:`definitions` parses a file with its language's official grammar and lists its top-level functions,
classes, types and constants, and the members of its classes (methods, constructors, trait and interface
items). Each :class:`Definition` carries a *stub*: what a completion that uses the name needs to know, in the
file's own words and indentation. A definition of at most :data:`WHOLE_LINES` lines is its stub whole (a short
helper, a constant, a one-line type); a longer one is its header (the text up to its body: the signature with
its parameters and return type), the first line of its documentation (a Python docstring, else the comment just
above it) and, for a class, the headers of its constructor and of its other public members, as many as
:data:`MAX_MEMBERS`. So ``FileError(self.name, hint=e.strerror)`` is one look at
``def __init__(self, filename: str, hint: str | None = None)`` away.

Files without a grammar (:data:`~context.languages.UNKNOWN`) define nothing here. A parse never raises: a file
with syntax errors yields the definitions tree-sitter still recognises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tree_sitter import Node

from lookahead_lsp.context.languages import LanguageSpec, get_parser

WHOLE_LINES = 4  # a definition this short is shown whole
MAX_HEADER_LINES = 6  # a header (signature) longer than this is cut to its first lines
MAX_MEMBERS = 8  # member headers shown in a class's stub
MAX_STUB_CHARS = 1200

# node type -> kind, per grammar family; members are looked for inside the ones whose kind is "class"
_KINDS: dict[str, dict[str, str]] = {
    "python": {"function_definition": "function", "class_definition": "class"},
    "javascript": {
        "function_declaration": "function",
        "generator_function_declaration": "function",
        "class_declaration": "class",
        "method_definition": "method",
    },
    "typescript": {
        "function_declaration": "function",
        "generator_function_declaration": "function",
        "class_declaration": "class",
        "abstract_class_declaration": "class",
        "method_definition": "method",
        "method_signature": "method",
        "abstract_method_signature": "method",
        "interface_declaration": "class",
        "type_alias_declaration": "type",
        "enum_declaration": "type",
    },
    "go": {"function_declaration": "function", "method_declaration": "method", "type_spec": "type"},
    "rust": {
        "function_item": "function",
        "function_signature_item": "method",
        "struct_item": "type",
        "enum_item": "type",
        "trait_item": "class",
        "type_item": "type",
        "const_item": "constant",
        "static_item": "constant",
        "macro_definition": "function",
    },
    "java": {
        "class_declaration": "class",
        "interface_declaration": "class",
        "enum_declaration": "class",
        "record_declaration": "class",
        "method_declaration": "method",
        "constructor_declaration": "method",
    },
    "c": {
        "function_definition": "function",
        "struct_specifier": "type",
        "enum_specifier": "type",
        "type_definition": "type",
        "preproc_function_def": "function",
        "preproc_def": "constant",
    },
}
_KINDS["tsx"] = _KINDS["typescript"]
_KINDS["c"]["declaration"] = "function"  # a prototype (a header's): only with a function declarator
_KINDS["cpp"] = {**_KINDS["c"], "class_specifier": "class", "field_declaration": "method"}
_PROTOTYPES = frozenset({"declaration", "field_declaration"})
# containers whose children are looked at too (they define nothing themselves)
_PASS_THROUGH = frozenset(
    {
        "decorated_definition",
        "export_statement",
        "type_declaration",
        "namespace_definition",
        "declaration_list",
        "template_declaration",
        "linkage_specification",
        "impl_item",
        "program",
        "module",
        "source_file",
        "translation_unit",
        "class_body",
        "block",
        "interface_body",
        "enum_body",
        "object_type",
        "field_declaration_list",
        "statement_block",
        "preproc_ifdef",
        "preproc_if",
        "expression_statement",
        "lexical_declaration",
        "variable_declaration",
        "const_declaration",
        "var_declaration",
        "field_declaration",
        "declaration",
    }
)
_QUOTES = re.compile(r"^[rbuRBU]*(?:\"\"\"|\'\'\'|\"|\')|(?:\"\"\"|\'\'\'|\"|\')$")
_BODIES = frozenset({"body", "value"})
_PRIVATE_PREFIXES = ("_",)


@dataclass(frozen=True)
class Definition:
    """One name a file defines: ``line`` is 0-based, ``stub`` the text a prompt shows for it (ends with a line
    break), ``container`` the class it belongs to (a method) or empty."""

    name: str
    kind: str
    line: int
    stub: str
    container: str = ""


def definitions(text: str, language: LanguageSpec) -> list[Definition]:
    """The definitions of ``text`` (a file in ``language``), in source order."""
    parser = get_parser(language)
    kinds = _KINDS.get(language.name)
    if parser is None or kinds is None or not text:
        return []
    source = text.encode("utf-8", "surrogatepass")
    tree = parser.parse(source)
    out: list[Definition] = []
    _collect(tree.root_node, source, language, kinds, "", out, depth=0)
    return out


def _collect(
    node: Node,
    source: bytes,
    language: LanguageSpec,
    kinds: dict[str, str],
    container: str,
    out: list[Definition],
    depth: int,
) -> None:
    for child in node.named_children:
        kind = kinds.get(child.type)
        if child.type in _PROTOTYPES and not _declares_function(child):
            kind = None
        name = _name_of(child, language.name) if kind is not None else None
        if kind is not None and name:
            if container and kind in ("function", "class"):
                kind = "method" if kind == "function" else kind
            out.append(Definition(name, kind, child.start_point[0], _stub(child, source, language, kinds), container))
            if kind == "class" and depth < 2:
                body = child.child_by_field_name("body")
                if body is not None:
                    _collect(body, source, language, kinds, name, out, depth + 1)
            continue
        if _is_constant(child, language.name, container):
            for name in _assigned_names(child, language.name):
                out.append(Definition(name, "constant", child.start_point[0], _whole(child, source), container))
            continue
        if child.type in _PASS_THROUGH and depth < 4:
            _collect(child, source, language, kinds, container, out, depth + (child.type not in _FLAT))


_WRAPPERS = frozenset({"decorated_definition", "export_statement", "template_declaration"})


_FLAT = _WRAPPERS | {"program", "module"}  # containers that add no depth


def _name_of(node: Node, language: str) -> str:
    """The defined name: the node's ``name`` field, or (C, C++) the identifier inside its declarator."""
    name = node.child_by_field_name("name")
    if name is None and node.type == "type_spec":
        name = node.named_children[0] if node.named_children else None
    if name is None:
        declarator = node.child_by_field_name("declarator")
        while declarator is not None and declarator.type not in _IDENTIFIERS:
            declarator = declarator.child_by_field_name("declarator") or (
                declarator.named_children[0] if declarator.named_children else None
            )
        name = declarator
    if name is None or name.text is None:
        return ""
    text = name.text.decode("utf-8", "replace")
    return text if text.replace("_", "a").replace("$", "a").isalnum() else ""


def _declares_function(node: Node) -> bool:
    """A C/C++ declaration of a function (a prototype), not of a variable or a field."""
    declarator = node.child_by_field_name("declarator")
    while declarator is not None:
        if declarator.type == "function_declarator":
            return True
        declarator = declarator.child_by_field_name("declarator")
    return False


_IDENTIFIERS = frozenset({"identifier", "field_identifier", "type_identifier", "destructor_name", "operator_name"})


def _is_constant(node: Node, language: str, container: str) -> bool:
    """A module-level (or class-level) name bound to a value: a Python assignment, a JS/TS ``const``/``let``, a
    Go ``const``/``var``, a Java ``static final`` field."""
    if language == "python":
        return (
            node.type == "expression_statement"
            and node.named_child_count == 1
            and node.named_children[0].type == "assignment"
        )
    if language in ("javascript", "typescript", "tsx"):
        return node.type in ("lexical_declaration", "variable_declaration") and not container
    if language == "go":
        return node.type in ("const_declaration", "var_declaration")
    if language == "java":
        if node.type != "field_declaration":
            return False
        modifiers = (
            node.named_children[0].text if node.named_children and node.named_children[0].type == "modifiers" else b""
        )
        return b"static" in (modifiers or b"")
    return False


def _assigned_names(node: Node, language: str) -> list[str]:
    names: list[str] = []
    stack = [node]
    while stack:
        current = stack.pop()
        target = current.child_by_field_name("left") or current.child_by_field_name("name")
        if current.type in ("assignment", "variable_declarator", "const_spec", "var_spec") and target is not None:
            if target.type in ("identifier", "field_identifier") and target.text:
                names.append(target.text.decode("utf-8", "replace"))
            continue
        stack.extend(reversed(current.named_children))
    return names


def _text(source: bytes, start: int, end: int) -> str:
    return source[start:end].decode("utf-8", "replace")


def _line_start(source: bytes, byte: int) -> int:
    return source.rfind(b"\n", 0, byte) + 1


def _whole(node: Node, source: bytes) -> str:
    """The node's lines, from its line's start (its indentation kept), cut to :data:`MAX_HEADER_LINES`."""
    text = _text(source, _line_start(source, node.start_byte), node.end_byte)
    lines = text.splitlines()
    return "\n".join(lines[: max(WHOLE_LINES, MAX_HEADER_LINES)])[:MAX_STUB_CHARS] + "\n"


def _header(node: Node, source: bytes) -> str:
    """The node's text up to its body (the signature), from its line's start; at most MAX_HEADER_LINES lines."""
    body = next((node.child_by_field_name(f) for f in _BODIES if node.child_by_field_name(f) is not None), None)
    end = body.start_byte if body is not None else node.end_byte
    text = _text(source, _line_start(source, node.start_byte), end).rstrip()
    lines = text.splitlines()[:MAX_HEADER_LINES]
    return "\n".join(lines) + "\n"


def _stub(node: Node, source: bytes, language: LanguageSpec, kinds: dict[str, str]) -> str:
    """What the prompt shows of a definition (the module docstring's rules)."""
    if node.end_point[0] - node.start_point[0] < WHOLE_LINES:
        return _whole(node, source)
    doc = _doc_line(node, source, language)
    parts = [_header(node, source), doc] if language.name == "python" else [doc, _header(node, source)]
    if kinds.get(node.type) == "class":
        body = node.child_by_field_name("body")
        members = _members(body, kinds) if body is not None else []
        parts += [_header(member, source) for member in members[:MAX_MEMBERS]]
    return "".join(parts)[:MAX_STUB_CHARS]


def _members(body: Node, kinds: dict[str, str]) -> list[Node]:
    """The member definitions of a class body (through decorators and exports), constructors first, public
    ones only."""
    found: list[Node] = []
    for child in body.named_children:
        inner = child
        while inner.type in ("decorated_definition", "export_statement") and inner.named_children:
            inner = inner.named_children[-1]
        if inner.type not in kinds:
            continue
        name = inner.child_by_field_name("name")
        text = name.text.decode("utf-8", "replace") if name is not None and name.text else ""
        if text.startswith(_PRIVATE_PREFIXES) and text != "__init__":
            continue
        if text.startswith("private") or (inner.text or b"").lstrip().startswith(b"private"):
            continue
        found.append(inner)
    constructors = {"__init__", "constructor", "new"}
    return sorted(found, key=lambda n: n.type != "constructor_declaration" and _plain_name(n) not in constructors)


def _plain_name(node: Node) -> str:
    name = node.child_by_field_name("name")
    return name.text.decode("utf-8", "replace") if name is not None and name.text else ""


def _doc_line(node: Node, source: bytes, language: LanguageSpec) -> str:
    """The first line of the definition's documentation, indented as its body: a Python docstring, or the
    comment right above the definition."""
    if language.name == "python":
        body = node.child_by_field_name("body")
        first = body.named_children[0] if body is not None and body.named_children else None
        if first is not None and first.type == "expression_statement" and first.named_children:
            string = first.named_children[0]
            if string.type == "string":
                line = _QUOTES.sub("", _text(source, string.start_byte, string.end_byte)).strip()
                head = line.splitlines()[0].strip() if line else ""
                indent = _text(source, _line_start(source, string.start_byte), string.start_byte)
                return f'{indent}"""{head}"""\n' if head else ""
        return ""
    outer = node
    while outer.parent is not None and outer.parent.type in _WRAPPERS:
        outer = outer.parent
    previous = outer.prev_named_sibling
    if (
        previous is None
        or previous.type not in language.comment_types
        or previous.end_point[0] + 1 < node.start_point[0]
    ):
        return ""
    lines = [
        line.strip().lstrip("/*").rstrip("*/").strip()
        for line in _text(source, previous.start_byte, previous.end_byte).splitlines()
    ]
    head = next((line for line in lines if line and not line.startswith("@")), "")
    indent = _text(source, _line_start(source, outer.start_byte), outer.start_byte)
    prefix = language.line_comment or "//"
    return f"{indent}{prefix} {head}\n" if head else ""
