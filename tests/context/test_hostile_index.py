"""A hostile workspace and cache against the real daemon over stdio: one bad input never disables the index.

One daemon indexes a workspace holding a file name that is not UTF-8, a ``.gitignore`` with patterns that do
not compile, a FIFO, with bad ``exclude`` and ``include`` patterns and a cache path that is a file; a second one starts
on a cache holding an invalid snapshot (negative token ids) and temporaries left by a killed writer, and
its index must match the disk after churn during the build, a burst and a directory renamed mid-change.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

from lookahead_lsp.context.index_store import (
    Snapshot,
    StoredFile,
    encode_snapshot,
    load_snapshot,
    snapshot_path,
    tokenizer_key,
)
from lookahead_lsp.context.workspace import scan
from tests.hostile_client import HostileClient

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs need a POSIX system")


def _workspace(root: Path) -> Path:
    (root / ".git").mkdir(parents=True)
    (root / "good.py").write_text("def good(x):\n    return x + 1\n")
    (root / "kept.py").write_text("def kept():\n    return 2\n")
    (root / ".gitignore").write_text("[z-a]\n!\n*.log\n")
    (root / "noise.log").write_text("ignored\n")
    os.mkfifo(root / "pipe.py")
    with open(os.path.join(os.fsencode(root), b"bad_\xff.py"), "wb") as handle:
        handle.write(b"def bad():\n    return 3\n")
    return root


def test_bad_names_patterns_fifos_and_cache_keep_the_index(tiny_model_dir: Path, tmp_path: Path) -> None:
    root = _workspace(tmp_path / "ws")
    cache_file = tmp_path / "cache-is-a-file"
    cache_file.write_text("not a directory\n")
    client = HostileClient(tmp_path, env={"LOOKAHEAD_LSP_CACHE": str(cache_file)})
    try:
        options = {"model": str(tiny_model_dir), "maxNewTokens": 4, "exclude": ["[z-a]", "*.tmp"], "include": ["["]}
        assert "result" in client.initialize(root, options)
        index = client.wait_index()
        assert index["ready"], index
        # .gitignore, good.py, kept.py; not the FIFO, the bad name, the ignored log
        assert index["stats"]["files"] == 3, index
        assert index["stats"]["skipped"]["name_not_utf8"] == 1 and index["stats"]["skipped"]["not_regular"] == 1
        # a FIFO created while the daemon runs must not block the watcher: a later file is still indexed
        os.mkfifo(root / "late_pipe.py")
        time.sleep(0.5)
        (root / "later.py").write_text("def later():\n    return 4\n")
        deadline = time.monotonic() + 30
        while client.indexed_files() < 4 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert client.indexed_files() == 4
        # didOpen + didClose of a FIFO path: nothing blocks, later requests are answered
        uri = (root / "pipe.py").as_uri()
        client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                                "text": "x = 1\n"}})
        client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        time.sleep(1.0)
        (root / "last.py").write_text("def last():\n    return 5\n")
        deadline = time.monotonic() + 30
        while client.indexed_files() < 5 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert client.indexed_files() == 5
        pop_ups = client.pop_ups()  # the settings' two bad patterns, dropped: one message
        assert len(pop_ups) == 1 and "'[z-a]' dropped" in pop_ups[0] and "'[' dropped" in pop_ups[0], pop_ups
        started = time.monotonic()
        assert client.close() == 0
        assert time.monotonic() - started < 5
    finally:
        if client.alive:
            client.process.kill()
    log = client.stderr()
    assert log.count("pattern '[z-a]' ignored") == 1, log[-3000:]  # in .gitignore (the setting's was dropped)
    assert log.count("pattern '!' ignored") == 1, log[-3000:]
    assert log.count("not UTF-8 are skipped") == 1, log[-3000:]
    assert "kept in memory" in log
    assert "Traceback" not in log, log[-3000:]


def test_invalid_snapshot_discarded_temporaries_removed_and_churn_reconciled(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    from transformers import AutoTokenizer

    root = tmp_path / "ws"
    (root / ".git").mkdir(parents=True)
    (root / "a.py").write_text("def a():\n    return 1\n")
    cache = tmp_path / "cache"
    key = tokenizer_key(AutoTokenizer.from_pretrained(str(tiny_model_dir)))
    target = snapshot_path([root], key, cache)
    target.parent.mkdir(parents=True)
    info = (root / "a.py").stat()
    bad = Snapshot([str(root.resolve())], key, {str((root / "a.py").resolve()): StoredFile(
        str((root / "a.py").resolve()), info.st_size, info.st_mtime_ns, np.array([5, -7], "int32"))})
    target.write_bytes(encode_snapshot(bad))
    dead = target.parent / f".{target.name}.999999999.abcdefgh.tmp"  # a writer that no longer exists
    dead.write_bytes(b"x" * 1000)
    live = target.parent / f".{target.name}.{os.getpid()}.abcdefgh.tmp"  # a live writer's: kept
    live.write_bytes(b"y")
    moving = root / "moving"
    moving.mkdir()
    for i in range(40):
        (moving / f"m{i}.py").write_text(f"def m{i}():\n    return {i}\n")
    client = HostileClient(tmp_path, env={"LOOKAHEAD_LSP_CACHE": str(cache)})
    try:
        assert "result" in client.initialize(root, {"model": str(tiny_model_dir), "maxNewTokens": 4})
        _churn_during_build(root)
        index = client.wait_index()
        assert index["ready"] and index["stats"]["reused_files"] == 0, index
        _churn(root)
        expected = _on_disk(root)
        deadline = time.monotonic() + 180  # a busy CI machine: the rescan waits behind other work
        while client.indexed_files() != len(expected) and time.monotonic() < deadline:
            time.sleep(0.3)
        assert client.indexed_files() == len(expected)
        assert client.close() == 0
    finally:
        if client.alive:
            client.process.kill()
    assert not dead.exists() and live.exists()
    assert "discarded" in client.stderr()
    again = load_snapshot(target, [root], key)
    assert again is not None and all(int(f.tokens.min()) >= 0 for f in again.files.values() if f.tokens.size)
    assert set(again.files) == expected  # the snapshot at shutdown matches the disk after the churn


def _churn_during_build(root: Path) -> None:
    for i in range(100):
        (root / f"early{i}.py").write_text(f"early = {i}\n")
    (root / "a.py").unlink()


def _churn(root: Path) -> None:
    """A burst of creations and deletions, and a directory renamed while its files change."""
    churn = root / "churn"
    churn.mkdir()
    for i in range(700):
        (churn / f"c{i}.py").write_text(f"def c{i}():\n    return {i}\n")
    for i in range(0, 700, 3):
        (churn / f"c{i}.py").unlink()
    (root / "moving").rename(root / "moved")
    for i in range(0, 40, 2):
        (root / "moved" / f"m{i}.py").write_text(f"def changed{i}():\n    return -{i}\n")
    for i in range(10):
        (root / "moved" / f"new{i}.py").write_text(f"new = {i}\n")
    for i in range(100):
        (root / f"early{i}.py").rename(root / f"renamed{i}.py")


def _on_disk(root: Path) -> set[str]:
    return {str(f.path) for f in scan(root.resolve()).files}
