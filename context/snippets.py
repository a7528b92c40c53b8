"""Snippets from other files, ranked by relevance to the code around the cursor (BM25 over line windows).

Each document is cut into windows of :data:`CHUNK_LINES` lines every :data:`CHUNK_STRIDE` lines (they overlap,
so code near a window edge is still found whole). A window's terms are its identifiers (lower-cased, split at
``snake_case`` and ``camelCase`` boundaries too, keywords and very short names left out). The index is an
inverted one updated per document (adding or removing a document touches only its windows), so a query costs
time in proportion to the postings of the query's terms, not to the workspace: fine for every keystroke.

Order is deterministic: score, then path, then line. Overlapping windows of one file are merged into the best.

A relevance bar decides whether a window may reach the prompt at all (most retrieved context does not help a
completion and some hurts it: Repoformer's selective retrieval): a window is relevant when it defines a name
that the code before the cursor uses and does not define itself (a function, class, method or module-level
name: what the cursor's code calls), or when it holds at least :data:`RELEVANT_COVERAGE` of the query's terms
(the common ones left out, as in ranking: code like the cursor's, a sibling test, the other half of a
pattern). Windows that only share common words (``typing``, ``list``, a parameter name) stay out, so an
unrelated open file never changes a completion. The bar reads code only, on both sides (:func:`code_only`:
string literals and comments blanked): two documented functions share the words of their prose ("the",
"given", "array", "return"), which says nothing of whether one's code helps to write the other's. The share
is of the terms' weight (their idf, as in ranking, counted as if the workspace had :data:`COMMON_MIN_CHUNKS`
windows at least), not of their count: a query with little code (a function's
first lines under its comment) shares ``numbers``, ``sum`` and ``length`` with any code that sums numbers,
while its own names (``sum_product``) are what the window would have to know. Terms that most other files hold
(:data:`COMMON_MIN_FILES`: the same imports, a package or class header, a list's ``add`` in a Java project) count
for neither part of the bar: they say nothing of which file the cursor needs, though a file's first window holds
them once, so their window count is low. Ranking reads the whole text.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

from lookahead_lsp.context.languages import UNKNOWN, detect_language

CHUNK_LINES = 30
CHUNK_STRIDE = 15
K1 = 1.2
B = 0.75
MAX_QUERY_TERMS = 64
COMMON_FRACTION = 0.5  # in an index of COMMON_MIN_CHUNKS windows or more, terms in more than this fraction
COMMON_MIN_CHUNKS = 100  # of them are skipped (low idf, long postings)
COMMON_MIN_FILES = 8  # in a workspace of this many other files or more, the bar skips terms in more than
# COMMON_FRACTION of them (boilerplate every file has: a package line, the same imports, a class header)
QUERY_CHARS = 1800  # characters before the cursor's block of lines that pick the context snippets
QUERY_LINES = 8  # the block: the query moves only when the cursor enters another block of lines
RELEVANT_COVERAGE = 0.5  # a window without a definition the query uses must hold this share of its terms' idf

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NAME = r"([A-Za-z_][A-Za-z0-9_]*)"
_DEFINITIONS = (
    # a definition keyword at any depth: functions, classes, methods, types
    re.compile(rf"\b(?:def|class|function|func|fn|struct|interface|enum|trait|type|macro_rules!)\s+\*?{_NAME}"),
    # a module-level name: an assignment or declaration at column 0
    re.compile(rf"^(?:export\s+)?(?:(?:const|let|var|static|pub)\s+)*{_NAME}\s*(?::[^=\n]*)?=(?!=)", re.M),
    # a C-family method or function: modifiers, a type, the name and "(" starting a line
    re.compile(
        rf"^[ \t]*(?:(?:public|private|protected|static|final|abstract|inline|virtual|async)\s+)*"
        rf"[A-Za-z_][\w<>\[\],.?*&:]*\s+\*?{_NAME}\s*\([^;]*$",
        re.M,
    ),
)
_TRIPLE_QUOTED = r'"""[\s\S]*?(?:"""|\Z)|' + r"'''[\s\S]*?(?:'''|\Z)"
_DOUBLE_QUOTED = r'"(?:\\.|[^"\\\n])*"?'
_SINGLE_QUOTED = r"'(?:\\.|[^'\\\n])*'?"
_C_COMMENTS = r"//[^\n]*|/\*[\s\S]*?(?:\*/|\Z)"
_NOT_CODE = {  # string literals and comments, by language (a C-family language without '-strings: chars)
    "python": re.compile(rf"{_TRIPLE_QUOTED}|{_DOUBLE_QUOTED}|{_SINGLE_QUOTED}|#[^\n]*"),
    "quotes": re.compile(rf"{_C_COMMENTS}|{_DOUBLE_QUOTED}|{_SINGLE_QUOTED}|`(?:\\.|[^`\\])*`?"),
    "braces": re.compile(rf"{_C_COMMENTS}|{_DOUBLE_QUOTED}|'(?:\\.[^'\n]{{0,8}}|[^'\\\n])'"),
}
_NOT_BREAK = re.compile(r"[^\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")  # what str.splitlines() does not break at
_NOT_TYPES = frozenset(["return", "new", "throw", "else", "await", "yield", "case", "goto", "delete", "typeof"])
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_STOPWORDS = frozenset(
    [
        "and",
        "as",
        "assert",
        "async",
        "await",
        "break",
        "case",
        "catch",
        "char",
        "class",
        "const",
        "continue",
        "def",
        "default",
        "del",
        "do",
        "elif",
        "else",
        "enum",
        "except",
        "export",
        "extends",
        "false",
        "final",
        "finally",
        "fn",
        "for",
        "from",
        "func",
        "function",
        "go",
        "if",
        "impl",
        "import",
        "in",
        "int",
        "interface",
        "is",
        "let",
        "match",
        "mod",
        "mut",
        "new",
        "nil",
        "none",
        "not",
        "null",
        "or",
        "package",
        "pass",
        "pub",
        "raise",
        "return",
        "self",
        "static",
        "str",
        "struct",
        "super",
        "switch",
        "this",
        "throw",
        "throws",
        "true",
        "try",
        "type",
        "typeof",
        "use",
        "var",
        "void",
        "while",
        "with",
        "yield",
    ]
)


@dataclass(frozen=True)
class Snippet:
    """A piece of a file for the prompt's context: ``start_line`` is 0-based."""

    path: str
    text: str
    score: float
    start_line: int


def terms(text: str) -> list[str]:
    """The BM25 terms of ``text``: identifiers and their sub-words, lower-cased, without keywords."""
    out: list[str] = []
    for identifier in _IDENTIFIER.findall(text):
        words = {identifier.lower()}
        if "_" in identifier or not identifier.islower():
            words.update(w.lower() for part in identifier.split("_") for w in _CAMEL.findall(part))
        out.extend(w for w in words if len(w) > 1 and w not in _STOPWORDS)
    return out


def defined_names(text: str) -> frozenset[str]:
    """The names ``text`` defines (lower-cased, as :func:`terms` gives them): see :data:`_DEFINITIONS`."""
    names: set[str] = set()
    for pattern in _DEFINITIONS:
        for match in pattern.finditer(text):
            before = text[text.rfind("\n", 0, match.start(1)) + 1 : match.start(1)].split()
            if not before or before[-1] not in _NOT_TYPES:
                names.add(match.group(1).lower())
    return frozenset(n for n in names if len(n) > 1 and n not in _STOPWORDS)


def code_only(text: str, path: str | None = None, start: int = 0, end: int | None = None) -> str:
    """``text[start:end]`` with its string literals and comments blanked to spaces (line breaks kept, so offsets
    and lines are the same): by ``path``'s language, quotes and ``#`` comments where it has no braces (Python),
    else ``//`` and ``/* */`` comments and its quotes (``'`` a char literal where it quotes no strings); an
    unclosed one runs to its line's end (a block: the text's). A language not known is left as it is.

    A slice may begin inside a docstring or a block comment: whether it does is told by counting the openers
    and closers before ``start`` (C speed, the text is not scanned), and the slice is read as if reopened."""
    language = detect_language(path=path) if path else UNKNOWN
    piece = text[start:end]
    if language is UNKNOWN:
        return piece
    if not language.braces:
        kind, inside = "python", next((q for q in ('"""', "'''") if text.count(q, 0, start) % 2), "")
    else:
        kind = "quotes" if language.quote_strings else "braces"
        inside = "/*" if text.rfind("/*", 0, start) > text.rfind("*/", 0, start) else ""
    return _NOT_CODE[kind].sub(_blank, inside + piece)[len(inside) :]


def _blank(match: re.Match[str]) -> str:
    return _NOT_BREAK.sub(" ", match.group())


@dataclass(frozen=True)
class _Chunk:
    path: str
    start_line: int
    text: str
    length: int  # number of terms
    defines: frozenset[str]  # names its code defines (defined_names)
    code_terms: frozenset[str]  # the terms of its code (code_only): what the relevance bar reads


class SnippetIndex:
    """An incremental BM25 index of line windows over documents (open files and workspace files)."""

    def __init__(self, chunk_lines: int = CHUNK_LINES, stride: int = CHUNK_STRIDE) -> None:
        if chunk_lines <= 0 or not 0 < stride <= chunk_lines:
            raise ValueError("need chunk_lines > 0 and 0 < stride <= chunk_lines")
        self.chunk_lines = chunk_lines
        self.stride = stride
        self._chunks: dict[int, _Chunk] = {}
        self._postings: dict[str, dict[int, int]] = {}  # term -> chunk id -> term frequency
        self._by_path: dict[str, tuple[int, list[int]]] = {}  # path -> (hash of text, chunk ids)
        self._file_terms: dict[str, frozenset[str]] = {}  # path -> the terms of its code
        self._files_with: Counter[str] = Counter()  # term -> files whose code holds it
        self._next_id = 0
        self._total_length = 0

    def __len__(self) -> int:
        return len(self._by_path)

    def __contains__(self, path: object) -> bool:
        return path in self._by_path

    def add_document(self, path: str, text: str) -> None:
        """Index ``text`` as ``path`` (replacing an earlier version; a no-op when the text is unchanged)."""
        key = hash(text)
        previous = self._by_path.get(path)
        if previous is not None and previous[0] == key:
            return
        self.remove_document(path)
        code = self._windows(code_only(text, path))  # the same lines, strings and comments blanked
        ids = [self._add_chunk(path, start, chunk, code.get(start, "")) for start, chunk in self._windows(text).items()]
        self._by_path[path] = (key, ids)
        file_terms = frozenset().union(*(self._chunks[c].code_terms for c in ids))
        self._file_terms[path] = file_terms
        self._files_with.update(file_terms)

    def remove_document(self, path: str) -> None:
        entry = self._by_path.pop(path, None)
        if entry is None:
            return
        for term in self._file_terms.pop(path):
            self._files_with[term] -= 1
            if not self._files_with[term]:
                del self._files_with[term]
        for chunk_id in entry[1]:
            chunk = self._chunks.pop(chunk_id)
            self._total_length -= chunk.length
            for term in set(terms(chunk.text)):
                postings = self._postings.get(term)
                if postings is not None:
                    postings.pop(chunk_id, None)
                    if not postings:
                        del self._postings[term]

    def _windows(self, text: str) -> dict[int, str]:
        """The windows of ``text`` by first line (those with only whitespace left out)."""
        lines = text.splitlines(keepends=True)
        last_start = max(0, len(lines) - self.chunk_lines)
        starts = list(range(0, last_start + 1, self.stride))
        if starts[-1] != last_start:
            starts.append(last_start)
        windows = {s: "".join(lines[s : s + self.chunk_lines]) for s in starts}
        return {s: chunk for s, chunk in windows.items() if chunk.strip()}

    def _add_chunk(self, path: str, start: int, text: str, code: str) -> int:
        chunk_id = self._next_id
        self._next_id += 1
        counts = Counter(terms(text))
        length = sum(counts.values())
        self._chunks[chunk_id] = _Chunk(path, start, text, length, defined_names(code), frozenset(terms(code)))
        self._total_length += length
        for term, count in counts.items():
            self._postings.setdefault(term, {})[chunk_id] = count
        return chunk_id

    def query(
        self,
        text_near_cursor: str,
        exclude_path: str | None = None,
        k: int = 4,
        max_chars: int = 4000,
        code: str | None = None,
    ) -> list[Snippet]:
        """The ``k`` best windows for ``text_near_cursor`` (not from ``exclude_path``), at most ``max_chars``
        characters together (the last one cut at a line end); best first, ties by path and line. ``code``: the
        same text, its strings and comments blanked (default: :func:`code_only` of it read alone, in
        ``exclude_path``'s language), which the relevance bar reads."""
        if code is None:
            code = code_only(text_near_cursor, exclude_path)
        scores = self._scores(text_near_cursor, code, exclude_path)
        ranked = sorted(scores, key=lambda cid: (-scores[cid], self._chunks[cid].path, self._chunks[cid].start_line))
        out: list[Snippet] = []
        room = max_chars
        for chunk_id in ranked:
            if len(out) == k or room <= 0:
                break
            chunk = self._chunks[chunk_id]
            if any(_overlaps(chunk, s, self.chunk_lines) for s in out):
                continue
            text = _cut_to_chars(chunk.text, room)
            if text.strip():
                out.append(Snippet(chunk.path, text, round(scores[chunk_id], 6), chunk.start_line))
                room -= len(text)
        return out

    def query_at(self, text: str, offset: int, exclude_path: str | None = None) -> list[Snippet]:
        """The snippets for a cursor at ``offset`` in ``text``: :meth:`query` over :func:`query_window`, its code
        read from where it begins in the file (:func:`code_only`: a window may begin inside a docstring)."""
        start, end = query_bounds(text, offset)
        return self.query(text[start:end], exclude_path=exclude_path, code=code_only(text, exclude_path, start, end))

    def _scores(self, text: str, code: str, exclude_path: str | None) -> dict[int, float]:
        """BM25 scores of the relevant windows outside ``exclude_path`` (the module docstring's bar), its
        statistics (window count, lengths, document frequencies) over those windows too: typing in the excluded
        document (the one being completed) moves no other window's score, so the snippets, and the prompt's
        context in the KV cache, stay."""
        excluded = set(self._by_path[exclude_path][1]) if exclude_path in self._by_path else set()
        n = len(self._chunks) - len(excluded)
        if n <= 0:
            return {}
        total = self._total_length - sum(self._chunks[c].length for c in excluded)
        average = max(total / n, 1.0)
        limit = COMMON_FRACTION * n if n >= COMMON_MIN_CHUNKS else n
        query_terms = set(terms(text))
        code_terms = set(terms(code))
        frequency = {t: self._frequency(t, excluded) if t in self._postings else 0 for t in query_terms | code_terms}
        usable = sorted((t for t in query_terms if 0 < frequency[t] <= limit), key=lambda t: (frequency[t], t))
        # the bar's weights: idf in at least COMMON_MIN_CHUNKS windows (a term in each of a few windows is not
        # known to be common, as the limit says too), the common ones left out
        code_terms -= self._common_in_files(code_terms, exclude_path)
        weight = {t: _idf(max(n, COMMON_MIN_CHUNKS), frequency[t]) for t in code_terms if frequency[t] <= limit}
        wanted = code_terms - defined_names(code)  # names the code uses and defines elsewhere
        scores: dict[int, float] = {}
        for term in usable[:MAX_QUERY_TERMS]:
            idf = _idf(n, frequency[term])
            for chunk_id, tf in self._postings[term].items():
                if chunk_id in excluded:
                    continue
                chunk = self._chunks[chunk_id]
                norm = tf * (K1 + 1) / (tf + K1 * (1 - B + B * chunk.length / average))
                scores[chunk_id] = scores.get(chunk_id, 0.0) + idf * norm
        bar = RELEVANT_COVERAGE * sum(weight.values())
        return {chunk_id: score for chunk_id, score in scores.items() if self._relevant(chunk_id, weight, bar, wanted)}

    def _common_in_files(self, candidates: set[str], exclude_path: str | None) -> set[str]:
        """The ``candidates`` in more than :data:`COMMON_FRACTION` of the files other than ``exclude_path``, in a
        workspace of :data:`COMMON_MIN_FILES` such files or more (none in a smaller one)."""
        own = self._file_terms.get(exclude_path, frozenset()) if exclude_path is not None else frozenset()
        files = len(self._by_path) - (exclude_path in self._by_path)
        if files < COMMON_MIN_FILES:
            return set()
        return {t for t in candidates if self._files_with[t] - (t in own) > COMMON_FRACTION * files}

    def _relevant(self, chunk_id: int, weight: dict[str, float], bar: float, wanted: set[str]) -> bool:
        """The bar (the module docstring's), on code: the window defines a name the query's code uses, or its code
        holds ``bar`` of the ``weight`` of the query code's terms (and some)."""
        chunk = self._chunks[chunk_id]
        if not chunk.defines.isdisjoint(wanted):
            return True
        held = sum(w for t, w in weight.items() if t in chunk.code_terms)
        return held > 0 and held >= bar

    def _frequency(self, term: str, excluded: set[int]) -> int:
        """The windows outside ``excluded`` that hold ``term``."""
        postings = self._postings[term]
        if len(excluded) < len(postings):
            return len(postings) - sum(1 for c in excluded if c in postings)
        return sum(1 for c in postings if c not in excluded)


def _idf(n: int, frequency: int) -> float:
    """BM25's idf of a term in ``frequency`` of ``n`` windows."""
    return math.log(1 + (n - frequency + 0.5) / (frequency + 0.5))


def _overlaps(chunk: _Chunk, snippet: Snippet, chunk_lines: int) -> bool:
    return chunk.path == snippet.path and abs(chunk.start_line - snippet.start_line) < chunk_lines


def _cut_to_chars(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    end = text.rfind("\n", 0, limit)
    return text[: end + 1] if end >= 0 else ""


def query_window(text: str, offset: int) -> str:
    """The snippet query for a cursor: up to ``QUERY_CHARS`` before the start of its block of ``QUERY_LINES``.

    Typing on a line keeps the same query, so the same snippets, so the context part of the prompt stays in
    the KV cache. The daemon and the benchmarks both rank snippets against this window."""
    start, end = query_bounds(text, offset)
    return text[start:end]


def query_bounds(text: str, offset: int) -> tuple[int, int]:
    """Where :func:`query_window` begins and ends in ``text``."""
    line = text.count("\n", 0, offset)
    anchor = _nth_line_start(text, line - line % QUERY_LINES)
    return max(0, anchor - QUERY_CHARS), anchor


def _nth_line_start(text: str, n: int) -> int:
    position = 0
    for _ in range(n):
        position = text.index("\n", position) + 1
    return position
