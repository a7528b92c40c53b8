"""The names a Python function binds itself at a cursor: where one of them is spelled like an import, the
function's own name hides the import there.

``def _validate(self, prompt: bool | str) -> None:`` binds ``prompt``; in its body ``if deprecated and prompt:``
reads the parameter, not the ``prompt`` the file imports from ``termui``. The choice of definitions
(``context/definitions.py``) and the cross-file benchmark holes (``evaluation/workloads.py``) ask
:func:`bound_at` so that they take neither for a use of the import.

No parse (a file being typed is often not valid): the enclosing ``def`` headers are the nearest lines above
the cursor that start with ``def`` or ``async def`` at a smaller indentation than every line between (a line
that starts with a closing bracket continues its statement: ``) -> None:`` is not less indented); their
parameters (the names before ``:``, ``=`` or ``,`` at the parameter list's own bracket depth, ``*`` and
``**`` dropped; on a ``def`` line itself, those before the cursor), and what the function's lines above the
cursor assign (``name = ...``, ``name: T = ...``, ``for name in``, ``with ... as name``, ``except ... as name``).
Other languages: no names (their imports are rarely spelled like a parameter).
"""

from __future__ import annotations

import re

from lookahead_lsp.context.languages import LanguageSpec

MAX_LINES_UP = 400  # how far above the cursor a def header is looked for
_HEADER = re.compile(r"(?:async\s+)?def\s+\w+\s*\(")
_ASSIGNED = re.compile(r"([A-Za-z_]\w*)\s*(?::[^=\n]*)?=(?!=)")
_FOR_OR_AS = re.compile(r"\b(?:for\s+([A-Za-z_]\w*)\s+in\b|as\s+([A-Za-z_]\w*))")
_PARAMETER = re.compile(r"\*{0,2}\s*([A-Za-z_]\w*)")
_STRING = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"")


def bound_at(text: str, offset: int, language: LanguageSpec) -> frozenset[str]:
    """The names the functions around ``offset`` of ``text`` bind before it (the module docstring)."""
    if language.name != "python":
        return frozenset()
    # the cursor's line and the MAX_LINES_UP above it (lines[0] is the rest of the file, never read): a whole-file
    # split here would cost the cross-file workload a pass over the file for every line it asks about
    lines = text[:offset].rsplit("\n", MAX_LINES_UP + 1)
    current = lines[-1]
    indent = _indent(current) if current.strip() else len(current)
    names: set[str] = set(_parameters(lines, len(lines) - 1)) if _HEADER.match(current.strip()) else set()
    body: list[str] = []
    for number in range(len(lines) - 2, max(-1, len(lines) - 2 - MAX_LINES_UP), -1):
        line = lines[number]
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        depth = _indent(line)
        if depth >= indent or stripped[0] in ")]}":  # a closing bracket's line continues the statement above
            body.append(stripped)
            continue
        indent = depth
        if _HEADER.match(stripped):
            names.update(_parameters(lines, number))
            names.update(_assigned(body))
            body = []
        elif depth == 0:
            break  # a module-level statement: no function encloses the cursor further out
        else:
            body.append(stripped)  # a block's header inside the function (if, for, with): its own bindings
    return frozenset(names)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _parameters(lines: list[str], header: int) -> list[str]:
    """The parameter names of the ``def`` whose header starts on line ``header`` (it may span lines)."""
    text = "\n".join(lines[header : header + 40])
    start = text.index("(") + 1
    names, depth, expecting = [], 0, True
    i = start
    while i < len(text):
        char = text[i]
        if char in "([{":
            depth += 1
        elif char in ")]}":
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and char == ",":
            expecting = True
        elif depth == 0 and expecting and not char.isspace():
            match = _PARAMETER.match(text, i)
            if match is not None and match.group(1) not in ("self", "cls"):
                names.append(match.group(1))
            expecting = False
            if match is not None:
                i = match.end()
                continue
        i += 1
    return names


def _assigned(body: list[str]) -> set[str]:
    """What the function's lines (stripped, nearest first) assign at statement level: the left of ``=``, a
    ``for`` target, an ``as`` name. A line inside a bracket opened above (``command=cmd,`` among a call's
    arguments, a comprehension's ``for``) binds nothing of the function's."""
    names: set[str] = set()
    depth = 0
    for line in reversed(body):
        if depth == 0:
            match = _ASSIGNED.match(line)
            if match is not None:
                names.add(match.group(1))
            for found in _FOR_OR_AS.finditer(line):
                names.add(found.group(1) or found.group(2))
        code = _STRING.sub("", line.split("#", 1)[0])
        depth = max(0, depth + sum(code.count(c) for c in "([{") - sum(code.count(c) for c in ")]}"))
    return names
