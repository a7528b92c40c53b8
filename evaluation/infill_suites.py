"""Public infilling suites as holes, and their scores: exact (the Qwen2.5-Coder report's rule), edit similarity,
pass@1 (the filled program run against the problem's tests), empty answers. Pure: no model, no daemon.

Suites (data vendored in ``evaluation/data/``, its README says where from):

- ``humaneval-single``, ``humaneval-multi``: OpenAI's HumanEval infilling, Python, 164 problems; the data has
  several holes per problem (one per line, or per span of lines), and the hole taken is the middle one by the
  file's order (``holes[len(holes) // 2]``).
- ``humaneval-js``, ``humaneval-java``: MultiPL-E's HumanEval translations with single-line holes, as
  Qwen2.5-Coder's ``hm_fim`` benchmark has them (154 and 137 problems), the middle hole of each likewise.

The cursor convention: the cursor sits where an editor leaves it after Enter on the line before, the hole's
line's indentation already typed. So a hole's ``prefix`` ends with that indentation (``indent``), its
``middle`` (the reference) starts after it and ends before the line's newline, and its ``suffix`` starts
with that newline. The raw model is asked at the start of the line instead (``line_start``: the data's own
boundary); an :class:`Answer` says which of the two it is inserted at.

Scores: ``exact`` for single-line suites is the report's rule (the stripped first line of the answer equals
the stripped reference; an answer that starts with a newline has its second line taken, as the report's code
does), for multi-line suites the whole text from the line start, lines right-stripped, equals the reference;
``similarity`` is :func:`evaluation.quality.edit_similarity` of the same two texts; ``passed`` runs the
program filled with the answer (single-line suites: its first line only) and the problem's tests in a
subprocess with a time limit (Python as human-eval-infilling's ``execution.py`` builds it: program, the
``test`` code, ``check(entry_point)``; JavaScript with ``node``; Java with ``java -ea`` in source-file
mode); None where the language's runtime is not installed.
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lookahead_lsp.evaluation.quality import edit_similarity

DATA = Path(__file__).resolve().parent / "data"
HUMANEVAL_FILES = {
    "humaneval-single": "HumanEval-SingleLineInfilling.jsonl.gz",
    "humaneval-multi": "HumanEval-MultiLineInfilling.jsonl.gz",
}
HM_FIM_FILES = {"humaneval-js": "humaneval-fim-js.jsonl.gz", "humaneval-java": "humaneval-fim-java.jsonl.gz"}
SUITES = (*HUMANEVAL_FILES, *HM_FIM_FILES)
LANGUAGE_OF = {"humaneval-js": "javascript", "humaneval-java": "java"}
EXTENSIONS = {"python": ".py", "javascript": ".js", "java": ".java"}
TIME_LIMIT_S = {"python": 10.0, "javascript": 10.0, "java": 60.0}  # java: a JVM compiles the file first
JAVATUPLES_IMPORT = "import org.javatuples.*;\n"  # MultiPL-E's header; no problem here uses the library


@dataclass(frozen=True)
class InfillHole:
    """One hole: the text before the cursor, the reference, the text after, and how to test a fill."""

    id: str
    suite: str
    language: str  # the LSP language id: python, javascript, java
    prefix: str  # up to the cursor, the hole's indentation typed
    middle: str  # the reference, from the cursor to the end of its (last) line
    suffix: str  # from the newline that ends the hole's (last) line
    indent: str  # the indentation typed at the end of ``prefix``
    multiline: bool
    tests: str
    entry_point: str = ""  # Python: the function ``check`` is called on
    path: str = ""  # a repository's hole (``evaluation/infill_repo.py``): its file's path in the repository

    @property
    def line_start(self) -> str:
        """The prefix without the typed indentation: the raw model's prompt ends here."""
        return self.prefix[: len(self.prefix) - len(self.indent)]

    @property
    def file_name(self) -> str:
        """A file name for the problem, with its language's extension (a repository's hole: its file's path)."""
        if self.path:
            return self.path
        return self.id.split(":", 1)[1].replace("/", "_") + EXTENSIONS[self.language]


@dataclass(frozen=True)
class Answer:
    """What one side filled a hole with: ``text`` inserted at the cursor, or at the line start."""

    text: str
    at_line_start: bool = False
    first_ms: float | None = None  # the time to the first answer (the daemon's side)
    context: tuple[str, ...] | None = None  # the daemon's side: other files whose sections its prompt held


@dataclass(frozen=True)
class HoleScore:
    hole_id: str
    exact: bool
    similarity: float
    passed: bool | None  # None: not run (no runtime for the language)
    empty: bool


# ---- loading ---------------------------------------------------------------------------------------------


def load_suite(suite: str, limit: int | None = None) -> list[InfillHole]:
    """The holes of ``suite`` (one per problem), the first ``limit`` problems only when given."""
    if suite in HUMANEVAL_FILES:
        holes = list(_humaneval_holes(suite))
    elif suite in HM_FIM_FILES:
        holes = list(_hm_fim_holes(suite))
    else:
        raise ValueError(f"unknown suite {suite!r}: one of {', '.join(SUITES)}")
    return holes[:limit] if limit is not None else holes


def _read_jsonl_gz(name: str) -> Iterator[dict[str, Any]]:
    with gzip.open(DATA / name, "rt", encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)


def middle_one(items: list[Any]) -> Any:
    """The middle item by order (the upper one of two)."""
    return items[len(items) // 2]


def _humaneval_holes(suite: str) -> Iterator[InfillHole]:
    """OpenAI's rows grouped by problem (``<kind>/HumanEval/<n>/L<a>[_L<b>]``), the middle row of each."""
    problems: dict[str, list[dict[str, Any]]] = {}
    for row in _read_jsonl_gz(HUMANEVAL_FILES[suite]):
        problems.setdefault(row["task_id"].rsplit("/", 1)[0], []).append(row)
    for rows in problems.values():
        row = middle_one(rows)
        task = row["task_id"].split("/", 1)[1]  # HumanEval/<n>/L<a>
        yield cursor_hole(
            f"{suite}:{task}",
            suite,
            "python",
            row["prompt"],
            row["canonical_solution"],
            row["suffix"],
            multiline=suite == "humaneval-multi",
            tests=row["test"],
            entry_point=row["entry_point"],
        )


def _hm_fim_holes(suite: str) -> Iterator[InfillHole]:
    """The converted ``hm_fim`` problems (``scripts/convert-hm-fim.py``), the middle hole of each.
    The parquet's prompt ends at the end of the line before the hole (the first line's: after its newline)
    and its suffix starts at the line after it."""
    for problem in _read_jsonl_gz(HM_FIM_FILES[suite]):
        hole = middle_one(problem["holes"])
        prompt = hole["prompt"] if hole["prompt"].endswith("\n") else hole["prompt"] + "\n"
        yield cursor_hole(
            f"{suite}:{problem['name']}/L{hole['line']}",
            suite,
            LANGUAGE_OF[suite],
            prompt,
            hole["middle"] + "\n",
            hole["suffix"],
            multiline=False,
            tests=problem["tests"],
        )


def cursor_hole(
    hole_id: str,
    suite: str,
    language: str,
    line_start: str,
    middle: str,
    rest: str,
    *,
    multiline: bool,
    tests: str,
    entry_point: str = "",
) -> InfillHole:
    """A hole from a prompt that ends at a line start, a middle of whole lines (newline-terminated) and the
    text after it, laid out by the cursor convention (the middle's indentation typed)."""
    indent = middle[: len(middle) - len(middle.lstrip(" \t"))]
    body = middle[len(indent) :].removesuffix("\n")
    return InfillHole(
        hole_id, suite, language, line_start + indent, body, "\n" + rest, indent, multiline, tests, entry_point
    )


# ---- scoring ---------------------------------------------------------------------------------------------


def report_first_line(text: str) -> str:
    """The report's rule for a generation's line: its first, or its second where it starts with a newline
    (``"\\n"`` or ``" \\n"``)."""
    lines = text.split("\n")
    return lines[1] if text.startswith(("\n", " \n")) else lines[0]


def from_line_start(hole: InfillHole, answer: Answer) -> str:
    """The answer's text from the start of the hole's line (single-line suites: its report line only)."""
    text = report_first_line(answer.text) if not hole.multiline else answer.text
    return text if answer.at_line_start else hole.indent + text


def _normalized(text: str) -> str:
    """Lines right-stripped, blank lines at the end dropped."""
    return "\n".join(line.rstrip() for line in text.rstrip().split("\n"))


def compared_texts(hole: InfillHole, answer: Answer) -> tuple[str, str]:
    """(answer, reference) as the scores compare them: stripped first lines, or whole normalized texts."""
    filled = from_line_start(hole, answer)
    if hole.multiline:
        return _normalized(filled), _normalized(hole.indent + hole.middle)
    return filled.strip(), hole.middle.strip()


def is_exact(hole: InfillHole, answer: Answer) -> bool:
    got, reference = compared_texts(hole, answer)
    return got == reference


def similarity(hole: InfillHole, answer: Answer) -> float:
    return edit_similarity(*compared_texts(hole, answer))


def filled_program(hole: InfillHole, answer: Answer) -> str:
    """The whole program with the hole filled and the tests appended, ready to run."""
    code = hole.line_start + from_line_start(hole, answer) + hole.suffix
    if hole.language == "python":  # human-eval-infilling's execution.py
        return f"{code}\n{hole.tests}\ncheck({hole.entry_point})\n"
    if hole.language == "javascript":
        return f"{code}\n\n{hole.tests}\n"
    return _java_program(code, hole.tests)


def _java_program(code: str, tests: str) -> str:
    """MultiPL-E's Java tests start by closing the method (a lone ``}``), then ``main`` and the class's end:
    the program's own class end goes, and so does the tests' first line (the program closes its method)."""
    body = code.replace(JAVATUPLES_IMPORT, "").rstrip()
    body = body.removesuffix("}")
    first, _, rest = tests.partition("\n")
    return body + (rest if first.strip() == "}" else tests)


def runtime_missing(language: str) -> str | None:
    """Why programs in ``language`` cannot be run here (None: they can)."""
    tool = {"python": None, "javascript": "node", "java": "java"}[language]
    return None if tool is None or shutil.which(tool) else f"no `{tool}` on PATH"


def run_program(language: str, program: str, time_limit_s: float | None = None) -> bool:
    """Whether ``program`` exits 0 within the time limit, run in a scratch directory."""
    limit = time_limit_s if time_limit_s is not None else TIME_LIMIT_S[language]
    with tempfile.TemporaryDirectory(prefix="lookahead-infill-run-") as tmp:
        name = "Problem.java" if language == "java" else f"program{EXTENSIONS[language]}"
        (Path(tmp) / name).write_text(program, encoding="utf-8")
        command = {
            "python": [sys.executable, "-I", name],
            "javascript": ["node", name],
            "java": ["java", "-ea", "-Xshare:auto", name],
        }[language]
        try:
            done = subprocess.run(command, cwd=tmp, capture_output=True, timeout=limit, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return False
    return done.returncode == 0


def passes(hole: InfillHole, answer: Answer) -> bool | None:
    """pass@1 of one answer (None: the hole has no tests, or the language's runtime is missing)."""
    if not hole.tests or runtime_missing(hole.language) is not None:
        return None
    return run_program(hole.language, filled_program(hole, answer))


def score_answer(hole: InfillHole, answer: Answer, run_tests: bool = True) -> HoleScore:
    return HoleScore(
        hole.id,
        is_exact(hole, answer),
        similarity(hole, answer),
        passes(hole, answer) if run_tests else None,
        not answer.text.strip(),
    )


def reference_answer(hole: InfillHole) -> Answer:
    """The reference itself as an answer (a check of the suite's programs and tests)."""
    return Answer(hole.middle)
