"""The one stand-in allowed in tests: a tiny random-weight Qwen2 model (float64 by default: no ties)."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from lookahead_lsp.decoder.runtime.model import prepare_for_inference


def make_tiny_qwen2(vocab_size: int = 512, seed: int = 0, dtype: torch.dtype = torch.float64) -> Qwen2ForCausalLM:
    """A 2-layer Qwen2 with random weights, prepared as load_model prepares models; deterministic for a seed."""
    model = random_qwen2(vocab_size, seed, dtype)
    prepare_for_inference(model, torch.device("cpu"))  # the attention and weight layout load_model gives
    return model


def random_qwen2(vocab_size: int, seed: int = 0, dtype: torch.dtype = torch.float64) -> Qwen2ForCausalLM:
    """The same model as it comes from transformers (eager attention, row-major weights), in eval mode."""
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
    )
    return Qwen2ForCausalLM(config).to(dtype).eval()


def save_tiny_model_dir(path: Path, tokenizer_dir: Path, seed: int = 0) -> Path:
    """A loadable model directory (config, safetensors, the real tokenizer) for end-to-end tests."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    model = random_qwen2(len(tokenizer), seed, torch.float32)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
