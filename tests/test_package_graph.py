"""The packages form a chain, each importing only those before it: decoder <- context <- lsp_server <- evaluation.

Every import statement of every module counts (at module level, inside functions, under TYPE_CHECKING): the
decoder knows token ids only, the context knows no LSP, and the daemon never needs the benchmarks (the
command line names the evaluation commands as strings, ``lsp_server/cli.py``). Each is ``lookahead_lsp.<name>``
installed; an import of the bare old top-level name is a violation too.

Inside the packages no module imports one that imports it back, directly or around a circle (:func:`circles`), and
the decoder's rooms form a chain too: weights <- kernels <- runtime <- the decoders at the top of decoder/
(decoder/__init__.py), each module's docstring opening with the name of its room."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ORDER = ("decoder", "context", "lsp_server", "evaluation")
ROOMS = ("weights", "kernels", "runtime", "")  # decoder/'s sub-packages, lowest first; "" is decoder/ itself


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
    module.write_text(
        "import lookahead_lsp.decoder.types\n\ndef f():\n    from lookahead_lsp.evaluation.speed import run_bench\n"
    )
    assert imported_packages(module) == {("decoder", 1), ("evaluation", 4)}


def test_the_check_sees_imports_of_the_old_top_level_names(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from context.prompt import build\n")
    assert imported_packages(module) == {("<bare>.context", 1)}


# --- between modules ------------------------------------------------------------------------------------


def module_of(path: Path, root: Path = ROOT) -> str:
    """The installed name of the module at ``path`` under ``root`` (``decoder/runtime/model.py`` ->
    ``lookahead_lsp.decoder.runtime.model``; a package is its ``__init__``)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["lookahead_lsp", *parts])


def imported_modules(path: Path, modules: set[str]) -> set[str]:
    """The project modules (among ``modules``) that ``path`` imports, anywhere in the file: ``from a.b import c``
    imports the module ``a.b.c`` where there is one, else ``a.b``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in modules:
            for alias in node.names:
                child = f"{node.module}.{alias.name}"
                found.add(child if child in modules else node.module)
    return found


def module_graph(root: Path = ROOT, packages: Iterable[str] = ORDER) -> dict[str, set[str]]:
    """Each module of ``packages`` under ``root`` -> the project modules it imports."""
    paths = {module_of(path, root): path for package in packages for path in sorted((root / package).rglob("*.py"))}
    return {name: imported_modules(path, set(paths)) for name, path in paths.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph``: each strongly connected set of two or more modules (or one that imports
    itself), sorted; Tarjan's algorithm."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            members = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                members.append(member)
                if member == node:
                    break
            if len(members) > 1 or node in graph.get(node, ()):
                found.append(sorted(members))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def room_of(module: str) -> str:
    """The decoder room of a ``lookahead_lsp.decoder...`` module: one of :data:`ROOMS`."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[2] in ROOMS else ""


def room_violations(graph: dict[str, set[str]]) -> list[str]:
    """Each decoder module's imports of a room above its own."""
    out = []
    for module, imported in sorted(graph.items()):
        if not module.startswith("lookahead_lsp.decoder"):
            continue
        room = room_of(module)
        for target in sorted(imported):
            if target.startswith("lookahead_lsp.decoder") and ROOMS.index(room_of(target)) > ROOMS.index(room):
                out.append(f"{module} ({room or 'decoder'}) imports {target} ({room_of(target) or 'decoder'})")
    return out


def test_no_module_imports_one_that_imports_it_back() -> None:
    assert circles(module_graph()) == []


def test_the_decoder_rooms_import_only_the_rooms_below_them() -> None:
    assert room_violations(module_graph(packages=("decoder",))) == []


def test_each_decoder_module_opens_with_its_room() -> None:
    """The first line of each decoder module's docstring names its room, so an opened file says where it is."""
    wrong = []
    for path in sorted((ROOT / "decoder").rglob("*.py")):
        room = room_of(module_of(path)) or "decoder"
        docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        if not docstring.startswith(f"{room}: "):
            wrong.append(f"{path.relative_to(ROOT)}: {docstring.splitlines()[:1]}")
    assert wrong == []


def test_the_circle_check_finds_a_circle_through_a_function_import(tmp_path: Path) -> None:
    package = tmp_path / "decoder"
    (package / "runtime").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "runtime" / "__init__.py").write_text("")
    (package / "a.py").write_text("from lookahead_lsp.decoder.runtime import b\n")
    (package / "runtime" / "b.py").write_text("def f():\n    from lookahead_lsp.decoder.c import x\n")
    (package / "c.py").write_text("import lookahead_lsp.decoder.a\n")
    graph = module_graph(tmp_path, ("decoder",))
    assert circles(graph) == [["lookahead_lsp.decoder.a", "lookahead_lsp.decoder.c", "lookahead_lsp.decoder.runtime.b"]]
    assert room_violations(graph) == [
        "lookahead_lsp.decoder.runtime.b (runtime) imports lookahead_lsp.decoder.c (decoder)"
    ]
