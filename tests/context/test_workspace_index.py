"""WorkspaceIndex with the real tokenizer: build, snapshot reuse, editor overrides, watching, listeners."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from lookahead_lsp.context.index_store import StoredFile
from lookahead_lsp.context.workspace import Skip, WorkspaceConfig
from lookahead_lsp.context.workspace_index import WorkspaceIndex, batch_tokenizer

SOURCE = "def greet(name):\n    return 'hello ' + name.upper() + '!'\n"


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOKAHEAD_LSP_CACHE", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "greet.py").write_text(SOURCE)
    (root / "pkg" / "other.py").write_text("import os\nprint(os.getcwd())\n")
    (root / "data.bin").write_bytes(b"\0" * 64)
    (root / ".gitignore").write_text("*.tmp\n")
    (root / "scratch.tmp").write_text("ignored")
    return root.resolve()


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def continuation(ws: WorkspaceIndex, tokenizer, prefix: str, max_len: int = 6) -> str:
    drafts = ws.index.lookup(tokenizer.encode(prefix), max_len, 1)
    return tokenizer.decode(list(drafts[0].tokens)) if drafts else ""


def test_build_indexes_text_files_and_reports_stats(tree: Path, tokenizer) -> None:
    ws = WorkspaceIndex.for_tokenizer([tree], tokenizer)
    seen: list[float | None] = []
    stats = ws.build(progress=lambda message, fraction: seen.append(fraction))
    assert stats.files == 3  # greet.py, other.py, .gitignore
    assert stats.tokens == sum(len(tokenizer.encode(p.read_text())) for p in tree.rglob("*.py")) + len(
        tokenizer.encode("*.tmp\n")
    )
    assert stats.skipped[Skip.BINARY] == 1 and stats.skipped[Skip.IGNORED] == 1
    assert stats.tokenized_files == 3 and stats.reused_files == 0
    assert 0 < stats.bytes_per_token <= 24 and stats.tokenize_seconds > 0
    assert seen[-1] == 1.0
    assert "upper()" in continuation(ws, tokenizer, "    return 'hello ' + name")
    assert Path(str(stats.snapshot_path)).is_file()


def test_restart_reuses_the_snapshot_and_retokenizes_only_changes(tree: Path, tokenizer) -> None:
    WorkspaceIndex.for_tokenizer([tree], tokenizer).build()
    again = WorkspaceIndex.for_tokenizer([tree], tokenizer).build()
    assert (again.reused_files, again.tokenized_files) == (3, 0)
    target = tree / "pkg" / "other.py"
    target.write_text("import sys\nprint(sys.argv)\n")
    os.utime(target, ns=(time.time_ns(), time.time_ns() + 10**9))
    ws = WorkspaceIndex.for_tokenizer([tree], tokenizer)
    third = ws.build()
    assert (third.reused_files, third.tokenized_files) == (2, 1)
    assert "argv" in continuation(ws, tokenizer, "import sys\nprint(sys")


def test_corrupt_snapshot_is_rebuilt(tree: Path, tokenizer) -> None:
    first = WorkspaceIndex.for_tokenizer([tree], tokenizer)
    first.build()
    assert first.snapshot_file is not None
    first.snapshot_file.write_bytes(b"garbage")
    stats = WorkspaceIndex.for_tokenizer([tree], tokenizer).build()
    assert (stats.reused_files, stats.tokenized_files) == (0, 3)


def test_snapshot_with_ids_outside_the_vocabulary_is_rebuilt_with_one_warning(
    tree: Path, tokenizer, caplog: pytest.LogCaptureFixture
) -> None:
    first = WorkspaceIndex.for_tokenizer([tree], tokenizer)
    first.build()
    assert first.snapshot_file is not None
    key = str(tree / "pkg" / "greet.py")
    stored = first._disk[key]
    first._disk[key] = StoredFile(key, stored.size, stored.mtime_ns, np.append(stored.tokens, np.int32(151_665)))
    first.save()
    with caplog.at_level(logging.WARNING):
        stats = WorkspaceIndex.for_tokenizer([tree], tokenizer).build()
    assert (stats.reused_files, stats.tokenized_files) == (0, 3)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        f"workspace index snapshot {first.snapshot_file} discarded (malformed file entry: token id 151665 outside "
        "the vocabulary (ids below 151665)); rebuilding"
    ]
    assert WorkspaceIndex.for_tokenizer([tree], tokenizer).build().reused_files == 3  # the rebuilt one is used


def test_open_documents_override_the_disk_until_closed(tree: Path, tokenizer) -> None:
    ws = WorkspaceIndex.for_tokenizer([tree], tokenizer)
    ws.build()
    heard: list[tuple[str, str | None]] = []
    ws.add_listener(lambda path, text: heard.append((path, text)))
    path = tree / "pkg" / "greet.py"
    edited = SOURCE.replace("name.upper()", "name.title()")
    ws.update_document(path, edited)
    assert "title()" in continuation(ws, tokenizer, "    return 'hello ' + name")
    ws.close_document(path)
    assert "upper()" in continuation(ws, tokenizer, "    return 'hello ' + name")
    assert heard == [(str(path), edited), (str(path), SOURCE)]
    unsaved = tree / "new_unsaved.py"  # an editor buffer that was never written
    ws.update_document(unsaved, "zebra_marker = 1\n")
    ws.close_document(unsaved)
    assert str(unsaved) not in ws.index.paths()


def test_a_save_of_an_open_document_is_not_tokenized(tree: Path, tokenizer) -> None:
    """The editor's text wins over the disk's, so a save (auto-save as the user pauses) costs no tokenizing."""
    batch = batch_tokenizer(tokenizer)
    tokenized: list[str] = []

    def recording(texts: list[str]) -> list[list[int]]:
        tokenized.extend(texts)
        return batch(texts)

    ws = WorkspaceIndex([tree], lambda text: batch([text])[0], tokenize_batch=recording, debounce_s=0.05)
    ws.build()
    ws.start_watching()
    try:
        opened = tree / "pkg" / "greet.py"
        ws.update_document(opened, "def greet(name):\n    return f'hi {name}'\n")
        opened.write_text("def greet(name):\n    return 'saved ' + name\n")
        later = tree / "pkg" / "later.py"  # a closed file written after it: once indexed, the save was handled
        later.write_text("value = compute_the_answer(42)\n")
        wait_until(lambda: "the_answer" in continuation(ws, tokenizer, "value = compute"))
        assert "def greet(name):\n    return 'saved ' + name\n" not in tokenized
        assert "value = compute_the_answer(42)\n" in tokenized
        assert "hi" in continuation(ws, tokenizer, "def greet(name):\n    return f'")  # the editor's text
        ws.close_document(opened)
        assert "saved" in continuation(ws, tokenizer, "def greet(name):\n    return '")  # the disk's, read again
    finally:
        ws.stop()


def test_watching_follows_creates_edits_and_deletes(tree: Path, tokenizer) -> None:
    ws = WorkspaceIndex.for_tokenizer([tree], tokenizer, WorkspaceConfig(), debounce_s=0.05)
    ws.build()
    heard: list[tuple[str, str | None]] = []
    ws.add_listener(lambda path, text: heard.append((path, text)))
    ws.start_watching()
    try:
        new = tree / "pkg" / "fresh.py"
        new.write_text("value = compute_the_answer(42)\n")
        wait_until(lambda: "the_answer" in continuation(ws, tokenizer, "value = compute"))
        ws.update_document(new, "value = compute_other(1)\n")  # the editor's text wins over disk events
        new.write_text("value = compute_from_disk(3)\n")
        time.sleep(0.3)
        assert "other" in continuation(ws, tokenizer, "value = compute")
        ws.close_document(new)
        assert "from_disk" in continuation(ws, tokenizer, "value = compute")
        new.unlink()
        wait_until(lambda: str(new) not in ws.index.paths())
        (tree / "pkg" / "greet.py").unlink()
        (tree / "pkg" / "other.py").unlink()
        (tree / "pkg").rmdir()
        wait_until(lambda: not any(p.startswith(str(tree / "pkg")) for p in ws.index.paths()))
        assert (str(new), None) in heard
    finally:
        ws.stop()
    saved = ws.save()
    assert saved is not None and saved.is_file()
