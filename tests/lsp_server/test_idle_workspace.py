"""The daemon over stdio in a project with a virtualenv, node_modules and a gitignored build tree: it watches
only the directories its index reads, reading the project makes no events, and a new file reaches the index."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lookahead_lsp.context import inotify
from lookahead_lsp.context.workspace import scan
from lookahead_lsp.evaluation.idle_bench import inotify_watches
from lookahead_lsp.evaluation.lsp_client import LspClient

pytestmark = pytest.mark.skipif(not inotify.available(), reason="inotify is Linux's; elsewhere watchdog watches")


def make_project(root: Path) -> Path:
    for package in ("src/app", "src/app/models", "tests"):
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text(f"# {package}\n")
    (root / ".gitignore").write_text(".venv/\ngenerated/\n")
    (root / ".venv").mkdir()
    (root / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    for n in range(400):
        for parent in (".venv/lib/python3.11/site-packages", "node_modules", "generated/lib"):
            directory = root / parent / f"p{n}"
            directory.mkdir(parents=True)
            (directory / "index.py").write_text(f"value = {n}\n")
    return root


def watching(client: LspClient) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the watcher's state, the index stats) from ``lookahead.stats``."""
    index = client.command("lookahead.stats")["model"]["index"]
    return index["watching"], index["stats"]


def wait_for(client: LspClient, predicate: Any, timeout: float = 30.0) -> tuple[dict[str, Any], dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        index = client.command("lookahead.stats")["model"]["index"]
        if index["ready"] and index["watching"] is not None and predicate(index["watching"], index["stats"]):
            return index["watching"], index["stats"]
        assert time.monotonic() < deadline, f"timed out; index: {index}"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def project_server(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, LspClient]]:
    tmp = tmp_path_factory.mktemp("idle")
    root = make_project((tmp / "project").resolve())
    client = LspClient(stderr_path=tmp / "server.log")
    try:
        client.initialize(root=root, options={"model": str(tiny_model_dir), "maxNewTokens": 4})
        assert client.wait_model()["state"] == "ready"
        wait_for(client, lambda state, stats: state["rescans"] >= 1, timeout=120)  # built, watching, rescanned
        yield root, client
    finally:
        assert client.close() == 0
    assert "overflow" not in (tmp / "server.log").read_text()


def test_only_what_the_index_reads_is_watched(project_server: tuple[Path, LspClient]) -> None:
    root, client = project_server
    state, stats = watching(client)
    assert state["backend"] == "inotify" and not state["polling"]
    assert state["watches"] == len(scan(root).dirs) == inotify_watches(client.process.pid) == 5
    assert stats["files"] == len(scan(root).files) == 4  # three packages' __init__.py and the .gitignore


def test_reading_and_ignored_changes_make_no_events(project_server: tuple[Path, LspClient]) -> None:
    root, client = project_server
    before, _ = watching(client)
    for path in sorted(root.rglob("*.py")):  # as grep, a test run or the editor's own search would
        path.read_text()
    for n in range(0, 400, 40):
        for parent in (".venv/lib/python3.11/site-packages", "node_modules", "generated/lib"):
            (root / parent / f"p{n}" / "index.py").write_text("value = 'rebuilt'\n")
    time.sleep(1.0)
    after, stats = watching(client)
    assert after["events"] == before["events"] and after["rescans"] == before["rescans"]
    assert stats["files"] == 4


def test_a_new_file_reaches_the_index(project_server: tuple[Path, LspClient]) -> None:
    root, client = project_server
    (root / "src" / "app" / "models" / "user.py").write_text("class User:\n    name: str\n")
    wait_for(client, lambda state, stats: stats["files"] == 5, timeout=10)
    (root / "src" / "app" / "models" / "user.py").unlink()
    wait_for(client, lambda state, stats: stats["files"] == 4, timeout=10)
