"""Workloads: deterministic for a seed, holes where they claim to be, and each workload's property holds."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from lookahead_lsp.evaluation.workloads import (
    MIN_REPO_SIMILARITY,
    WORKLOADS,
    Corpus,
    Hole,
    make_holes,
    ngrams,
    overlaps_workspace,
)

HOLES = 8


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return Corpus.load()  # the default: the installed pathspec package


@pytest.fixture(scope="module")
def holes(corpus: Corpus) -> dict[str, list[Hole]]:
    return {w: make_holes(corpus, w, HOLES, seed=3) for w in WORKLOADS}


def test_default_corpus_is_a_named_installed_package(corpus: Corpus) -> None:
    assert corpus.name.startswith("pathspec ")
    assert all(not f.path.startswith("/") for f in corpus.files)


def test_a_source_tree_named_like_an_installed_package_is_not_named_by_its_version(
    corpus: Corpus, tmp_path: Path
) -> None:
    """An unpacked sdist's ``pathspec/`` may hold another version than the installed one: named by its folder."""
    copy = tmp_path / "pathspec"
    copy.mkdir()
    (copy / "__init__.py").write_text("__version__ = '0.0.1'\n")
    assert Corpus.load(copy).name == "pathspec" != corpus.name


@pytest.mark.parametrize("workload", WORKLOADS)
def test_same_seed_same_holes_other_seed_other_holes(corpus: Corpus, workload: str, holes) -> None:
    assert make_holes(corpus, workload, HOLES, seed=3) == holes[workload]
    assert make_holes(corpus, workload, HOLES, seed=4) != holes[workload]


@pytest.mark.parametrize("workload", WORKLOADS)
def test_holes_cut_the_file_where_they_claim(corpus: Corpus, workload: str, holes) -> None:
    assert len(holes[workload]) == HOLES
    for hole in holes[workload]:
        text = corpus.file(hole.path).text
        assert hole.file_text == text
        assert hole.middle.strip()
        lines = text.split("\n")
        assert lines[hole.line][: hole.column] == hole.prefix.rsplit("\n", 1)[-1]
        assert hole.workload == workload


def test_statement_holes_start_after_indentation_and_end_at_a_line_end(holes) -> None:
    for hole in holes["fim"] + holes["none"] + holes["repo"]:
        assert not hole.prefix.rsplit("\n", 1)[-1].strip(), hole.id  # only indentation before the cursor
        assert hole.suffix.startswith("\n") or not hole.suffix, hole.id
        assert hole.middle == hole.middle.strip(), hole.id


def test_fim_has_single_and_multi_line_holes_of_whole_statements(holes) -> None:
    kinds = {h.kind for h in holes["fim"]}
    assert kinds == {"single-line", "multi-line"}
    for hole in holes["fim"]:
        assert ("\n" in hole.middle) == (hole.kind == "multi-line")
        if hole.path.endswith(".py"):
            indent = hole.prefix.rsplit("\n", 1)[-1]
            # re-indented to the left margin, the hole is valid Python on its own (whole statements)
            dedented = "\n".join(line.removeprefix(indent) for line in hole.middle.split("\n"))
            ast.parse(dedented)


def test_none_holes_share_no_4gram_with_their_workspace(corpus: Corpus, holes) -> None:
    for hole in holes["none"]:
        assert ngrams(hole.middle)
        assert not overlaps_workspace(hole, corpus)


def test_repo_holes_resemble_other_code_of_the_workspace(corpus: Corpus, holes) -> None:
    for hole in holes["repo"]:
        assert hole.kind == "function-body" and hole.similar_to and hole.similarity >= MIN_REPO_SIMILARITY
        grams = set(ngrams(hole.middle))
        others = set().union(*(set(ngrams(t)) for t in corpus.workspace(hole).values()))
        assert len(grams & others) >= MIN_REPO_SIMILARITY * len(grams), hole.id


def test_repo_twin_lies_outside_the_hole(corpus: Corpus, holes) -> None:
    for hole in holes["repo"]:
        assert hole.similar_to is not None
        path, _, rest = hole.similar_to.rpartition(":")
        line = int(rest.rsplit("@", 1)[1])
        if path == hole.path:
            assert not hole.line < line <= hole.line + hole.middle.count("\n") + 1


def test_midline_holes_split_between_and_inside_tokens(holes) -> None:
    kinds = [h.kind for h in holes["midline"]]
    assert kinds.count("between-tokens") == kinds.count("inside-token") == HOLES // 2
    for hole in holes["midline"]:
        assert "\n" not in hole.middle
        assert hole.prefix.rsplit("\n", 1)[-1].strip()  # code before the cursor on its line
        before, after = hole.prefix[-1], hole.middle[0]
        inside = (before.isalnum() or before == "_") and (after.isalnum() or after == "_")
        assert inside == (hole.kind == "inside-token")


def test_workspace_has_the_holes_file_without_the_middle(corpus: Corpus, holes) -> None:
    hole = holes["repo"][0]
    workspace = corpus.workspace(hole)
    assert workspace[hole.path] == hole.prefix + hole.suffix
    assert set(workspace) == {f.path for f in corpus.files}


def test_any_directory_works_and_non_python_files_are_cut_by_lines(tmp_path: Path) -> None:
    (tmp_path / "a.js").write_text("function f(x) {\n  const y = x + 1;\n  return y * 2;\n}\n" * 3)
    (tmp_path / "b.py").write_text("def g(a):\n    b = a + 1\n    return b\n")
    corpus = Corpus.load(tmp_path)
    assert corpus.name == tmp_path.name
    holes = make_holes(corpus, "fim", 6, seed=0)
    assert {h.path for h in holes} <= {"a.js", "b.py"}
    assert all(h.file_text == corpus.file(h.path).text for h in holes)


def test_unknown_workload_is_an_error(corpus: Corpus) -> None:
    with pytest.raises(ValueError, match="unknown workload"):
        make_holes(corpus, "bogus", 1)


def test_a_cross_file_hole_is_never_cut_at_a_parameter_spelled_like_an_import(tmp_path: Path) -> None:
    """core.py imports ``prompt`` from termui.py; ``ask`` calls it, ``validate`` has a parameter ``prompt``:
    only ``ask``'s line is a use of the other module's name."""
    (tmp_path / "termui.py").write_text("def prompt(text: str) -> str:\n    return input(text)\n")
    (tmp_path / "core.py").write_text(
        "from .termui import prompt\n\n\n"
        "def ask(name: str) -> str:\n    return prompt(name)\n\n\n"
        "def validate(deprecated: bool, prompt: bool) -> None:\n"
        "    if deprecated and prompt:\n        raise ValueError\n"
    )
    holes = make_holes(Corpus.load(tmp_path), "xfile", 10, seed=0)
    lines = {h.prefix.rsplit("\n", 1)[-1] + h.middle for h in holes}
    assert lines == {"    return prompt(name)"}  # neither validate's header nor its ``if``
