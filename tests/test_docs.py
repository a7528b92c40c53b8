"""The README stays a one-screen front door and docs/ a library whose run folders are all cited and all there.

Over the real files of the checkout: the README is at most :data:`README_MAX_LINES` lines; every run folder that
README.md or a docs/*.md cites (``docs/runs/<date>-<what>-<where>/``) exists, every folder in docs/runs/ is cited
and named by its date; every relative link in those documents leads to a file; and no text file of the README,
docs/ or the code names a numbered work session (the issue's ``git grep -i -E`` pattern, :data:`SESSION_NUMBER`):
a run is named by its date, what ran and where. The checks are pure functions of a directory, so each is also
run on a small tree that breaks it, to show that it can fail.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README_MAX_LINES = 200
CODE_DIRS = ("decoder", "context", "lsp_server", "evaluation", "editors", "scripts", "tests", "lookahead_lsp")
SESSION_NUMBER = re.compile(r"session [0-9]|\bs[0-9]{1,2}\b", re.IGNORECASE)
"""The issue's ``git grep -i -E 'session [0-9]|\\bs[0-9]{1,2}\\b'``: a numbered work session or a counter name."""
RUN_NAME = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}-[a-z0-9][a-z0-9.-]*$")
CITED_RUN = re.compile(r"(?<![\w/.-])(?:docs/)?runs/([0-9]{4}-[0-9]{2}-[0-9]{2}-[A-Za-z0-9._-]+)")
LINK = re.compile(r"\]\(([^)\s]+)\)")
OLD_NAME = f"bench-s{19}-memory"  # a run folder named by a session counter, as they were before 2026-11-26


def documents(root: Path) -> list[Path]:
    """README.md and the Markdown files directly under docs/: the documents a reader browses."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def cited_runs(root: Path) -> dict[str, list[str]]:
    """Each run folder name the documents cite, with the documents that cite it."""
    cited: dict[str, list[str]] = {}
    for doc in documents(root):
        for match in CITED_RUN.finditer(doc.read_text(encoding="utf-8")):
            cited.setdefault(match.group(1).rstrip("."), []).append(str(doc.relative_to(root)))
    return cited


def run_folders(root: Path) -> set[str]:
    runs = root / "docs" / "runs"
    return {path.name for path in runs.iterdir() if path.is_dir()} if runs.is_dir() else set()


def missing_runs(root: Path) -> list[str]:
    """Cited run folders that are not in docs/runs/, each with where it is cited."""
    present = run_folders(root)
    return [
        f"{name} (cited in {', '.join(sorted(set(docs)))})"
        for name, docs in sorted(cited_runs(root).items())
        if name not in present
    ]


def uncited_runs(root: Path) -> list[str]:
    """Folders in docs/runs/ that no document cites."""
    return sorted(run_folders(root) - cited_runs(root).keys())


def misnamed_runs(root: Path) -> list[str]:
    """Folders in docs/runs/ not named ``<yyyy-mm-dd>-<what>-<where>`` in lower case."""
    return sorted(name for name in run_folders(root) if not RUN_NAME.match(name) or name.count("-") < 4)


def broken_links(root: Path) -> list[str]:
    """Relative Markdown links in the documents whose target file does not exist."""
    broken = []
    for doc in documents(root):
        for match in LINK.finditer(doc.read_text(encoding="utf-8")):
            target = match.group(1).split("#", 1)[0]
            if not target or re.match(r"^[a-z]+:", target):
                continue
            if not (doc.parent / target).exists():
                broken.append(f"{doc.relative_to(root)}: {target}")
    return broken


def text_lines_matching(pattern: re.Pattern[str], files: list[Path], root: Path) -> list[str]:
    """``path:line: text`` for every line of the text files (binary ones skipped, as git grep -I) that matches."""
    found = []
    for path in files:
        data = path.read_bytes()
        if b"\0" in data:
            continue
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if pattern.search(line):
                found.append(f"{path.relative_to(root)}:{number}: {line.strip()[:160]}")
    return found


def checkout_files(root: Path, paths: list[str]) -> list[Path]:
    """The files git would show under ``paths``: tracked, or new and not ignored (no build outputs, no caches)."""
    present = [path for path in paths if (root / path).exists()]
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", *present],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout.decode("utf-8")
    return sorted({root / name for name in listed.split("\0") if name and (root / name).is_file()})


def test_readme_fits_one_screen_of_limits() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; at most {README_MAX_LINES}"


def test_docs_holds_the_library() -> None:
    for name in ("benchmarks.md", "architecture.md", "remote-engines.md", "runs"):
        assert (ROOT / "docs" / name).exists(), f"docs/{name} is missing"
    stray = [path.name for path in (ROOT / "docs").iterdir() if path.is_dir() and path.name != "runs"]
    assert stray == [], "run folders belong in docs/runs/"


def test_every_cited_run_exists_and_every_run_is_cited() -> None:
    assert run_folders(ROOT), "docs/runs/ holds no run"
    assert missing_runs(ROOT) == []
    assert uncited_runs(ROOT) == []
    assert misnamed_runs(ROOT) == []


def test_relative_links_in_the_docs_lead_to_files() -> None:
    assert broken_links(ROOT) == []


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs git and a git checkout")
def test_no_work_session_numbers_in_readme_docs_or_code() -> None:
    files = checkout_files(ROOT, ["README.md", "docs", *CODE_DIRS])
    assert any(path.suffix == ".py" for path in files) and any(path.parts[-2] == "docs" for path in files)
    assert text_lines_matching(SESSION_NUMBER, files, ROOT) == []


def test_the_pattern_is_the_issues() -> None:
    # built with f-strings so that this file's own text holds no match
    hits = [f"after session {19}", f"Session {4} (2026-11-22)", f"docs/bench-s{19}-passes/", f"s{0} = x", OLD_NAME]
    misses = ["sessions.py", "bench-sessions", "a session", "this session's", "s100", "rows1", "vs1x", "passes 12"]
    assert [text for text in hits if SESSION_NUMBER.search(text)] == hits
    assert [text for text in misses if SESSION_NUMBER.search(text)] == []


def make_docs(root: Path, readme: str, runs: list[str], benchmarks: str = "") -> Path:
    (root / "docs" / "runs").mkdir(parents=True)
    (root / "README.md").write_text(readme, encoding="utf-8")
    (root / "docs" / "benchmarks.md").write_text(benchmarks, encoding="utf-8")
    for name in runs:
        (root / "docs" / "runs" / name).mkdir()
        (root / "docs" / "runs" / name / "bench.md").write_text("# run\n", encoding="utf-8")
    return root


def test_the_checks_catch_an_uncited_a_missing_and_a_misnamed_run(tmp_path: Path) -> None:
    root = make_docs(
        tmp_path,
        "Figures: `docs/runs/2026-11-25-attrs-avx2-zen4/` and docs/runs/2026-11-26-gone-h100/.\n",
        ["2026-11-25-attrs-avx2-zen4", "2026-11-25-urllib3-avx2-zen3", OLD_NAME],
        "![plot](runs/2026-11-25-urllib3-avx2-zen3/speedup.png) [report](runs/2026-11-25-urllib3-avx2-zen3/bench.md)\n",
    )
    assert missing_runs(root) == ["2026-11-26-gone-h100 (cited in README.md)"]
    assert uncited_runs(root) == [OLD_NAME]
    assert misnamed_runs(root) == [OLD_NAME]
    assert broken_links(root) == ["docs/benchmarks.md: runs/2026-11-25-urllib3-avx2-zen3/speedup.png"]
    assert cited_runs(root)["2026-11-25-urllib3-avx2-zen3"] == ["docs/benchmarks.md", "docs/benchmarks.md"]


def test_the_session_check_reads_text_files_and_skips_binary_ones(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text(f"measured in session {18}\nnamed by date\n", encoding="utf-8")
    (tmp_path / "plot.png").write_bytes(b"\x89PNG\0 " + OLD_NAME.encode())
    found = text_lines_matching(SESSION_NUMBER, [tmp_path / "notes.md", tmp_path / "plot.png"], tmp_path)
    assert found == [f"notes.md:1: measured in session {18}"]
