"""The llama.cpp peer at our kernel's instruction-set level (evaluation/peer_isa.py): the backend each level
maps to, and a real server started under a forced level that loads that backend and no other."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lookahead_lsp.decoder.kernels.isa import ISA_ENV, LEVELS, runnable_levels
from lookahead_lsp.evaluation.peer_isa import GGML_BACKENDS, backend_for, engine_backend, loaded_backend


def test_every_level_maps_to_a_ggml_backend() -> None:
    assert set(GGML_BACKENDS) == set(LEVELS)
    assert backend_for("avx2", {"haswell", "zen4", "x64"}) == "haswell"
    assert backend_for("avx512", {"cascadelake", "haswell"}) == "cascadelake"  # the next preferred one
    assert backend_for("avx512", {"haswell"}) is None  # nothing at that level: no pinning


def test_the_loaded_backend_is_read_from_ggml_s_message() -> None:
    log = "load_backend: loaded CPU backend from /x/usr/bin/libggml-cpu-haswell.so\nAvailable devices:"
    assert loaded_backend(log) == "haswell"
    assert loaded_backend("nothing here") is None


def _cpu_backends(pid: int) -> set[str]:
    """The ggml CPU backend libraries mapped into a running process."""
    maps = Path(f"/proc/{pid}/maps").read_text()
    return set(re.findall(r"libggml-cpu-([\w-]+)\.so", maps))


@pytest.mark.parametrize("level", ["scalar", "avx2"])
def test_a_server_under_a_forced_level_loads_only_that_level_s_backend(
    level: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lookahead_lsp.evaluation.remote_bench import LLAMA_SERVER, LlamaServer, embedded_gguf, engine_unavailable

    reason = engine_unavailable()
    if reason is not None:
        print(f"SKIP pinned llama-server: {reason}")
        pytest.skip(reason)
    if level not in runnable_levels():
        pytest.skip(f"this CPU does not run {level}")
    monkeypatch.setenv(ISA_ENV, level)
    want = GGML_BACKENDS[level][0]
    assert engine_backend(LLAMA_SERVER) == f"{want} (pinned)"
    with LlamaServer(embedded_gguf(), tmp_path / "server.log", threads=1) as server:
        assert server.process is not None
        assert _cpu_backends(server.process.pid) == {want}, server.log_tail()
    monkeypatch.delenv(ISA_ENV)
    assert "(pinned)" not in engine_backend(LLAMA_SERVER)
