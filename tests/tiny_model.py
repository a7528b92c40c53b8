"""The one stand-in allowed in tests: a tiny random-weight Qwen2 model (float64 by default: no ties)."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM


def make_tiny_qwen2(vocab_size: int = 512, seed: int = 0, dtype: torch.dtype = torch.float64) -> Qwen2ForCausalLM:
    """A 2-layer Qwen2 with random weights; deterministic for a seed."""
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32768,
        tie_word_embeddings=True,
        initializer_range=0.2,
        attn_implementation="eager",
    )
    model = Qwen2ForCausalLM(config).to(dtype)
    model.eval()
    return model


def save_tiny_model_dir(path: Path, tokenizer_dir: Path, seed: int = 0) -> Path:
    """A loadable model directory (config, safetensors, the real tokenizer) for end-to-end tests."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    model = make_tiny_qwen2(vocab_size=len(tokenizer), seed=seed, dtype=torch.float32)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
