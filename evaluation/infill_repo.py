"""``eval infill --suite repo`` and ``--suite xfile``: single-line holes cut from a real repository, for the
daemon as the editor shows it beside the raw model, as the public suites are (``evaluation/infill_suites.py``).

``repo``: two kinds, half each (``evaluation/workloads.py`` cuts them): ``line``, a whole single-line statement
at an empty line with its indentation typed (the cursor after Enter), and ``midline``, the rest of a single-line
statement from a column inside it. ``xfile``: lines that use a name the file imports from another of the
repository's modules, each cut just before that name (the workload ``xfile``'s ``before-name`` holes): what
the prompt's definitions of imported names are for. A repository has no tests to run, so pass@1 is not scored;
exact is the stripped first line against the stripped rest of the line. The daemon's workspace is a copy of
the repository (:func:`copy_workspace`), so its index, symbol table and relevance bar see the project as a
user's daemon does; each hole's file is put back after its hole (``evaluation/infill.py``'s
:func:`ask_daemon`)."""

from __future__ import annotations

import random
from pathlib import Path

from lookahead_lsp.context.languages import detect_language
from lookahead_lsp.evaluation.infill_suites import InfillHole
from lookahead_lsp.evaluation.workloads import Corpus, Hole, make_holes, midline_holes, statement_spans

SUITE = "repo"
XFILE_SUITE = "xfile"


def repo_holes(corpus: Corpus, count: int, seed: int = 0) -> list[InfillHole]:
    """``count`` holes of ``corpus``: the first half whole lines at their typed indentation, the rest cut
    mid-line (fewer where the corpus has fewer single-line statements)."""
    rng = random.Random(seed)
    lines = [span for span in statement_spans(corpus) if span.kind == "single-line"]
    chosen = [span.cut(corpus, "line") for span in rng.sample(lines, min((count + 1) // 2, len(lines)))]
    chosen += midline_holes(corpus, count - len(chosen), rng)
    return [infill_hole(hole) for hole in chosen]


def xfile_holes(corpus: Corpus, count: int, seed: int = 0) -> list[InfillHole]:
    """``count`` lines of ``corpus`` that use a name imported from another of its files, each cut just before
    that name (fewer where the corpus has fewer): the ``xfile`` workload's ``before-name`` holes for ``seed``
    (its other half, whole lines, left out), so a larger count keeps a smaller one's holes."""
    holes = make_holes(corpus, "xfile", 2 * count, seed)
    return [infill_hole(hole, XFILE_SUITE) for hole in holes if hole.kind == "before-name"]


CORPUS_SUITES = {SUITE: repo_holes, XFILE_SUITE: xfile_holes}
"""The suites cut from ``--corpus``, each with what cuts its holes."""


def infill_hole(hole: Hole, suite: str = SUITE) -> InfillHole:
    """A workload's single-line hole as an infilling hole: the indentation typed where the prefix's last line
    holds nothing else, the rest of the line the reference."""
    last_line = hole.prefix[hole.prefix.rfind("\n") + 1 :]
    indent = last_line if not last_line.strip() else ""
    return InfillHole(
        id=f"{suite}:{hole.workload}:{hole.path}@{len(hole.prefix)}",
        suite=suite,
        language=detect_language(path=hole.path).name,
        prefix=hole.prefix,
        middle=hole.middle,
        suffix=hole.suffix,
        indent=indent,
        multiline=False,
        tests="",
        path=hole.path,
    )


def copy_workspace(corpus: Corpus, destination: Path) -> Path:
    """A copy of ``corpus``'s code files under ``destination`` (the daemon's workspace): the holes' files are
    rewritten there, never in the corpus."""
    for source in corpus.files:
        target = destination / source.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(source.text, encoding="utf-8")
    return destination
