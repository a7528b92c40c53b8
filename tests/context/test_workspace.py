"""Workspace scanning on real directory trees: gitignore rules, skipped kinds of files, symlinks, races."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import lookahead_lsp.context.workspace as workspace
from lookahead_lsp.context.workspace import (
    DEFAULT_CONFIG,
    PathFilter,
    Skip,
    WorkspaceConfig,
    pattern_problem,
    read_source,
    scan,
)


def make_tree(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


def scanned(root: Path, config: WorkspaceConfig = DEFAULT_CONFIG) -> set[str]:
    return {f.rel for f in scan(root, config).files}


def test_gitignore_nested_negation_and_directory_patterns(tmp_path: Path) -> None:
    make_tree(
        tmp_path,
        {
            ".gitignore": "*.log\n!keep.log\nlogs/\n/top_only.py\n",
            "a.py": "",
            "x.log": "",
            "keep.log": "",
            "top_only.py": "",
            "logs/inside.py": "",
            "pkg/top_only.py": "",  # "/top_only.py" is anchored to the root
            "pkg/.gitignore": "gen_*.py\n!gen_keep.py\n/local.py\n",
            "pkg/gen_a.py": "",
            "pkg/gen_keep.py": "",
            "pkg/local.py": "",
            "pkg/sub/local.py": "",  # anchored to pkg/, not pkg/sub/
            "pkg/sub/.gitignore": "!*.log\n",  # a deeper file re-includes what the root ignored
            "pkg/sub/deep.log": "",
            "pkg/logs": "a file named logs: 'logs/' matches directories only",
        },
    )
    assert scanned(tmp_path) == {
        ".gitignore",
        "a.py",
        "keep.log",
        "pkg/top_only.py",
        "pkg/.gitignore",
        "pkg/gen_keep.py",
        "pkg/sub/local.py",
        "pkg/sub/.gitignore",
        "pkg/sub/deep.log",
        "pkg/logs",
    }
    assert scan(tmp_path).skipped[Skip.IGNORED] == 5


def test_ignored_directory_is_not_entered_so_negation_inside_cannot_reinclude(tmp_path: Path) -> None:
    make_tree(tmp_path, {".gitignore": "gen/\n!gen/keep.py\n", "gen/keep.py": "", "ok.py": ""})
    assert scanned(tmp_path) == {".gitignore", "ok.py"}


def test_skips_vcs_venvs_dependencies_and_build_output(tmp_path: Path) -> None:
    make_tree(
        tmp_path,
        {
            "src/main.py": "",
            ".git/config": "",
            ".venv/lib/x.py": "",
            "env2/pyvenv.cfg": "",
            "env2/lib/y.py": "",
            "node_modules/m/index.js": "",
            "src/__pycache__/main.cpython-311.pyc": "",
            "build/lib/z.py": "",
            "dist/z.whl": "",
            "pkg.egg-info/PKG-INFO": "",
        },
    )
    result = scan(tmp_path)
    assert {f.rel for f in result.files} == {"src/main.py"}
    assert result.skipped[Skip.VIRTUALENV] == 1
    assert result.skipped[Skip.SKIPPED_DIR] == 7


def test_include_exclude_globs_and_max_files(tmp_path: Path) -> None:
    make_tree(tmp_path, {"a.py": "", "b.js": "", "tests/c.py": "", "d.md": ""})
    config = WorkspaceConfig(include=("*.py", "*.js"), exclude=("tests/",))
    result = scan(tmp_path, config)
    assert {f.rel for f in result.files} == {"a.py", "b.js"}
    assert result.skipped[Skip.NOT_INCLUDED] == 1 and result.skipped[Skip.EXCLUDED] == 1
    assert result.dirs == [tmp_path.resolve()]  # an excluded directory is never read (nor watched)
    assert PathFilter(tmp_path, config).reason(tmp_path / "tests" / "sub", is_dir=True) == Skip.EXCLUDED
    assert PathFilter(tmp_path, config).reason(tmp_path / "tests" / "c.py") == Skip.EXCLUDED
    limited = scan(tmp_path, WorkspaceConfig(max_files=2))
    assert len(limited.files) == 2 and limited.skipped[Skip.MAX_FILES] == 1


def test_binary_not_utf8_and_oversized_files(tmp_path: Path) -> None:
    make_tree(
        tmp_path,
        {"ok.py": "x = 1\n", "nul.bin": b"abc\0def", "latin1.txt": "café".encode("latin-1"), "big.py": "x" * 2000},
    )
    config = WorkspaceConfig(max_file_bytes=1000)
    result = scan(tmp_path, config)
    assert result.skipped[Skip.TOO_LARGE] == 1
    reasons = {f.rel: read_source(f.path, config.max_file_bytes)[1] for f in result.files}
    assert reasons == {"ok.py": None, "nul.bin": Skip.BINARY, "latin1.txt": Skip.NOT_UTF8}
    assert read_source(tmp_path / "big.py", 1000) == (None, Skip.TOO_LARGE)
    assert [f.rel for f, _ in workspace.iter_sources(tmp_path, config)] == ["ok.py"]


def test_symlinks_escaping_the_root_and_loops(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    make_tree(root, {"pkg/a.py": "a"})
    make_tree(outside, {"secret.py": "s"})
    (root / "escape_file.py").symlink_to(outside / "secret.py")
    (root / "escape_dir").symlink_to(outside, target_is_directory=True)
    (root / "pkg" / "loop").symlink_to(root, target_is_directory=True)
    (root / "alias.py").symlink_to(root / "pkg" / "a.py")
    (root / "dangling.py").symlink_to(root / "missing.py")
    result = scan(root)
    assert {f.rel for f in result.files} in ({"pkg/a.py"}, {"alias.py"})
    assert result.skipped[Skip.SYMLINK_ESCAPE] == 2
    assert result.skipped[Skip.SYMLINK_LOOP] == 1
    assert result.skipped[Skip.DUPLICATE] == 1
    assert result.skipped[Skip.VANISHED] == 1


def test_self_loop_symlink_is_counted_not_fatal(tmp_path: Path) -> None:
    (tmp_path / "self").symlink_to(tmp_path / "self")
    (tmp_path / "ok.py").write_text("")
    result = scan(tmp_path)
    assert [f.rel for f in result.files] == ["ok.py"]
    assert result.skipped[Skip.SYMLINK_LOOP] == 1


def test_unicode_paths(tmp_path: Path) -> None:
    make_tree(tmp_path, {"données/модуль.py": "x = 'ü'\n", ".gitignore": "日本/\n", "日本/x.py": ""})
    result = scan(tmp_path)
    assert {f.rel for f in result.files} == {"données/модуль.py", ".gitignore"}
    file = next(f for f in result.files if f.rel.endswith(".py"))
    assert read_source(file.path, 1000) == ("x = 'ü'\n", None)


def test_file_removed_during_the_scan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_tree(tmp_path, {"a.py": "", "b.py": "", "sub/c.py": ""})
    real_scandir = os.scandir

    def scandir_then_delete(path):  # list the directory, then really delete files before they are visited
        listing = list(real_scandir(path))
        for name in ("b.py", "sub"):
            target = Path(path) / name
            if target.is_file():
                target.unlink()
            elif target.is_dir():
                (target / "c.py").unlink()
                target.rmdir()

        class Listing(list):
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

        return Listing(listing)

    monkeypatch.setattr(workspace.os, "scandir", scandir_then_delete)
    result = scan(tmp_path)
    assert [f.rel for f in result.files] == ["a.py"]
    assert result.skipped[Skip.VANISHED] == 2


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root ignores permissions")
def test_unreadable_directory_and_file(tmp_path: Path) -> None:
    make_tree(tmp_path, {"ok.py": "", "locked/x.py": "", "secret.py": "s"})
    (tmp_path / "locked").chmod(0)
    (tmp_path / "secret.py").chmod(0)
    try:
        result = scan(tmp_path)
        assert result.skipped[Skip.PERMISSION] == 1
        assert read_source(tmp_path / "secret.py", 100) == (None, Skip.PERMISSION)
    finally:
        (tmp_path / "locked").chmod(0o755)
        (tmp_path / "secret.py").chmod(0o644)


def test_path_filter_agrees_with_the_scan(tmp_path: Path) -> None:
    make_tree(
        tmp_path,
        {
            ".gitignore": "*.log\n!keep.log\nbuild_out/\n",
            "pkg/.gitignore": "gen_*.py\n",
            "a.py": "",
            "x.log": "",
            "keep.log": "",
            "build_out/y.py": "",
            "pkg/gen_1.py": "",
            "pkg/ok.py": "",
            "node_modules/z.js": "",
            "venvx/pyvenv.cfg": "",
            "venvx/q.py": "",
        },
    )
    path_filter = PathFilter(tmp_path)
    all_files = [p for p in tmp_path.rglob("*") if p.is_file()]
    accepted = {p.relative_to(tmp_path).as_posix() for p in all_files if path_filter.reason(p) is None}
    assert accepted == scanned(tmp_path)
    assert path_filter.reason(tmp_path.parent / "elsewhere.py") == Skip.SYMLINK_ESCAPE


def test_unusable_include_patterns_filter_nothing(tmp_path: Path) -> None:
    make_tree(tmp_path, {"a.py": "x = 1\n", "b.txt": "text\n", "[": "a file named [\n"})
    assert scanned(tmp_path, WorkspaceConfig(include=("[",))) == {"a.py", "b.txt", "["}
    assert scanned(tmp_path, WorkspaceConfig(include=("[", "*.py"))) == {"a.py"}
    assert scanned(tmp_path, WorkspaceConfig(include=("\\[",))) == {"["}  # an escaped bracket is a name
    assert scanned(tmp_path, WorkspaceConfig(exclude=("[", "*.txt"))) == {"a.py", "["}
    for bad in ("[", "a[b", "[z-a]", "!", "*.[ch"):
        assert pattern_problem(bad) is not None, bad
    for good in ("[ab].py", "[]]x", "[!]]x", "\\[", "# a comment [", "*.py", "build/"):
        assert pattern_problem(good) is None, good
