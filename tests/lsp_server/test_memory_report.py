"""Where the daemon's resident memory goes: the process's own figures (lsp_server/memory.py) and the breakdown the
real daemon answers to ``lookahead.memory`` over stdio (lsp_server/memory_report.py)."""

from __future__ import annotations

import mmap
import sys
from pathlib import Path

import pytest
from safetensors import safe_open

from lookahead_lsp.evaluation.lsp_client import LspClient
from lookahead_lsp.lsp_server import memory

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc (Linux)")

MB = memory.MB


def test_touched_memory_shows_in_the_resident_and_anonymous_figures() -> None:
    before = memory.resident()
    # fresh anonymous pages, resident only once written (a bytearray could reuse pages malloc already holds,
    # as it does late in a full test run)
    with mmap.mmap(-1, 64 * MB, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS) as held:
        for at in range(0, len(held), 4096):
            held[at] = 1
        after = memory.resident()
    assert after["rss"] - before["rss"] >= 60 * MB
    assert after["anonymous"] - before["anonymous"] >= 60 * MB
    assert after["peak"] >= after["rss"] and after["file"] == after["rss"] - after["anonymous"]


def test_a_mapped_file_counts_the_pages_read_under_its_path(tmp_path: Path) -> None:
    path = tmp_path / "weights.bin"
    path.write_bytes(b"\1" * (16 * MB))
    with open(path, "rb") as source, mmap.mmap(source.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        assert memory.mapped_files().get(str(path), 0) < 16 * MB
        total = sum(mapped[at] for at in range(0, len(mapped), 4096))  # every page read
        files = memory.mapped_files()
    assert total == 16 * MB // 4096
    assert files[str(path)] == 16 * MB
    assert files["libraries"] > 0  # Python's own shared objects at least
    assert str(path) not in memory.mapped_files()  # unmapped


def test_the_allocator_reports_what_it_holds() -> None:
    found = memory.allocator()
    if not found:
        pytest.skip("no mallinfo2 (glibc before 2.33)")
    assert found["in_use"] > 0 and found["free"] >= 0


def test_the_daemon_says_where_its_memory_goes(tiny_model_dir: Path, tmp_path: Path) -> None:
    """The tiny model's float matrices, embedding and head as its checkpoint holds them; a KV cache once it
    completed; the start-up marks; and parts that add up to the resident set."""
    client = LspClient(stderr_path=tmp_path / "server.log")
    try:
        client.initialize(None, {"model": str(tiny_model_dir), "maxNewTokens": 4, "prefillDtype": "same"})
        assert client.wait_model()["state"] == "ready"
        uri = (tmp_path / "a.py").as_uri()
        client.open(uri, "def add(a, b):\n    return ")
        client.inline(uri, 1, 11)
        report = client.command("lookahead.memory")
        rss = float((Path(f"/proc/{client.process.pid}/status").read_text().split("VmRSS:")[1]).split()[0]) / 1024
    finally:
        client.close()
    with safe_open(str(tiny_model_dir / "model.safetensors"), framework="pt") as checkpoint:
        sizes = {key: checkpoint.get_slice(key).get_shape() for key in checkpoint.keys()}  # noqa: SIM118
    mb = {key: 4 * (shape[0] * (shape[1] if len(shape) > 1 else 1)) / MB for key, shape in sizes.items()}
    parts = report["partsMb"]
    assert parts["embedding"] == pytest.approx(mb["model.embed_tokens.weight"], abs=0.06)
    assert parts["head"] == pytest.approx(mb["lm_head.weight"], abs=0.06)
    layer_matrices = sum(v for k, v in mb.items() if ".layers." in k and len(sizes[k]) == 2)
    assert parts["float"] == pytest.approx(layer_matrices, abs=0.06)
    assert parts["codes"] == 0 and parts["kvCache"] > 0 and parts["index"] == 0
    assert parts["runtime"] > 10 and parts["imports"] > 50  # Python and pygls; torch
    assert sum(parts.values()) == pytest.approx(report["rssMb"], abs=1.0)  # "other" is the rest
    assert report["rssMb"] == pytest.approx(rss, rel=0.1)
    assert report["peakMb"] >= report["rssMb"]


ALLOCATOR_CHILD = """
import ctypes, os, sys, tempfile, threading
from lookahead_lsp.lsp_server import memory
if sys.argv[1] == "bounded":
    assert memory.bound_allocator()
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.fopen.restype, libc.fopen.argtypes = ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_char_p]
libc.malloc_info.argtypes, libc.fclose.argtypes = [ctypes.c_int, ctypes.c_void_p], [ctypes.c_void_p]
ready, done = threading.Barrier(9), threading.Event()
def allocate():
    blocks = [libc.malloc(4096) for _ in range(64)]  # each thread's first malloc picks (or makes) its heap
    ready.wait()
    done.wait()
threads = [threading.Thread(target=allocate) for _ in range(8)]
for thread in threads:
    thread.start()
ready.wait()
path = os.path.join(tempfile.mkdtemp(), "info.xml")
stream = libc.fopen(path.encode(), b"w")
libc.malloc_info(0, stream)
libc.fclose(stream)
done.set()
print(open(path).read().count("<heap nr="))
"""


@pytest.mark.parametrize(("mode", "most"), [("bounded", 2), ("default", 9)])
def test_a_bounded_allocator_keeps_two_heaps_for_all_threads(mode: str, most: int) -> None:
    """Eight threads allocating at once: by default glibc gives them heaps of their own (up to 8 a core), bounded
    they share two."""
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run(
        [sys.executable, "-c", ALLOCATOR_CHILD, mode], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    heaps = int(out.stdout.split()[-1])
    assert (heaps <= 2) == (mode == "bounded"), f"{mode}: {heaps} heaps"
    assert heaps <= most
