"""Fill-in-the-middle holes cut from a directory of real code, deterministic for a seed.

Workloads (each a list of :class:`Hole`; ``prefix + middle + suffix`` is always the file's text):

- ``fim``: a random statement, or a run of sibling statements (Python's ``ast`` for ``.py`` files, lines for
  others), cut from the start of its first line's code to the end of its last line. Half single-line,
  half multi-line.
- ``repo``: the body of a function whose code shares many 4-grams with another function of the same
  repository (a sibling method, the next test, a twin backend): what the workspace index should find.
- ``none``: a statement whose 4-grams occur nowhere else, neither in its file nor in the rest of the
  corpus: the control where no draft source can help, to measure the decoder's overhead.
- ``midline``: the rest of a line from a random column, half between two lexical tokens and half inside
  an identifier or number (for token healing).
- ``block``: a run of sibling statements inside a function, BLOCK_LINES lines in all, cut from the start of its
  first line's code: the cursor sits on an empty indented line where a block was, as a user asks for one.
- ``xfile``: a line that uses a name defined in another file of the corpus, imported by its own file (a call,
  a class, an attribute of an imported module: ``context/definitions.py`` resolves it), half cut just before
  that name (the rest of the line is the middle) and half the whole line from its indentation (an empty
  indented line). What a completion can only get right by knowing the other file.

n-grams here are over lexical tokens (identifiers, numbers, single punctuation characters), independent of
any model's tokenizer. The workspace of a hole is the corpus with the hole's file as the user sees it
before typing it: ``prefix + suffix``.
"""

from __future__ import annotations

import ast
import importlib.util
import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from functools import partial
from importlib import metadata
from pathlib import Path

from lookahead_lsp.context.definitions import SymbolTable
from lookahead_lsp.context.imports import FileImports, file_imports, imported_uses
from lookahead_lsp.context.languages import detect_language, get_parser
from lookahead_lsp.context.scopes import bound_at

WORKLOADS = ("fim", "repo", "none", "midline", "block", "xfile")
DEFAULT_CORPUS_PACKAGE = "pathspec"
CODE_SUFFIXES = frozenset(
    {".py", ".pyi", ".js", ".ts", ".tsx", ".go", ".rs", ".java", ".c", ".h", ".cc", ".cpp", ".hpp", ".lua"}
)
MAX_FILE_BYTES = 200_000
NGRAM = 4
MAX_HOLE_CHARS = 800
MAX_HOLE_LINES = 12
MIN_HOLE_TOKENS = 4
MIN_REPO_SIMILARITY = 0.5
BLOCK_LINES = (6, 11)  # block holes: fewest and most lines removed

_LEXICAL_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+|\S")
_WORD_CHAR = re.compile(r"\w")


def lexical_tokens(text: str) -> list[str]:
    """Identifiers, numbers and single punctuation characters: a tokenizer-independent view of code."""
    return _LEXICAL_TOKEN.findall(text)


def ngrams(text: str, n: int = NGRAM) -> Counter[tuple[str, ...]]:
    """The lexical ``n``-grams of ``text`` with their counts."""
    tokens = lexical_tokens(text)
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


@dataclass(frozen=True)
class SourceFile:
    path: str  # relative to the corpus root, with forward slashes
    text: str


@dataclass(frozen=True)
class Hole:
    """One completion task: the cursor sits between ``prefix`` and ``suffix``; ``middle`` was removed."""

    workload: str
    kind: str  # single-line, multi-line, function-body, between-tokens, inside-token
    path: str
    prefix: str
    middle: str
    suffix: str
    similar_to: str | None = None  # repo holes: "path:function" of the most similar other function
    similarity: float = 0.0  # repo holes: share of the body's 4-grams found in ``similar_to``

    @property
    def line(self) -> int:
        """0-based line of the cursor."""
        return self.prefix.count("\n")

    @property
    def column(self) -> int:
        """0-based column (in characters) of the cursor."""
        return len(self.prefix) - (self.prefix.rfind("\n") + 1)

    @property
    def id(self) -> str:
        return f"{self.workload}:{self.path}:{self.line + 1}:{self.column}"

    @property
    def file_text(self) -> str:
        return self.prefix + self.middle + self.suffix

    @property
    def text_before_typing(self) -> str:
        """The file as the user has it when asking for the completion."""
        return self.prefix + self.suffix

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "workload": self.workload,
            "kind": self.kind,
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "middle": self.middle,
            "similar_to": self.similar_to,
            "similarity": round(self.similarity, 3),
        }


@dataclass
class Corpus:
    """The code files under ``root`` (sorted by path), read once."""

    root: Path
    files: list[SourceFile]
    name: str
    _by_path: dict[str, SourceFile] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._by_path = {f.path: f for f in self.files}

    @classmethod
    def load(cls, root: str | Path | None = None) -> Corpus:
        """Read the corpus at ``root`` (default: the installed ``pathspec`` package's source)."""
        root_path = Path(root) if root is not None else default_corpus_root()
        if not root_path.is_dir():
            raise FileNotFoundError(f"corpus directory not found: {root_path}")
        files = [SourceFile(rel, text) for rel, text in _read_code_files(root_path)]
        if not files:
            raise ValueError(f"no code files under {root_path}")
        return cls(root_path, files, describe_corpus(root_path))

    def file(self, path: str) -> SourceFile:
        return self._by_path[path]

    def workspace(self, hole: Hole) -> dict[str, str]:
        """All files by path as the user has them at the hole: its own file without the middle."""
        texts = {f.path: f.text for f in self.files}
        texts[hole.path] = hole.text_before_typing
        return texts


def default_corpus_root() -> Path:
    """The source directory of an installed dependency none of us wrote."""
    spec = importlib.util.find_spec(DEFAULT_CORPUS_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"the default corpus package {DEFAULT_CORPUS_PACKAGE!r} is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def describe_corpus(root: Path) -> str:
    """``name version`` when ``root`` is an installed package (that very directory, not a source tree of the
    same name, such as an unpacked sdist, whose version may differ), else the directory's name."""
    resolved = root.resolve()
    top_level = resolved.name
    distributions = metadata.packages_distributions().get(top_level, [])
    for dist_name in distributions:
        try:
            installed = Path(str(metadata.distribution(dist_name).locate_file(top_level))).resolve()
        except metadata.PackageNotFoundError:
            continue
        if installed == resolved:
            return f"{dist_name} {metadata.version(dist_name)}"
    return top_level


def _read_code_files(root: Path) -> Iterator[tuple[str, str]]:
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(part.startswith(".") or part == "__pycache__" for part in rel.parts):
            continue
        if path.suffix not in CODE_SUFFIXES or not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        yield rel.as_posix(), text


# --- spans: (start, end) character offsets into a file's text ------------------------------------------


@dataclass(frozen=True)
class _Span:
    path: str
    start: int
    end: int
    kind: str

    def overlaps(self, other: _Span) -> bool:
        return self.path == other.path and self.start < other.end and other.start < self.end

    def cut(self, corpus: Corpus, workload: str, **extra: object) -> Hole:
        text = corpus.file(self.path).text
        return Hole(
            workload=workload,
            kind=self.kind,
            path=self.path,
            prefix=text[: self.start],
            middle=text[self.start : self.end],
            suffix=text[self.end :],
            **extra,  # type: ignore[arg-type]
        )


def _line_starts(text: str) -> list[int]:
    starts = [0]
    starts.extend(m.end() for m in re.finditer("\n", text))
    return starts


class _Lines:
    """Character offsets of line starts, code starts (after indentation) and line ends (before newline)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.split("\n")
        self.starts = _line_starts(text)

    def indent(self, i: int) -> int:
        line = self.lines[i]
        return len(line) - len(line.lstrip())

    def code_start(self, i: int) -> int:
        return self.starts[i] + self.indent(i)

    def end(self, i: int) -> int:
        return self.starts[i] + len(self.lines[i])

    def span(self, path: str, first: int, last: int, start: int | None = None) -> _Span | None:
        """Lines ``first..last`` (0-based), from the code start of ``first`` (or ``start``) to the end of
        ``last``; ``None`` when too long or without enough code."""
        begin = self.code_start(first) if start is None else start
        end = self.end(last)
        middle = self.text[begin:end]
        if last - first + 1 > MAX_HOLE_LINES or len(middle) > MAX_HOLE_CHARS:
            return None
        if len(lexical_tokens(middle)) < MIN_HOLE_TOKENS:
            return None
        return _Span(path, begin, end, "single-line" if first == last else "multi-line")


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _owns_its_lines(lines: _Lines, first: ast.stmt, last: ast.stmt) -> bool:
    """True when the statements start their first line and nothing but a comment follows the last one."""
    assert last.end_lineno is not None and last.end_col_offset is not None
    start_line = lines.lines[first.lineno - 1]
    end_line = lines.lines[last.end_lineno - 1].encode()
    rest = end_line[last.end_col_offset :].decode(errors="replace").strip()
    return not start_line[: first.col_offset].strip() and (not rest or rest.startswith("#"))


def _statement_blocks(tree: ast.AST) -> Iterator[list[ast.stmt]]:
    """Every list of sibling statements (module, function, class and compound bodies)."""
    for node in ast.walk(tree):
        for attr in ("body", "orelse", "finalbody"):
            block = getattr(node, attr, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                yield block
        for handler in getattr(node, "handlers", []) or []:
            yield handler.body
        for case in getattr(node, "cases", []) or []:
            yield case.body


def _python_statement_spans(path: str, text: str) -> Iterator[_Span]:
    """Single statements and runs of 2-3 sibling statements that own their lines, docstrings excluded."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return
    lines = _Lines(text)
    for block in _statement_blocks(tree):
        for i, first in enumerate(block):
            for run in (1, 2, 3):
                if i + run > len(block) or _is_docstring(block[i + run - 1]):
                    break
                last = block[i + run - 1]
                if not _owns_its_lines(lines, first, last):
                    continue
                assert last.end_lineno is not None
                span = lines.span(path, first.lineno - 1, last.end_lineno - 1)
                if span is not None:
                    yield span


def _line_spans(path: str, text: str) -> Iterator[_Span]:
    """For files without a parser: single non-blank lines, and runs of 2-4 lines staying in one block."""
    lines = _Lines(text)
    for first, line in enumerate(lines.lines):
        if not line.strip():
            continue
        for count in (1, 2, 3, 4):
            last = first + count - 1
            if last >= len(lines.lines) or not lines.lines[last].strip():
                break
            if lines.indent(last) < lines.indent(first):
                break
            span = lines.span(path, first, last)
            if span is not None:
                yield span


def statement_spans(corpus: Corpus) -> list[_Span]:
    """All statement-boundary spans of the corpus, in a stable order."""
    spans: list[_Span] = []
    for f in corpus.files:
        spans.extend(_python_statement_spans(f.path, f.text) if f.path.endswith(".py") else _line_spans(f.path, f.text))
    return spans


# --- the workloads -------------------------------------------------------------------------------------


def _pick(rng: random.Random, items: list[_Span], count: int) -> list[_Span]:
    return rng.sample(items, min(count, len(items)))


def _half_and_half(rng: random.Random, spans: Iterable[_Span], count: int, kinds: tuple[str, str]) -> list[_Span]:
    """``count`` spans, half of the first kind and the rest of the second (or more of one if short)."""
    by_kind: dict[str, list[_Span]] = {kind: [] for kind in kinds}
    for span in spans:
        if span.kind in by_kind:
            by_kind[span.kind].append(span)
    first = _pick(rng, by_kind[kinds[0]], (count + 1) // 2)
    second = _pick(rng, by_kind[kinds[1]], count - len(first))
    if len(first) + len(second) < count:  # the second kind ran short: top up with the first
        rest = [s for s in by_kind[kinds[0]] if s not in first]
        first += _pick(rng, rest, count - len(first) - len(second))
    return first + second


def fim_holes(corpus: Corpus, count: int, rng: random.Random) -> list[Hole]:
    spans = _half_and_half(rng, statement_spans(corpus), count, ("single-line", "multi-line"))
    return [span.cut(corpus, "fim") for span in spans]


def none_holes(corpus: Corpus, count: int, rng: random.Random) -> list[Hole]:
    """Statements whose 4-grams occur nowhere else in the corpus (checked exactly on the chosen holes)."""
    totals: Counter[tuple[str, ...]] = Counter()
    for f in corpus.files:
        totals.update(ngrams(f.text))

    def unique(span: _Span) -> bool:
        grams = ngrams(corpus.file(span.path).text[span.start : span.end])
        return bool(grams) and all(totals[g] == n for g, n in grams.items())

    candidates = [span for span in statement_spans(corpus) if unique(span)]
    rng.shuffle(candidates)
    holes: list[Hole] = []
    for span in candidates:
        if len(holes) == count:
            break
        hole = span.cut(corpus, "none")
        if not overlaps_workspace(hole, corpus):
            holes.append(hole)
    return holes


def overlaps_workspace(hole: Hole, corpus: Corpus) -> bool:
    """Whether any 4-gram of the hole's text occurs in its workspace (its own file included)."""
    grams = set(ngrams(hole.middle))
    return any(grams & set(ngrams(text)) for text in corpus.workspace(hole).values())


@dataclass(frozen=True)
class _Function:
    name: str  # "path:qualified.name"
    body: _Span
    grams: frozenset[tuple[str, ...]]


def _python_files(corpus: Corpus) -> Iterator[tuple[SourceFile, ast.AST, _Lines]]:
    """The corpus's Python files that parse, each with its syntax tree and line offsets."""
    for f in corpus.files:
        if not f.path.endswith(".py"):
            continue
        try:
            tree = ast.parse(f.text)
        except (SyntaxError, ValueError):
            continue
        yield f, tree, _Lines(f.text)


def _python_functions(corpus: Corpus) -> list[_Function]:
    """Function bodies (after any docstring) of 2 to MAX_HOLE_LINES lines, with their 4-gram sets."""
    functions: list[_Function] = []
    for f, tree, lines in _python_files(corpus):
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            body = node.body[1:] if _is_docstring(node.body[0]) else node.body
            if not body or not _owns_its_lines(lines, body[0], body[-1]):
                continue
            assert body[-1].end_lineno is not None
            span = lines.span(f.path, body[0].lineno - 1, body[-1].end_lineno - 1)
            if span is None or span.kind != "multi-line":
                continue
            grams = frozenset(ngrams(f.text[span.start : span.end]))
            body_span = replace(span, kind="function-body")
            functions.append(_Function(f"{f.path}:{node.name}@{node.lineno}", body_span, grams))
    return functions


def _most_similar(functions: list[_Function]) -> Iterator[tuple[_Function, _Function, float]]:
    """For each function, the other one holding the largest share of its 4-grams."""
    owners: dict[tuple[str, ...], list[int]] = {}
    for index, fn in enumerate(functions):
        for gram in fn.grams:
            owners.setdefault(gram, []).append(index)
    for fn in functions:
        shared: Counter[int] = Counter()
        for gram in fn.grams:
            shared.update(other for other in owners[gram] if not fn.body.overlaps(functions[other].body))
        if fn.grams and shared:
            other, count = max(shared.items(), key=lambda item: (item[1], -item[0]))
            yield fn, functions[other], count / len(fn.grams)


def repo_holes(corpus: Corpus, count: int, rng: random.Random) -> list[Hole]:
    """Function bodies sharing at least MIN_REPO_SIMILARITY of their 4-grams with another function."""
    similar = [
        (fn, twin, score)
        for fn, twin, score in _most_similar(_python_functions(corpus))
        if score >= MIN_REPO_SIMILARITY
    ]
    chosen = rng.sample(similar, min(count, len(similar)))
    return [fn.body.cut(corpus, "repo", similar_to=twin.name, similarity=score) for fn, twin, score in chosen]


def midline_holes(corpus: Corpus, count: int, rng: random.Random) -> list[Hole]:
    """The rest of a single-line statement from a column inside it: half between two lexical tokens, half
    inside an identifier or number (both sides of the cut hold code)."""
    spans: list[_Span] = []
    for statement in statement_spans(corpus):
        if statement.kind != "single-line":
            continue
        text = corpus.file(statement.path).text
        for cut in range(statement.start + 1, statement.end - 1):
            inside = bool(_WORD_CHAR.match(text[cut - 1]) and _WORD_CHAR.match(text[cut]))
            spans.append(replace(statement, start=cut, kind="inside-token" if inside else "between-tokens"))
    chosen = _half_and_half(rng, spans, count, ("between-tokens", "inside-token"))
    return [span.cut(corpus, "midline") for span in chosen]


def _function_bodies(tree: ast.AST) -> Iterator[list[ast.stmt]]:
    """Every list of sibling statements inside a function (a nested function's again: callers dedupe)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield from _statement_blocks(node)


def block_spans(corpus: Corpus) -> list[_Span]:
    """Runs of sibling statements inside functions spanning BLOCK_LINES lines, docstrings excluded."""
    fewest, most = BLOCK_LINES
    spans: dict[tuple[str, int, int], _Span] = {}
    for f, tree, lines in _python_files(corpus):
        for block in _function_bodies(tree):
            for i, first in enumerate(block):
                for last in block[i:]:
                    assert last.end_lineno is not None
                    count = last.end_lineno - first.lineno + 1
                    if count > most or _is_docstring(first):
                        break
                    if count < fewest or not _owns_its_lines(lines, first, last):
                        continue
                    span = lines.span(f.path, first.lineno - 1, last.end_lineno - 1)
                    if span is not None:
                        spans[(span.path, span.start, span.end)] = replace(span, kind="block")
    return list(spans.values())


def block_holes(corpus: Corpus, count: int, rng: random.Random) -> list[Hole]:
    """Blocks of BLOCK_LINES lines removed inside functions, no two overlapping."""
    candidates = block_spans(corpus)
    rng.shuffle(candidates)
    chosen: list[_Span] = []
    for span in candidates:
        if len(chosen) == count:
            break
        if not any(span.overlaps(other) for other in chosen):
            chosen.append(span)
    return [span.cut(corpus, "block") for span in chosen]


def xfile_spans(corpus: Corpus) -> list[_Span]:
    """Every line that uses an imported name defined in another corpus file: cut before its first such name
    (``before-name``) and from its indentation (``empty-line``); lines of at most MAX_XFILE_LINE characters. A
    name the line's function binds itself (a parameter ``prompt`` where the file imports ``prompt``) is not a use
    of the import."""
    table = SymbolTable()
    for f in corpus.files:
        table.update(f.path, f.text)
    spans: list[_Span] = []
    for f in corpus.files:
        language = detect_language(path=f.path)
        imports = file_imports(f.text, language, f.path)
        if not imports.names and not imports.modules:
            continue
        skip = {n for s in imports.statements for n in range(s.start, s.end)}
        code_at = _code_positions(f)
        start = 0
        for number, line in enumerate(f.text.split("\n")):
            end = start + len(line)
            code = line.strip()
            if number not in skip and 0 < len(code) <= MAX_XFILE_LINE and not code.startswith(_COMMENTS):
                indent = len(line) - len(line.lstrip())
                bound = partial(bound_at, f.text, end, language)  # the line whole: a def line binds its own
                first = _first_imported_use(line, imports, table, f.path, bound)
                if first is not None and code_at(start + first):
                    spans.append(_Span(f.path, start + first, end, "before-name"))
                    if indent:
                        spans.append(_Span(f.path, start + indent, end, "empty-line"))
            start = end + 1
    return spans


MAX_XFILE_LINE = 120
_COMMENTS = ("#", "//", "/*", "*", '"""', "'''", "@")


def _code_positions(f: SourceFile) -> Callable[[int], bool]:
    """Whether the character at an offset of ``f`` is code (an identifier outside strings and comments), by
    its tree-sitter parse; every offset counts as code in a language without a grammar."""
    parser = get_parser(detect_language(path=f.path))
    if parser is None:
        return lambda offset: True
    source = f.text.encode("utf-8", "surrogatepass")
    root = parser.parse(source).root_node

    def is_code(offset: int) -> bool:
        byte = len(f.text[:offset].encode("utf-8", "surrogatepass"))
        node = root.descendant_for_byte_range(byte, byte + 1)
        while node is not None:
            if "string" in node.type or "comment" in node.type:
                return False
            node = node.parent
        return True

    return is_code


def _first_imported_use(
    line: str, imports: FileImports, table: SymbolTable, path: str, bound: Callable[[], frozenset[str]]
) -> int | None:
    """The column of the first use on ``line`` of an imported name (``context/imports.py``) that resolves to a
    definition in another file of the corpus; ``bound``: the names the line's function binds itself (a parameter
    spelled like an import is not a use of it), asked only of a line that has a candidate."""
    if not any(table.resolve(use.name, use.module, path) for use in imported_uses(line, imports)):
        return None
    for use in imported_uses(line, imports, bound()):
        if table.resolve(use.name, use.module, path):
            return use.column
    return None


def xfile_holes(corpus: Corpus, count: int, rng: random.Random) -> list[Hole]:
    """Half ``before-name``, half ``empty-line`` holes from :func:`xfile_spans`, one per line."""
    spans = xfile_spans(corpus)
    rng.shuffle(spans)
    chosen: list[_Span] = []
    lines: set[tuple[str, int]] = set()
    for kind in ("before-name", "empty-line"):
        wanted = count // 2 if kind == "before-name" else count - len(chosen)
        for span in spans:
            key = (span.path, corpus.file(span.path).text.count("\n", 0, span.start))
            if span.kind == kind and key not in lines and wanted > 0:
                chosen.append(span)
                lines.add(key)
                wanted -= 1
    return [span.cut(corpus, "xfile") for span in chosen]


_GENERATORS: dict[str, Callable[[Corpus, int, random.Random], list[Hole]]] = {
    "fim": fim_holes,
    "repo": repo_holes,
    "none": none_holes,
    "midline": midline_holes,
    "block": block_holes,
    "xfile": xfile_holes,
}


def make_holes(corpus: Corpus, workload: str, count: int, seed: int = 0) -> list[Hole]:
    """``count`` holes of one workload (fewer if the corpus has fewer), the same for the same seed."""
    if workload not in _GENERATORS:
        raise ValueError(f"unknown workload {workload!r}; choose from {', '.join(WORKLOADS)}")
    rng = random.Random(f"{seed}:{workload}")
    holes = _GENERATORS[workload](corpus, count, rng)
    return sorted(holes, key=lambda h: (h.path, len(h.prefix)))
