"""The one stand-in allowed in tests: a tiny random-weight Qwen2 model (float64 by default: no ties).

End-to-end tests load it from a directory (:func:`save_tiny_model_dir`) with its greedy continuation forced by
construction (:func:`force_continuation`), so what it completes never depends on how one CPU's kernels round."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from lookahead_lsp.decoder.runtime.model import prepare_for_inference

# The directory model's continuation: these words over and over, on one line (each one token of Qwen's vocabulary).
CYCLE = (" alpha", " beta", " gamma", " delta")
WORD_TOKEN = re.compile("^\u0120?[A-Za-z]+$")  # a byte-level BPE token that is a word, maybe after a space (\u0120)


def make_tiny_qwen2(vocab_size: int = 512, seed: int = 0, dtype: torch.dtype = torch.float64) -> Qwen2ForCausalLM:
    """A 2-layer Qwen2 with random weights, prepared as load_model prepares models; deterministic for a seed."""
    model = random_qwen2(vocab_size, seed, dtype)
    prepare_for_inference(model, torch.device("cpu"))  # the attention and weight layout load_model gives
    return model


def random_qwen2(
    vocab_size: int, seed: int = 0, dtype: torch.dtype = torch.float64, *, tied: bool = True
) -> Qwen2ForCausalLM:
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
        tie_word_embeddings=tied,
        initializer_range=0.2,
    )
    return Qwen2ForCausalLM(config).to(dtype).eval()


def force_continuation(model: Qwen2ForCausalLM, cycle: Sequence[int], words: Sequence[int]) -> None:
    """Make the untied ``model``'s greedy choice a function of the current token alone, by a wide margin.

    The layers keep their random weights and still run (attention, cache, MLP), but their output projections
    are zero, so the residual stream at every position is exactly its token's embedding: a one-hot row (the
    ``cycle`` tokens each have their own hidden dimension, every other token the next one). After the final
    norm that row is about ``sqrt(hidden)`` = 8 in its dimension and exactly 0 elsewhere, and column ``c`` of
    the lm_head is the logit of every token after a token of dimension ``c``: 1 for the designated next token
    (``cycle[i + 1]`` after ``cycle[i]``, ``cycle[0]`` after any other token), 0 for any other word token
    (``words``, which a token-healing constraint may restrict the first choice to: the first allowed one), -1
    for every other token (line breaks, brackets, end-of-text and the other special tokens). Logits 8 apart hold
    under any rounding (float32, bfloat16 prefill, any instruction set), so greedy decoding after any prompt
    gives ``cycle`` round and round, never a stop token, until the token limit."""
    hidden = model.config.hidden_size
    if model.config.tie_word_embeddings or len(cycle) >= hidden or len(set(cycle)) != len(cycle):
        raise ValueError("force_continuation needs an untied model and fewer distinct cycle tokens than dimensions")
    other = len(cycle)  # the dimension of every token outside the cycle
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        embed = model.model.embed_tokens.weight
        embed.zero_()
        embed[:, other] = 1.0
        lm_head = model.lm_head.weight
        lm_head.fill_(-1.0)
        lm_head[list(words)] = 0.0
        for i, token in enumerate(cycle):
            embed[token, other] = 0.0
            embed[token, i] = 1.0
            lm_head[cycle[(i + 1) % len(cycle)], i] = 1.0
        lm_head[cycle[0], other] = 1.0


def save_tiny_model_dir(path: Path, tokenizer_dir: Path, seed: int = 0) -> Path:
    """A loadable model directory (config, safetensors, the real tokenizer) for end-to-end tests: the tiny
    random model with its continuation forced (:func:`force_continuation`): :data:`CYCLE` round and round."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    model = random_qwen2(len(tokenizer), seed, torch.float32, tied=False)
    cycle = [single_token(tokenizer, word) for word in CYCLE]
    pieces = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    force_continuation(model, cycle, [i for i, piece in enumerate(pieces) if piece and WORD_TOKEN.match(piece)])
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def single_token(tokenizer: Any, text: str) -> int:
    """The id of ``text``, which must be one token."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    if len(ids) != 1:
        raise ValueError(f"{text!r} is {len(ids)} tokens, not one")
    return int(ids[0])
