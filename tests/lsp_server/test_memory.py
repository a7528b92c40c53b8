"""The daemon's per-shape kernel caches stay bounded (issue 21, item 8: memory creeping over rounds).

Each check runs in a fresh Python process (the caches read their capacity once, when first used): it runs a
oneDNN linear layer (the daemon's float path, ``decoder/cpu_linear.py``) at 150 different token counts, as a
long session's prefills and lookahead passes do, and prints how much more heap memory is in use afterwards.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from lookahead_lsp.decoder.kernels.isa import ISA_ENV, LEVELS
from lookahead_lsp.lsp_server import memory

CHILD = """
import ctypes, sys, torch
from lookahead_lsp.decoder.runtime.cpu_linear import OneDnnLinear
from lookahead_lsp.lsp_server import memory
if sys.argv[1] != "default":
    memory.bound_kernel_caches(int(sys.argv[1]))

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                        "fsmblks", "uordblks", "fordblks", "keepcost")]

mallinfo2 = ctypes.CDLL("libc.so.6").mallinfo2
mallinfo2.restype = MallInfo2
layer = torch.nn.Linear(64, 128, bias=False).requires_grad_(False)
layer.__class__ = OneDnnLinear
with torch.inference_mode():
    layer(torch.randn(1, 1, 64))
    before = mallinfo2().uordblks
    for rows in range(2, 152):
        layer(torch.randn(1, rows, 64))
    print((mallinfo2().uordblks - before) / 2**20)
"""


def heap_growth_mb(entries: str) -> float:
    # oneDNN at its own best ISA even where the suite forces our kernel's level (and with it oneDNN's): at SSE4.1
    # it keeps little per shape, and the growth this test bounds is that of its AVX2 and AVX-512 kernels
    pins = {ISA_ENV, *(key for level in LEVELS.values() for key in level.libraries)}
    env = {k: v for k, v in os.environ.items() if k not in memory.KERNEL_CACHE_VARIABLES and k not in pins}
    out = subprocess.run([sys.executable, "-c", CHILD, entries], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return float(out.stdout.split()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mallinfo2 is glibc's")
def test_bounded_kernel_caches_stop_the_growth_per_pass_length() -> None:
    unbounded = heap_growth_mb("default")
    bounded = heap_growth_mb("8")
    assert unbounded > 30, f"oneDNN's default caches should keep a kernel per length ({unbounded:.1f} MB)"
    assert bounded < 10, f"8 kernels per cache should hold a few MB at most, held {bounded:.1f} MB"


def test_a_capacity_the_user_set_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "500")
    monkeypatch.setenv("LRU_CACHE_CAPACITY", "")  # recorded, so that the value set below is undone
    monkeypatch.delenv("LRU_CACHE_CAPACITY")
    memory.bound_kernel_caches(16)
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == "500"
    assert os.environ["LRU_CACHE_CAPACITY"] == "16"


def test_serve_bounds_the_caches_before_it_serves() -> None:
    """The daemon (stdin at its end at once) has set both capacities by the time it stops."""
    env = {k: v for k, v in os.environ.items() if k not in memory.KERNEL_CACHE_VARIABLES}
    code = (
        "import os, sys\nfrom lookahead_lsp.lsp_server.cli import main\nmain(['serve'])\n"
        "print([os.environ.get(name) for name in sys.argv[1:]], file=sys.stderr)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, *memory.KERNEL_CACHE_VARIABLES],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    expected = str(memory.KERNEL_CACHE_ENTRIES)
    assert out.stderr.strip().splitlines()[-1] == str([expected, expected]), out.stderr
