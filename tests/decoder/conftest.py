"""Fixtures of the decoder tests: the native kernel built for every instruction-set level this CPU runs."""

from __future__ import annotations

import pytest

from lookahead_lsp.decoder.kernels.isa import runnable_levels
from lookahead_lsp.decoder.kernels.woq_native import WoqKernel, build, compiler


@pytest.fixture(scope="session")
def levels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, WoqKernel]:
    """The kernel built for every instruction-set level this CPU runs (scalar at least)."""
    cxx = compiler()
    assert cxx is not None
    root = tmp_path_factory.mktemp("levels")
    return {level: WoqKernel(build(root, cxx, level)) for level in runnable_levels()}
