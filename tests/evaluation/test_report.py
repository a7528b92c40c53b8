"""Plot titles name the model as its spec does, never by a machine's cache path."""

from __future__ import annotations

from pathlib import Path

from lookahead_lsp.evaluation.report import model_name


def test_model_name_leaves_out_cache_paths(tmp_path: Path) -> None:
    cached = "embedded (embedded-cache: /root/.cache/lookahead-lsp/converted-v1/1d96)"
    assert model_name({"model": cached}) == "embedded"
    assert model_name({"model": cached, "model_spec": "Qwen/Qwen2.5-Coder-1.5B"}) == "Qwen/Qwen2.5-Coder-1.5B"
    local = tmp_path / "my-model"
    local.mkdir()
    assert model_name({"model_spec": str(local)}) == "my-model"
