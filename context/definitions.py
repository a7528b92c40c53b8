"""Definitions from other files of the workspace for the names around the cursor, and the file's import lines.

:class:`SymbolTable` holds every workspace file's definitions (``context/symbols.py``), by path and by name,
kept current by whoever sees the files change (the daemon: the workspace index's listener and the open
documents; the benchmarks: their corpus). :func:`definitions_at` picks, for a cursor, the definitions a
completion there most likely needs, and :func:`cursor_context` puts them before the BM25 windows
(``context/snippets.py``) as the prompt's context sections.

Which names (the *region* is the cursor's block of :data:`~context.snippets.QUERY_LINES` lines with
:data:`REGION_BEFORE` lines before it and :data:`REGION_AFTER` after: it moves only when the cursor enters
another block, so the prompt's context stays in the KV cache while the user types):

0. names the region does not show, named like what it does: of the names the file imports from the workspace
   and the members of the workspace modules it imports (``nodes.CallBlock``), those whose words
   (:func:`name_words`: ``LINE_COMMENT_PREFIX`` is line, comment, prefix) the region's other lines hold, most
   words shared first, at most :data:`MAX_NAMED_LIKE`. The line being written reaches for a name the model
   cannot see: in the ``xfile`` workload (a line cut before the name it imports) 46 of 80 such names on jinja2 were
   nowhere in the region, and a name the region already shows is one the model sees used (its definition
   moved the 0.5B to a neighbour's name: ``nodes.Output`` for ``nodes.TemplateData``). ``def visit_call_block``
   above ``isinstance(node, |`` finds ``nodes.CallBlock``; ``line_statement_prefix = LINE_STATEMENT_PREFIX``
   above ``line_comment_prefix = |`` finds ``LINE_COMMENT_PREFIX``. The cursor's own line does not count (its
   words change with every key), nor do import statements (their words name modules: every member of
   ``normalize_url`` would be named like ``from .common import normalize_url``);
1. names the file imports that the region uses, and attributes of imported modules the region uses
   (``exc.FileError``), as ``context/imports.py`` ``imported_uses`` finds them (a local ``command = ...`` is not
   the imported ``command``, nor is a parameter of the cursor's function spelled like it: ``context/scopes.py``):
   what the cursor's code calls;
2. names the file imports and does not use yet anywhere (imported to be used: a completion is where that
   happens);
3. in Go and Java, names the region uses that the file neither defines nor imports, defined in another file
   of the same directory (a package shares its names without imports); in C and C++, those defined in a
   header the file includes;
4. names the file imports and uses outside the region, nearest use first: the file's own vocabulary from
   other modules, which the line being written often reaches for before it is in view (``isatty(sys.stdout)``
   a few screens below the file's other ``isatty`` call).

Each name resolves to the workspace definitions of that name whose file matches the module it is imported
from (the longest run of the module's path parts that ends the file's path, a package's ``__init__``/``mod``/
``index`` and a Go package's directory included): ``from .exceptions import FileError`` finds
``src/click/exceptions.py``'s ``FileError`` and never ``tests/test_basic.py``'s. A name whose module is not a file
of the workspace (the standard library, a dependency) resolves to nothing: the model knows those better than a
stub could tell it. Nearest use first, at most :data:`MAX_DEFINITIONS`; one section per file, the stubs of
tier 0 first (a section cut to the budget keeps them), each group in source order.

With them goes the file's own use of each name of tiers 0 and 4 whose definition was found (names the region
does not show): the line nearest the cursor outside the region and the import statements, at most
:data:`MAX_USES` lines in file order, one section of the file's own path fitted before the definitions. A stub says
what a name is; a use says how this file calls it (``callback=DEFAULT_CALLBACK,``,
``ops = infer_storage_options(path)``): beside ``DEFAULT_CALLBACK``'s stub the 0.5B still wrote ``None,``.

The import lines themselves reach the prompt through :class:`CursorContext` ``imports``: the prompt builder
shows them above a prefix that starts below them (``context/prompt.py``), so the names the file can use are in
view even when the budget cuts the prefix a few dozen lines above the cursor. Only the file's own imports go
there (``Statement.top_level``: an ``if TYPE_CHECKING:`` block's dedented, a function's local import never: shown
at its indentation above unrelated code it reads as broken code, and its names are not the file's).
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable, Iterable, Sequence, Set
from dataclasses import dataclass, replace
from typing import TypeVar

from lookahead_lsp.context.imports import IDENTIFIER, FileImports, Statement, file_imports, imported_uses
from lookahead_lsp.context.languages import LanguageSpec, detect_language
from lookahead_lsp.context.scopes import bound_at
from lookahead_lsp.context.snippets import QUERY_LINES, Snippet, SnippetIndex
from lookahead_lsp.context.symbols import Definition, definitions

REGION_BEFORE = 24  # lines before the cursor's block whose names count as the cursor's
REGION_AFTER = 8  # lines after it
MAX_DEFINITIONS = 8
MAX_NAMED_LIKE = 4  # definitions of names the region does not show, named like what it does
DEFINITION_SCORE = 1000.0  # above any BM25 score: definitions are fitted into the budget first
MAX_USES = 4  # lines of the file's own uses of the names the region does not show
USES_SCORE = DEFINITION_SCORE + 1  # those lines are fitted before the definitions (a line each)
_T = TypeVar("_T")
_PACKAGE_FILES = frozenset({"__init__", "mod", "index", "lib", "main"})
_SAME_DIRECTORY = frozenset({"go", "java"})
_UNSEEN_TIERS = (0, 4)  # the named-like names and those the file uses outside the region only


@dataclass(frozen=True)
class CursorContext:
    """The context sections for a cursor (definitions first, then BM25 windows) and its file's imports."""

    snippets: tuple[Snippet, ...] = ()
    imports: tuple[Statement, ...] = ()


@dataclass(frozen=True)
class _Entry:
    path: str
    parts: tuple[str, ...]  # the path's components, extension dropped
    definition: Definition


class SymbolTable:
    """Every workspace file's top-level definitions, by name and by path. Thread-safe; parsing happens outside
    the lock."""

    def __init__(self) -> None:
        self._by_path: dict[str, tuple[int, list[_Entry]]] = {}
        self._by_name: dict[str, list[_Entry]] = {}
        self._paths_by_part: dict[str, set[str]] = {}  # each path component (directory, file stem) -> its paths
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._by_path)

    def update(self, path: str, text: str | None) -> bool:
        """``path``'s definitions from ``text`` (None: the file is gone). Whether they changed (the same text:
        a no-op)."""
        if text is None:
            return self._replace(path, None)
        key = hash(text)
        with self._lock:
            previous = self._by_path.get(path)
        if previous is not None and previous[0] == key:
            return False
        parts = _path_parts(path)
        found = [_Entry(path, parts, d) for d in definitions(text, detect_language(path=path)) if not d.container]
        changed = previous is None or [e.definition for e in previous[1]] != [e.definition for e in found]
        self._replace(path, (key, found))
        return changed

    def _replace(self, path: str, entry: tuple[int, list[_Entry]] | None) -> bool:
        """Put ``entry`` in ``path``'s place; whether there was one or is one now."""
        with self._lock:
            old = self._by_path.pop(path, None)
            parts = _path_parts(path)
            if old is not None:
                for part in parts:
                    holding = self._paths_by_part.get(part, set())
                    holding.discard(path)
                    if not holding:
                        self._paths_by_part.pop(part, None)
            if entry is not None:
                for part in parts:
                    self._paths_by_part.setdefault(part, set()).add(path)
            for item in old[1] if old is not None else ():
                named = self._by_name.get(item.definition.name, [])
                named[:] = [e for e in named if e.path != path]
                if not named:
                    self._by_name.pop(item.definition.name, None)
            if entry is not None:
                self._by_path[path] = entry
                for item in entry[1]:
                    self._by_name.setdefault(item.definition.name, []).append(item)
        return old is not None or entry is not None

    def has_module(self, module: Sequence[str]) -> bool:
        """Whether ``module`` (path parts) may be a file or package of the workspace (its last part is one)."""
        with self._lock:
            return bool(module) and module[-1] in self._paths_by_part

    def resolve(self, name: str, module: Sequence[str], exclude_path: str) -> list[_Entry]:
        """The definitions of ``name`` in the file(s) that ``module`` (path parts) names best; none when no file's
        path ends with the module's last part (the module is not the workspace's)."""
        with self._lock:
            entries = [e for e in self._by_name.get(name, ()) if e.path != exclude_path]
        return _best_matches(entries, lambda entry: entry.parts, module)[:2]

    def members(self, module: Sequence[str], exclude_path: str) -> list[_Entry]:
        """Every definition of the file(s) that ``module`` (path parts) names best (:meth:`resolve`'s match), in
        source order: what ``module.`` may be followed by."""
        with self._lock:
            paths = sorted(p for p in self._paths_by_part.get(module[-1], ()) if p != exclude_path) if module else []
            return [e for p in _best_matches(paths, _path_parts, module) for e in self._by_path[p][1]]

    def in_directory(self, name: str, directory: tuple[str, ...], exclude_path: str) -> list[_Entry]:
        """The definitions of ``name`` in files of ``directory`` (path parts) other than ``exclude_path``."""
        with self._lock:
            entries = list(self._by_name.get(name, ()))
        return [e for e in entries if e.parts[:-1] == directory and e.path != exclude_path][:2]


def _path_parts(path: str) -> tuple[str, ...]:
    parts = tuple(p for p in path.split("/") if p)
    if parts:
        parts = (*parts[:-1], parts[-1].rsplit(".", 1)[0])
    return parts


def _best_matches(items: Iterable[_T], parts_of: Callable[[_T], tuple[str, ...]], module: Sequence[str]) -> list[_T]:
    """The ``items`` (in their order) whose paths (``parts_of``) ``module`` names best (:func:`_module_match`), none
    where it names none."""
    scored = [(_module_match(parts_of(item), tuple(module)), item) for item in items]
    best = max((score for score, _ in scored), default=0)
    return [item for score, item in scored if score == best > 0]


def _module_match(parts: tuple[str, ...], module: tuple[str, ...]) -> int:
    """How well the file at ``parts`` (extension dropped) is the module ``module``: twice the number of the
    module's parts that end its path, or, one less, end its directory (a package's ``__init__``, ``mod``,
    ``index``, a Go package, a re-exporting package); 0 when neither ends with the module's last part."""
    best = 0
    for candidate, bonus in ((parts, 0), (parts[:-1], -1 if parts[-1:] and parts[-1] not in _PACKAGE_FILES else 0)):
        n = 0
        while n < min(len(candidate), len(module)) and candidate[-1 - n] == module[-1 - n]:
            n += 1
        if n:
            best = max(best, 2 * n + bonus)
    return best


@dataclass(frozen=True)
class _Wanted:
    name: str
    module: tuple[str, ...] | None  # None: look in the file's directory or its includes
    tier: int
    distance: int  # lines from the cursor to the nearest use (a large number: unused)
    overlap: int = 0  # words of its name the region's other lines hold (the named-like tier)


def definitions_at(
    table: SymbolTable, path: str, text: str, offset: int, language: LanguageSpec | None = None
) -> tuple[list[Snippet], FileImports]:
    """The context sections for a cursor at ``offset`` in ``text`` (the file at ``path``): the file's own uses of the
    names the region does not show (:func:`_uses_section`) and one definition section per file; and its imports."""
    language = language or detect_language(path=path)
    imports = file_imports(text, language, path)
    region_start, region_end, cursor_line = _region(text, offset)
    region = text[region_start:region_end]
    first_region_line = text.count("\n", 0, region_start)
    bound = bound_at(text, offset, language)
    wanted = _wanted(
        text, region, first_region_line, cursor_line, imports, language, bound, table.has_module,
        lambda module: [e.definition.name for e in table.members(module, path)],
    )  # fmt: skip
    directory = _path_parts(path)[:-1]
    chosen: dict[tuple[str, str], tuple[int, bool, _Entry]] = {}
    unseen: list[str] = []  # the names found whose uses the region does not show (tiers 0 and 4), in rank order
    for rank, want in enumerate(sorted(wanted, key=_order)):
        if len({key[0] for key in chosen}) >= MAX_DEFINITIONS:
            break
        entries = _resolve(table, want, imports, directory, path)
        for entry in entries:
            chosen.setdefault((entry.definition.name, entry.path), (rank, want.tier == 0, entry))
        if entries and want.tier in _UNSEEN_TIERS and want.name not in unseen:
            unseen.append(want.name)
    skip = _statement_lines(imports) | set(_lines_of(region, first_region_line))
    uses = _uses_section(path, text, unseen, skip, cursor_line)
    return [*uses, *_sections(chosen)], imports


def _uses_section(path: str, text: str, names: Sequence[str], skip: set[int], cursor_line: int) -> list[Snippet]:
    """The file's own nearest use of each of ``names`` on a line not in ``skip`` (the region, the import
    statements), at most :data:`MAX_USES` lines in file order: one section of ``path``, or none."""
    found = _name_lines(text, names, skip)
    picked: list[int] = []
    for name in names:
        where = found.get(name)
        if where:
            nearest = min(where, key=lambda line: abs(line - cursor_line))
            if nearest not in picked:  # two names used on one line: the line once
                picked.append(nearest)
        if len(picked) >= MAX_USES:
            break
    if not picked:
        return []
    lines = text.split("\n")
    picked.sort()
    return [Snippet(path, "".join(lines[n] + "\n" for n in picked), USES_SCORE, picked[0])]


def _resolve(
    table: SymbolTable, want: _Wanted, imports: FileImports, directory: tuple[str, ...], path: str
) -> list[_Entry]:
    if want.module is not None:
        return table.resolve(want.name, want.module, path)
    found = table.in_directory(want.name, directory, path)
    for header in imports.includes:
        found += table.resolve(want.name, header, path)
    return found[:2]


def _region(text: str, offset: int) -> tuple[int, int, int]:
    """The cursor's region (the module docstring) as a character range, and the cursor's line."""
    line = text.count("\n", 0, offset)
    block = line - line % QUERY_LINES
    first, last = max(0, block - REGION_BEFORE), block + QUERY_LINES + REGION_AFTER
    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    return starts[min(first, len(starts) - 1)], starts[last] if last < len(starts) else len(text), line


def _wanted(
    text: str,
    region: str,
    first_region_line: int,
    cursor_line: int,
    imports: FileImports,
    language: LanguageSpec,
    bound: frozenset[str],
    in_workspace: Callable[[Sequence[str]], bool],
    members: Callable[[Sequence[str]], Iterable[str]],
) -> list[_Wanted]:
    """The names to look up, with their tier (the module docstring) and distance from the cursor; ``bound``: the
    names the cursor's function binds itself (``context/scopes.py``), which in the region are not the imports
    spelled like them; ``in_workspace``: whether a module may be the workspace's (the names of others are looked
    up in the region only)."""
    nearest: dict[str, int] = {}
    wanted: list[_Wanted] = []
    statement_lines = _statement_lines(imports)
    skipped = statement_lines | {cursor_line}  # an import line's words name its modules, not what the code does
    words: set[str] = set()  # of the region's other lines: what names the code shows are made of
    for number, line in enumerate(region.split("\n"), first_region_line):
        distance = abs(number - cursor_line)
        names = IDENTIFIER.findall(line)
        for name in names:
            nearest[name] = min(distance, nearest.get(name, distance))
        if number not in skipped:
            words.update(word for name in set(names) for word in name_words(name))
        wanted.extend(_Wanted(use.name, use.module, 1, distance) for use in imported_uses(line, imports, bound))
    region_lines = _lines_of(region, first_region_line)
    where = _name_lines(text, imports.names.keys() | imports.modules.keys(), statement_lines)
    ours = {local for local, imported in imports.names.items() if in_workspace(imported.module)}
    ours |= {local for local, module in imports.modules.items() if in_workspace(module)}
    lines = text.split("\n")
    elsewhere: dict[tuple[str, tuple[str, ...]], int] = {}  # imported uses outside the region: nearest line
    for number in sorted({n for local in ours for n in where.get(local, ()) if n not in region_lines}):
        for use in imported_uses(lines[number], imports):
            key, distance = (use.name, use.module), abs(number - cursor_line)
            elsewhere[key] = min(distance, elsewhere.get(key, distance))
    for local, imported in imports.names.items():
        if local not in where:
            wanted.append(_Wanted(imported.name, imported.module, 2, 1 << 20))
    wanted.extend(_Wanted(name, module, 4, distance) for (name, module), distance in elsewhere.items())
    candidates = [(imported.name, imported.module) for local, imported in imports.names.items() if local in ours]
    for local, module in imports.modules.items():
        candidates += [(name, module) for name in members(module)] if local in ours else []
    wanted.extend(_named_like(candidates, words, nearest.keys(), elsewhere))
    if language.name in _SAME_DIRECTORY or imports.includes:
        defined = {d.name for d in definitions(text, language)} if nearest else set()
        for name, distance in nearest.items():
            if name not in imports.names and name not in defined:
                wanted.append(_Wanted(name, None, 3, distance))
    return wanted


def _statement_lines(imports: FileImports) -> set[int]:
    """The lines the file's import statements span."""
    return {n for statement in imports.statements for n in range(statement.start, statement.end)}


def _lines_of(text: str, first_line: int) -> range:
    """The line numbers of ``text`` (a region, a window), whose first line is ``first_line``."""
    return range(first_line, first_line + text.count("\n") + 1)


def _named_like(
    candidates: Iterable[tuple[str, tuple[str, ...]]],
    words: set[str],
    shown: Set[str],
    elsewhere: dict[tuple[str, tuple[str, ...]], int],
) -> list[_Wanted]:
    """Tier 0: of the ``candidates`` (name, module) that the region does not show (``shown``: the names it
    holds), the :data:`MAX_NAMED_LIKE` whose names share the most ``words`` with the region's lines, nearest use
    (``elsewhere``) first among equals."""
    named: dict[str, _Wanted] = {}
    for name, module in candidates:
        overlap = len(name_words(name) & words)
        if overlap and name not in shown and name not in named:
            named[name] = _Wanted(name, module, 0, elsewhere.get((name, module), 1 << 20), overlap)
    return sorted(named.values(), key=_order)[:MAX_NAMED_LIKE]


def _order(want: _Wanted) -> tuple[int, int, int, str]:
    """Which names are looked up first: by tier, the named-like tier by its overlap, then nearest use first."""
    return (want.tier, -want.overlap, want.distance, want.name)


_STOP_WORDS = frozenset({"self", "cls", "this", "none", "null", "true", "false", "str", "int", "def", "return"})


@functools.lru_cache(maxsize=8192)
def name_words(name: str) -> frozenset[str]:
    """The words an identifier is made of, lower case, at least three letters (``LINE_COMMENT_PREFIX``,
    ``lineCommentPrefix``: line, comment, prefix; ``HTTPError``: http, error)."""
    found = (w.lower() for part in name.split("_") for w in _WORD.findall(part))
    return frozenset(w for w in found if len(w) >= 3 and w not in _STOP_WORDS)


_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")


@functools.lru_cache(maxsize=64)
def _names_pattern(names: frozenset[str]) -> re.Pattern[str]:
    """Any of ``names`` as a whole identifier (a class of their first characters first: the scan skips on)."""
    alternatives = "|".join(sorted(map(re.escape, names), key=len, reverse=True))
    first = "".join(sorted({re.escape(name[0]) for name in names}))
    return re.compile(rf"(?<![\w$])(?=[{first}])(?:{alternatives})(?![\w$])")


def _name_lines(text: str, names: Iterable[str], skip: set[int]) -> dict[str, list[int]]:
    """The lines (0-based, ascending) where each of ``names`` occurs as a whole identifier, ``skip`` left out;
    a name that occurs nowhere else is not a key."""
    found: dict[str, list[int]] = {}
    wanted = frozenset(names)
    if not wanted:
        return found
    line = at = 0
    for match in _names_pattern(wanted).finditer(text):
        line += text.count("\n", at, match.start())
        at = match.start()
        if line not in skip:
            found.setdefault(match.group(0), []).append(line)
    return found


def _sections(chosen: dict[tuple[str, str], tuple[int, bool, _Entry]]) -> list[Snippet]:
    """One section per file, scored by its best rank: the stubs of the names the region does not show first
    (a section cut to the budget keeps them), each group in source order."""
    by_path: dict[str, list[tuple[int, bool, _Entry]]] = {}
    for rank, named, entry in chosen.values():
        by_path.setdefault(entry.path, []).append((rank, named, entry))
    sections = []
    for path, items in by_path.items():
        items.sort(key=lambda item: (not item[1], item[2].definition.line))
        text = "".join(entry.definition.stub for _, _, entry in items)
        best = min(rank for rank, _, _ in items)
        sections.append(Snippet(path, text, DEFINITION_SCORE - best, items[0][2].definition.line))
    return sections


def cursor_context(
    snippets: SnippetIndex, table: SymbolTable | None, path: str, text: str, offset: int
) -> CursorContext:
    """The context sections for a cursor: the definitions it needs (:func:`definitions_at`), then the BM25
    windows of other files that pass the relevance bar (``context/snippets.py``) and hold none of those
    definitions already; and the file's top-level import statements."""
    windows = snippets.query_at(text, offset, exclude_path=path)
    if table is None:
        return CursorContext(tuple(windows))
    found, imports = definitions_at(table, path, text, offset)
    covered = {(s.path, s.start_line) for s in found}  # the first line of each definition section
    windows = [w for w in windows if not any((w.path, line) in covered for line in _lines_of(w.text, w.start_line))]
    statements = tuple(
        replace(s, local=s.local or table.has_module(s.module)) for s in imports.statements if s.top_level
    )
    return CursorContext((*found, *windows), statements)
