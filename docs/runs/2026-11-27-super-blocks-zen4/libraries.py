"""The kernel library of a git revision beside this checkout's, for one instruction-set level: the A/B scripts of
this run compare the two in one process. argv: REV LEVEL (avx512, avx2, ...); prints both libraries' paths."""

import subprocess
import sys
from pathlib import Path

from lookahead_lsp.decoder.kernels import woq_native
from lookahead_lsp.decoder.kernels.woq_native import HEADERS, SOURCES, build, compiler


def sources_at(rev: str) -> dict[str, bytes]:
    show = ["git", "show"]
    return {name: subprocess.run([*show, f"{rev}:decoder/kernels/{name}"], capture_output=True, check=True).stdout
            for name in SOURCES + HEADERS}


rev, level = sys.argv[1], sys.argv[2]
root = Path("/tmp/lookahead-ab")
cxx = compiler() or "g++"
new = build(root / "head", cxx, level)
woq_native.kernel_sources = lambda: sources_at(rev)  # the same build, the older sources
old = build(root / rev, cxx, level)
print(old, new)
