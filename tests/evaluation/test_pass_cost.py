"""`lookahead-lsp bench passes` names the native kernel's level first (evaluation/pass_cost.py), so that a run on
any machine, an ARM64 one included, reports what it measured; and its roofline line counts what a native pass
reads and computes."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest
import torch

from lookahead_lsp.decoder.kernels.woq_native import built_kernel, native_kernel
from lookahead_lsp.decoder.runtime.packed_model import pack_gguf, use_packed
from lookahead_lsp.decoder.runtime.woq_layer import WoqLinear
from lookahead_lsp.evaluation.pass_cost import Footprint, footprint, kernel_line, roofline
from tests.decoder.test_packed import write_tiny_gguf
from tests.tiny_model import make_tiny_qwen2


def test_the_first_line_names_the_kernel_s_level_and_library() -> None:
    kernel = native_kernel()
    line = kernel_line()
    if kernel is None:
        assert line.startswith(f"native kernel: none on {platform.machine()}")
    else:
        assert line == f"native kernel: {kernel.isa} on {platform.machine()} ({kernel.library.name})"
        assert kernel.isa in ("scalar", "avx2", "avx2-vnni", "avx512-vnni", "avx512-amx", "neon-dotprod", "neon-i8mm")


def test_the_footprint_counts_every_packed_weight_and_its_multiply_adds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kernel = built_kernel()
    assert kernel is not None  # the machines this project is tested on have g++
    monkeypatch.setattr("lookahead_lsp.evaluation.pass_cost.native_kernel", lambda: kernel)
    gguf = tmp_path / "tiny.gguf"
    write_tiny_gguf(make_tiny_qwen2(vocab_size=512, seed=1, dtype=torch.float32), gguf)
    assert footprint(make_tiny_qwen2(vocab_size=512, seed=1, dtype=torch.float32)) is None  # not a native pass
    model = make_tiny_qwen2(vocab_size=512, seed=1, dtype=torch.float32)
    use_packed(model, pack_gguf(gguf), kernel=kernel)
    linears = {name: m for name, m in model.named_modules() if isinstance(m, WoqLinear)}
    assert len(linears) == 7 * model.config.num_hidden_layers + 1  # every layer's seven matrices and the head
    stored = sum(m.tiles.nbytes + (0 if m.bias is None else m.bias.nbytes) for m in linears.values())
    head = linears.pop("lm_head")
    last = f"model.layers.{model.config.num_hidden_layers - 1}."
    rest = ("self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
    weights = footprint(model)
    assert weights == Footprint(
        stored,
        sum(m.out_features * m.in_features for m in linears.values()),
        head.out_features * head.in_features,
        sum(linears[last + name].out_features * linears[last + name].in_features for name in rest),
    )


def test_the_roofline_line_gives_the_rates_of_the_passes_it_was_handed() -> None:
    weights = Footprint(
        980_000_000, multiply_adds=1_300_000_000, head_multiply_adds=200_000_000, last_layer_rest=40_000_000
    )
    line = roofline(weights, one_token_ms=28.0, prefill_s=5.0, tokens=800, read_rate=40.0, chunk=256)
    assert line.startswith("a one-token pass reads 980 MB of weights: 35.0 GB/s at its best time, 0.88x")
    assert "(40.0 GB/s)" in line
    # 4 chunks: every token's layers, less the last layer past q|k|v for all but each chunk's last token, and
    # the head for each chunk's last token: (800 * 1.3 - 796 * 0.04 + 4 * 0.2) / 5
    assert line.endswith("the 800-token prefill's products 202 G int8 multiply-adds/s")
