"""The packages form a chain, each importing only those before it: decoder <- context <- lsp_server <- evaluation.

Every import statement of every module counts (at module level, inside functions, under TYPE_CHECKING): the
decoder knows token ids only, the context knows no LSP, and the daemon never needs the benchmarks (the
command line names the evaluation commands as strings, ``lsp_server/cli.py``). Each is ``lookahead_lsp.<name>``
installed; an import of the bare old top-level name is a violation too."""

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
            parts = name.split(".")
            top = parts[1] if parts[0] == "lookahead_lsp" and len(parts) > 1 else "<bare>." + parts[0]
            if top in ORDER or top.removeprefix("<bare>.") in ORDER:
                found.setdefault(top, node.lineno)
    return set(found.items())


def violations() -> list[str]:
    out = []
    for rank, package in enumerate(ORDER):
        for path in sorted((ROOT / package).rglob("*.py")):
            for imported, line in sorted(imported_packages(path)):
                if imported not in ORDER:
                    out.append(f"{path.relative_to(ROOT)}:{line} imports {imported} outside lookahead_lsp")
                elif ORDER.index(imported) > rank:
                    out.append(f"{path.relative_to(ROOT)}:{line} imports {imported}")
    return out


def test_packages_import_only_the_packages_before_them() -> None:
    assert violations() == []


def test_the_check_sees_imports_inside_functions(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import lookahead_lsp.decoder.types\n\ndef f():\n"
                      "    from lookahead_lsp.evaluation.speed import run_bench\n")
    assert imported_packages(module) == {("decoder", 1), ("evaluation", 4)}


def test_the_check_sees_imports_of_the_old_top_level_names(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from context.prompt import build\n")
    assert imported_packages(module) == {("<bare>.context", 1)}
