"""The packages form a chain, each importing only those before it: decoder <- context <- lsp_server <- evaluation.

Every import statement of every module counts (at module level, inside functions, under TYPE_CHECKING): the
decoder knows token ids only, the context knows no LSP, and the daemon never needs the benchmarks (the
command line names the evaluation commands as strings, ``lsp_server/cli.py``)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ORDER = ("decoder", "context", "lsp_server", "evaluation")


def imported_packages(path: Path) -> set[tuple[str, int]]:
    """The project packages ``path`` imports, each with the line of its first import."""
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        for name in names:
            top = name.split(".")[0]
            if top in ORDER:
                found.setdefault(top, node.lineno)
    return set(found.items())


def violations() -> list[str]:
    out = []
    for rank, package in enumerate(ORDER):
        for path in sorted((ROOT / package).rglob("*.py")):
            for imported, line in sorted(imported_packages(path)):
                if ORDER.index(imported) > rank:
                    out.append(f"{path.relative_to(ROOT)}:{line} imports {imported}")
    return out


def test_packages_import_only_the_packages_before_them() -> None:
    assert violations() == []


def test_the_check_sees_imports_inside_functions(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import decoder.types\n\ndef f():\n    from evaluation.speed import run_bench\n")
    assert imported_packages(module) == {("decoder", 1), ("evaluation", 4)}
