"""`lookahead-lsp bench-passes` names the native kernel's level first (evaluation/pass_cost.py), so that a run on
any machine, an ARM64 one included, reports what it measured."""

from __future__ import annotations

import platform

from lookahead_lsp.decoder.kernels.woq_native import native_kernel
from lookahead_lsp.evaluation.pass_cost import kernel_line


def test_the_first_line_names_the_kernel_s_level_and_library() -> None:
    kernel = native_kernel()
    line = kernel_line()
    if kernel is None:
        assert line.startswith(f"native kernel: none on {platform.machine()}")
    else:
        assert line == f"native kernel: {kernel.isa} on {platform.machine()} ({kernel.library.name})"
        assert kernel.isa in ("scalar", "avx2", "avx2-vnni", "avx512-vnni", "neon-dotprod", "neon-i8mm")
