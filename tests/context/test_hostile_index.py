"""A hostile workspace and cache against the real daemon over stdio: one bad input never disables the index.

One daemon indexes a workspace holding a file name that is not UTF-8, a ``.gitignore`` with patterns that do
not compile, a FIFO, with bad ``exclude`` and ``include`` patterns and a cache path that is a file; a second one starts
on a cache holding an invalid snapshot (negative token ids) and temporaries left by a killed writer, and
its index must match the disk after churn during the build, a burst and a directory renamed mid-change. A
third case churns thousands of files: the live index catches up with a burst, ``shutdown`` is answered at
once during churn, and a daemon killed while it saves leaves a snapshot the next one can use.
"""

from __future__ import annotations

import os
import signal
import threading
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
        client.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": "x = 1\n"}},
        )
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
    bad = Snapshot(
        [str(root.resolve())],
        key,
        {
            str((root / "a.py").resolve()): StoredFile(
                str((root / "a.py").resolve()), info.st_size, info.st_mtime_ns, np.array([5, -7], "int32")
            )
        },
    )
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


def _burst(directory: Path, count: int, stop: threading.Event | None = None) -> int:
    """Files created, every other one renamed and every third deleted, ``count`` of them (or until ``stop``)."""
    directory.mkdir(exist_ok=True)
    made = 0
    while made < count and not (stop is not None and stop.is_set()):
        path = directory / f"b{made}.py"
        path.write_text(f"def b{made}():\n    return {made}\n")
        if made % 2:
            path = path.rename(directory / f"r{made}.py")
        if made % 3 == 0:
            path.unlink()
        made += 1
    return made


def test_churn_index_catches_up_shutdown_answers_at_once_and_a_kill_keeps_the_snapshot(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    root = tmp_path / "ws"
    (root / ".git").mkdir(parents=True)
    for i in range(200):
        (root / f"base{i}.py").write_text(f"def base{i}(x):\n    return x * {i}\n")
    env = {"LOOKAHEAD_LSP_CACHE": str(tmp_path / "cache")}
    options = {"model": str(tiny_model_dir), "maxNewTokens": 4}
    client = HostileClient(tmp_path / "first", env=env)
    try:
        assert "result" in client.initialize(root, options)
        assert client.wait_index()["ready"]
        _burst(root / "burst", 6000)
        expected = len(_on_disk(root))
        deadline = time.monotonic() + 30  # a few seconds (2.5 s measured); generous for a loaded machine
        while client.indexed_files() != expected and time.monotonic() < deadline:
            time.sleep(0.2)
        assert client.indexed_files() == expected
        stop = threading.Event()
        churner = threading.Thread(target=_burst, args=(root / "churn", 10**9, stop), daemon=True)
        churner.start()
        time.sleep(2.0)  # thousands of events under way: a burst, a rescan waiting or running
        started = time.monotonic()
        reply = client.request("shutdown", None, timeout=30)
        answered_in = time.monotonic() - started
        stop.set()
        churner.join(30)
        assert "result" in reply, reply
        assert answered_in < 1.0, answered_in
        client.notify("exit")
        assert client.process.wait(60) == 0
        assert "Traceback" not in client.stderr()
        # the next daemon uses that snapshot, is killed while saving after churn, and the one after still
        # finds a usable snapshot (the previous or the new one, never a part) and an index equal to the disk
        second = HostileClient(tmp_path / "second", env=env)
        assert "result" in second.initialize(root, options)
        assert second.wait_index()["stats"]["reused_files"] > 0
        _burst(root / "churn", 3000)
        assert "result" in second.request("shutdown", None, timeout=30)
        second.process.send_signal(signal.SIGKILL)
        second.process.wait(30)
        second.close()
        third = HostileClient(tmp_path / "third", env=env)
        assert "result" in third.initialize(root, options)
        index = third.wait_index()
        assert index["ready"] and index["stats"]["files"] == len(_on_disk(root)), index
        assert index["stats"]["reused_files"] > 0, index
        assert third.close() == 0
        assert "discarded" not in third.stderr() and "Traceback" not in third.stderr()
    finally:
        for daemon in (client, locals().get("second"), locals().get("third")):
            if daemon is not None and daemon.alive:
                daemon.process.kill()
