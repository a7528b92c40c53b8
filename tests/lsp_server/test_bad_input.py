"""Bad input against the real daemon over stdio (the tiny model): each gets a clear answer or a quiet repair.

Positions whose fields have the wrong type get -32602 naming the field; a ``null`` settings section means the
defaults; a workspace index snapshot entry outside the workspace is dropped with one log line; a daemon that
loads a model creates no file outside its cache directory; the temporary files of a killed snapshot write
are removed at the next start. The framing is the test's own (tests/hostile_client.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest

from lookahead_lsp.lsp_server.config import Config, to_settings
from tests.hostile_client import HostileClient

URI = "file:///tmp/bad-input/doc.py"
WRONG_TYPES: list[tuple[str, Any]] = [
    (field, value) for field in ("line", "character") for value in ("1", 1.5, True, False, [0], {"n": 1})
]


def _options(tiny_model_dir: Path, **more: Any) -> dict[str, Any]:
    return {"model": str(tiny_model_dir), "maxNewTokens": 4, "indexEnabled": False, **more}


@pytest.fixture(scope="module")
def daemon(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostileClient]:
    client = HostileClient(tmp_path_factory.mktemp("bad-input"))
    assert "result" in client.initialize(None, _options(tiny_model_dir))
    assert client.wait_ready()["state"] == "ready"
    text = "def add(a, b):\n    return a + b\n"
    client.notify(
        "textDocument/didOpen", {"textDocument": {"uri": URI, "languageId": "python", "version": 1, "text": text}}
    )
    yield client
    assert client.close() == 0
    assert client.garbage == [] and client.pop_ups() == []


@pytest.mark.parametrize(("field", "value"), WRONG_TYPES, ids=[f"{f}={json.dumps(v)}" for f, v in WRONG_TYPES])
def test_a_wrong_typed_position_field_is_invalid_params_naming_the_field(
    daemon: HostileClient, field: str, value: Any
) -> None:
    position = {"line": 1, "character": 4, field: value}
    params = {"textDocument": {"uri": URI}, "position": position, "context": {"triggerKind": 1}}
    reply = daemon.request("textDocument/inlineCompletion", params, timeout=10)
    assert reply["error"]["code"] == -32602, reply
    assert f"position.{field} must be an integer" in reply["error"]["message"], reply
    good = daemon.request("textDocument/inlineCompletion", {**params, "position": {"line": 1, "character": 4}})
    assert "result" in good, good  # the same request with integers is served


def test_a_null_settings_section_means_the_defaults(tiny_model_dir: Path, tmp_path: Path) -> None:
    client = HostileClient(tmp_path)  # the defaults load the default model: the warm cache's
    try:
        assert "result" in client.initialize(None, {"lookahead": _options(tiny_model_dir, enabled=False)})
        assert client.stats()["settings"]["maxNewTokens"] == 4
        client.notify("workspace/didChangeConfiguration", {"settings": {"lookahead": None}})
        assert client.stats()["settings"] == json.loads(json.dumps(to_settings(Config())))
        client.notify("workspace/didChangeConfiguration", {"settings": {"lookahead": 5}})
        client.stats()  # handled in order: the warning is out
        assert client.pop_ups() == ["lookahead: settings section 'lookahead' must be an object, got int"]
    finally:
        assert client.close() == 0
    assert "unknown setting" not in client.stderr(), client.stderr()[-2000:]


def _workspace(root: Path, files: int = 4) -> Path:
    (root / ".git").mkdir(parents=True)
    for i in range(files):
        (root / f"m{i}.py").write_text(f"def f{i}(x):\n    return x + {i}\n")
    return root


def _indexed_daemon(tmp: Path, root: Path, cache: Path, tiny_model_dir: Path) -> HostileClient:
    client = HostileClient(tmp, env={"LOOKAHEAD_LSP_CACHE": str(cache)})
    assert "result" in client.initialize(root, _options(tiny_model_dir, indexEnabled=True))
    assert client.wait_index()["ready"], client.stderr()[-2000:]
    return client


def _snapshot(cache: Path) -> Path:
    (found,) = cache.glob("workspace-index-v*/*.msgpack")
    return found


def test_a_snapshot_entry_outside_the_workspace_is_dropped_with_one_line(tiny_model_dir: Path, tmp_path: Path) -> None:
    root, cache = _workspace(tmp_path / "ws"), tmp_path / "cache"
    outside = tmp_path / "elsewhere" / "secret.py"
    outside.parent.mkdir()
    outside.write_text("password = 'hunter2'\n")
    first = _indexed_daemon(tmp_path / "first", root, cache, tiny_model_dir)
    assert first.close() == 0
    snapshot = _snapshot(cache)
    payload = msgpack.unpackb(snapshot.read_bytes(), raw=False)
    stat = outside.stat()
    for path in (str(outside), f"{root}/../elsewhere/secret.py"):
        payload["files"].append([path, stat.st_size, stat.st_mtime_ns, b"\x01\x00\x00\x00"])
    snapshot.write_bytes(msgpack.packb(payload, use_bin_type=True))

    second = _indexed_daemon(tmp_path / "second", root, cache, tiny_model_dir)
    assert second.indexed_files() == 4
    assert second.close() == 0
    lines = [line for line in second.stderr().splitlines() if "outside the workspace" in line]
    assert len(lines) == 1 and "2 entries" in lines[0], second.stderr()[-2000:]
    saved = msgpack.unpackb(_snapshot(cache).read_bytes(), raw=False)
    assert sorted(entry[0] for entry in saved["files"]) == sorted(str(p) for p in root.glob("*.py"))


CREATED = re.compile(r'^\d+ +(?:openat\(AT_FDCWD, |open\(|creat\()"([^"]+)", ([A-Z_|]+).*\) = (\d+)$')
MADE_DIR = re.compile(r'^\d+ +mkdir(?:at\(AT_FDCWD, |\()"([^"]+)".*\) = 0$')


def created_outside(strace_log: str, allowed: list[Path]) -> list[str]:
    """Files and directories the traced processes created (opened with O_CREAT, or made) outside ``allowed``
    (compiled bytecode left aside: Python's own, beside the sources)."""
    made = []
    for line in strace_log.splitlines():
        found = CREATED.match(line)
        if found and "O_CREAT" in found.group(2):
            made.append(found.group(1))
        elif (directory := MADE_DIR.match(line)) is not None:
            made.append(directory.group(1))
    places = [str(path) + os.sep for path in allowed]
    kept = [p for p in made if "__pycache__" not in p and p != "/dev/null" and not p.startswith(tuple(places))]
    return [p for p in kept if p not in map(str, allowed) and not any(str(a).startswith(p + os.sep) for a in allowed)]


def test_created_outside_reads_strace_lines() -> None:
    log = (
        '7 openat(AT_FDCWD, "/tmp/g_cb0r99", O_RDWR|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC, 0600) = 3\n'
        '7 openat(AT_FDCWD, "/cache/a.tmp", O_WRONLY|O_CREAT|O_TRUNC, 0666) = 4\n'
        '7 openat(AT_FDCWD, "/etc/hosts", O_RDONLY|O_CLOEXEC) = 5\n'
        '8 openat(AT_FDCWD, "/nope", O_RDWR|O_CREAT, 0600) = -1 EACCES (Permission denied)\n'
        '8 mkdir("/tmp/pymp-x1", 0700) = 0\n'
        '8 mkdir("/cache", 0777) = 0\n'
    )
    assert created_outside(log, [Path("/cache")]) == ["/tmp/g_cb0r99", "/tmp/pymp-x1"]


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_a_daemon_that_loads_a_model_creates_no_file_outside_its_cache(tiny_model_dir: Path, tmp_path: Path) -> None:
    cache, trace = tmp_path / "cache", tmp_path / "strace.log"
    wrapper = ["strace", "-f", "-qq", "-e", "trace=open,openat,creat,mkdir,mkdirat", "-o", str(trace)]
    client = HostileClient(tmp_path / "daemon", env={"LOOKAHEAD_LSP_CACHE": str(cache)}, wrapper=wrapper)
    assert "result" in client.initialize(None, _options(tiny_model_dir), progress=True)
    assert client.wait_ready(timeout=300)["state"] == "ready"
    text = "def add(a, b):\n    "
    client.notify(
        "textDocument/didOpen", {"textDocument": {"uri": URI, "languageId": "python", "version": 1, "text": text}}
    )
    params = {"textDocument": {"uri": URI}, "position": {"line": 1, "character": 4}, "context": {"triggerKind": 1}}
    assert "result" in client.request("textDocument/inlineCompletion", params, timeout=120)
    assert client.close(timeout=60) == 0
    assert created_outside(trace.read_text(), [cache]) == []


def test_the_leftovers_of_a_killed_snapshot_write_are_removed_at_the_next_start(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    root, cache = _workspace(tmp_path / "ws"), tmp_path / "cache"
    first = _indexed_daemon(tmp_path / "first", root, cache, tiny_model_dir)
    snapshot = _snapshot(cache)

    def temporary(pid: int, tag: str) -> Path:
        path = snapshot.parent / f".{snapshot.name}.{pid}.{tag}.tmp"  # as write_atomic names them
        path.write_bytes(b"\x00" * 4096)
        return path

    killed = temporary(first.process.pid, "k1lled_x")  # the write the kill cut short
    os.kill(first.process.pid, signal.SIGKILL)  # not reaped yet: a zombie holds the pid
    reused = temporary(os.getpid(), "reus3d_x")  # its pid now another process's, which started after it was written
    os.utime(reused, (time.time() - 10 * 86400, time.time() - 10 * 86400))
    live = temporary(os.getpid(), "l1ve_wrt")  # a live writer's: kept
    foreign = snapshot.parent / "notes.tmp"  # not our pattern: kept
    foreign.write_text("x")

    second = _indexed_daemon(tmp_path / "second", root, cache, tiny_model_dir)
    try:
        assert not killed.exists() and not reused.exists()
        assert live.exists() and foreign.exists()
        assert _snapshot(cache) == snapshot
    finally:
        assert second.close() == 0
        first.process.wait(10)
        first.close()
