"""Where a model's tensor bytes go (decoder/runtime/footprint.py) and what the KV caches hold (decoder/kv.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from lookahead_lsp.decoder.forward import forward
from lookahead_lsp.decoder.kernels.woq_native import built_kernel
from lookahead_lsp.decoder.kv import MIN_CAPACITY, PrefixKV, kv_cache_bytes
from lookahead_lsp.decoder.runtime.footprint import tensor_footprint
from lookahead_lsp.decoder.runtime.packed_linear import PackedEmbedding
from lookahead_lsp.decoder.runtime.packed_model import pack_gguf, use_packed
from lookahead_lsp.decoder.runtime.woq_layer import WoqLinear
from tests.decoder.test_packed import write_tiny_gguf
from tests.tiny_model import make_tiny_qwen2, random_qwen2


def nbytes(*tensors: torch.Tensor) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def test_a_float_model_is_its_matrices_embedding_and_head_each_counted_once() -> None:
    untied = random_qwen2(512, seed=2, dtype=torch.float32, tied=False)
    matrices = [m.weight for n, m in untied.named_modules() if isinstance(m, torch.nn.Linear) and n != "lm_head"]
    small = [p for p in untied.parameters() if p.dim() == 1]
    assert tensor_footprint(untied) == {
        "codes": 0,
        "head": nbytes(untied.lm_head.weight),
        "embedding": nbytes(untied.model.embed_tokens.weight),
        "float": nbytes(*matrices),
        "small": nbytes(*small) + nbytes(untied.model.rotary_emb.inv_freq, untied.model.rotary_emb.original_inv_freq),
    }
    tied = make_tiny_qwen2(seed=2, dtype=torch.float32)  # the head is the embedding: counted once, as the embedding
    found = tensor_footprint(tied)
    assert found["head"] == 0 and found["embedding"] == nbytes(tied.model.embed_tokens.weight)


@pytest.mark.skipif(built_kernel() is None, reason="the native kernel does not build here")
def test_a_packed_model_is_its_codes_head_and_embedding(tmp_path: Path) -> None:
    gguf = tmp_path / "tiny.gguf"
    write_tiny_gguf(make_tiny_qwen2(vocab_size=512, seed=1, dtype=torch.float32), gguf)
    model = make_tiny_qwen2(vocab_size=512, seed=1, dtype=torch.float32)
    use_packed(model, pack_gguf(gguf), kernel=built_kernel())
    layers = [m.tiles for n, m in model.named_modules() if isinstance(m, WoqLinear) and n != "lm_head"]
    assert len(layers) == 14 and isinstance(model.lm_head, WoqLinear)
    embedding = model.model.embed_tokens
    found = tensor_footprint(model)
    assert found["codes"] == nbytes(*layers) and found["head"] == nbytes(model.lm_head.tiles)
    if isinstance(embedding, PackedEmbedding):
        assert found["embedding"] == nbytes(embedding.codes, embedding.scale, embedding.offset)
    assert found["float"] == 0


def test_the_kv_caches_count_their_buffers_capacity() -> None:
    model = make_tiny_qwen2(seed=3, dtype=torch.float32)
    before = kv_cache_bytes()
    kv = PrefixKV()
    forward(model, kv, list(range(10)))
    config = model.config
    per_entry = config.num_key_value_heads * (config.hidden_size // config.num_attention_heads) * 4  # float32
    layers = config.num_hidden_layers
    assert kv_cache_bytes() - before == 2 * layers * MIN_CAPACITY * per_entry  # keys and values, every layer
    forward(model, kv, list(range(MIN_CAPACITY)))  # past the capacity: the buffers grow
    assert kv_cache_bytes() - before >= 2 * layers * (MIN_CAPACITY + 10) * per_entry
    del kv
    assert kv_cache_bytes() == before
