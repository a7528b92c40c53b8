"""decoder/gguf_convert.py: a GGUF's tensors streamed into safetensors under their transformers names."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType, GGUFWriter
from gguf.quants import dequantize, quantize
from safetensors.torch import load_file

from lookahead_lsp.decoder.weights import gguf_convert
from lookahead_lsp.decoder.weights.gguf_convert import write_weights
from tests.decoder.test_packed import random_blocks

ROWS, COLS = 48, 256


def write_gguf(path: Path) -> dict[str, tuple[str, np.ndarray]]:
    """A small qwen2-named GGUF: quantized matrices, float32 norms and a bias, and a tensor transformers has no
    name for. Returns each GGUF tensor's type and float32 values."""
    rng = np.random.default_rng(5)
    writer = GGUFWriter(str(path), "qwen2")
    tensors: dict[str, tuple[str, np.ndarray]] = {}

    def add(name: str, values: np.ndarray, type_name: str) -> None:
        qtype = GGMLQuantizationType[type_name]
        if type_name == "F32":
            writer.add_tensor(name, values)
            tensors[name] = (type_name, values)
            return
        # gguf can quantize only the simple formats; K-quants get random valid blocks
        blocks = random_blocks(type_name, *values.shape) if type_name.endswith("_K") else quantize(values, qtype)
        writer.add_tensor(name, blocks, raw_shape=blocks.shape, raw_dtype=qtype)
        tensors[name] = (type_name, dequantize(blocks, qtype).reshape(values.shape))

    add("token_embd.weight", rng.normal(size=(ROWS, COLS)).astype(np.float32), "Q8_0")
    add("blk.0.attn_q.weight", rng.normal(size=(ROWS, COLS)).astype(np.float32), "Q4_K")
    add("blk.0.ffn_down.weight", rng.normal(size=(ROWS, COLS)).astype(np.float32), "Q6_K")
    add("blk.0.attn_q.bias", rng.normal(size=ROWS).astype(np.float32), "F32")
    add("blk.0.attn_norm.weight", rng.normal(size=COLS).astype(np.float32), "F32")
    add("output_norm.weight", rng.normal(size=COLS).astype(np.float32), "F32")
    add("rope_freqs.weight", rng.normal(size=16).astype(np.float32), "F32")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return tensors


NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "blk.0.attn_q.weight": "model.layers.0.self_attn.q_proj.weight",
    "blk.0.ffn_down.weight": "model.layers.0.mlp.down_proj.weight",
    "blk.0.attn_q.bias": "model.layers.0.self_attn.q_proj.bias",
    "blk.0.attn_norm.weight": "model.layers.0.input_layernorm.weight",
    "output_norm.weight": "model.norm.weight",
}


@pytest.mark.parametrize("matrix_dtype", [torch.float32, torch.bfloat16])
def test_every_known_tensor_is_written_with_its_gguf_values(tmp_path: Path, matrix_dtype: torch.dtype) -> None:
    tensors = write_gguf(tmp_path / "m.gguf")
    seen: list[float] = []
    written = write_weights(tmp_path / "m.gguf", tmp_path / "model.safetensors", matrix_dtype, seen.append)
    state = load_file(str(tmp_path / "model.safetensors"))
    assert set(state) == set(written) == set(NAMES.values())  # rope_freqs: no transformers name, left out
    for gguf_name, name in NAMES.items():
        type_name, values = tensors[gguf_name]
        want = torch.from_numpy(values)
        if type_name == "F32":  # norms and biases stay float32, exactly
            assert state[name].dtype == torch.float32 and torch.equal(state[name], want)
        else:  # matrices: the dequantized values in the dtype asked for
            assert state[name].dtype == matrix_dtype and torch.equal(state[name], want.to(matrix_dtype))
        assert list(state[name].shape) == list(values.shape) == written[name][1]
    assert seen and seen[-1] == pytest.approx(1.0)


def test_a_matrix_written_in_many_slices_is_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_gguf(tmp_path / "m.gguf")
    write_weights(tmp_path / "m.gguf", tmp_path / "whole.safetensors")
    monkeypatch.setattr(gguf_convert, "_SLICE_BYTES", 5 * 4 * COLS)  # 5 rows at a time: a ragged last slice
    write_weights(tmp_path / "m.gguf", tmp_path / "sliced.safetensors")
    assert (tmp_path / "whole.safetensors").read_bytes() == (tmp_path / "sliced.safetensors").read_bytes()
