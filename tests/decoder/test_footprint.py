"""Where a model's tensor bytes go (decoder/runtime/footprint.py) and what the KV caches hold (decoder/kv.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from lookahead_lsp.decoder.forward import forward
from lookahead_lsp.decoder.kernels.woq_native import built_kernel
from lookahead_lsp.decoder.kv import GROWTH, MIN_CAPACITY, PrefixKV, kv_cache_bytes
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
        "mapped": 0,
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


def test_the_kv_caches_count_their_buffers_capacity_sized_to_the_entries_plus_a_quarter() -> None:
    model = make_tiny_qwen2(seed=3, dtype=torch.float32)
    before = kv_cache_bytes()
    kv = PrefixKV()
    config = model.config
    per_entry = 2 * config.num_hidden_layers * config.num_key_value_heads * 4  # keys and values, float32 ...
    per_entry *= config.hidden_size // config.num_attention_heads  # ... of one head's width, every layer
    forward(model, kv, list(range(10)))
    assert kv_cache_bytes() - before == (10 + MIN_CAPACITY) * per_entry  # the entries and the least spare room
    forward(model, kv, list(range(MIN_CAPACITY)))  # fills it exactly: no growth
    assert kv_cache_bytes() - before == (10 + MIN_CAPACITY) * per_entry
    forward(model, kv, list(range(400)))  # past it: what it must hold plus the least spare room
    held = 10 + MIN_CAPACITY + 400
    assert kv_cache_bytes() - before == (held + MIN_CAPACITY) * per_entry
    forward(model, kv, [i % 500 for i in range(2000)])  # a long prompt: plus a quarter of it
    held += 2000
    assert kv_cache_bytes() - before == (held + held // GROWTH) * per_entry
    del kv
    assert kv_cache_bytes() == before
