"""A whole, loadable GGUF of the tiny random Qwen2 (tests/tiny_model.py): every matrix Q8_0, as ggml-org's base
model files, norms and biases float32, and the embedded model's own tokenizer and metadata (copied from its GGUF),
so that transformers reads its config and tokenizer and the daemon serves it as any ``.gguf`` file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter
from gguf.quants import quantize

from lookahead_lsp.decoder.weights.gguf_names import tensor_name
from tests.tiny_model import random_qwen2

_LAYER_TENSORS = (
    "attn_norm.weight",
    "attn_q.weight",
    "attn_q.bias",
    "attn_k.weight",
    "attn_k.bias",
    "attn_v.weight",
    "attn_v.bias",
    "attn_output.weight",
    "ffn_norm.weight",
    "ffn_gate.weight",
    "ffn_up.weight",
    "ffn_down.weight",
)


def gguf_names(layers: int) -> list[str]:
    """Every tensor of a tied qwen2 GGUF of ``layers`` layers, by llama.cpp's names."""
    blocks = [f"blk.{layer}.{name}" for layer in range(layers) for name in _LAYER_TENSORS]
    return ["token_embd.weight", *blocks, "output_norm.weight"]


def _copy_metadata(source: GGUFReader, writer: GGUFWriter) -> None:
    """The source's key-values but its architecture's shape, its file type and what the writer writes itself."""
    for field in source.fields.values():
        name = field.name
        if name.startswith(("GGUF.", "qwen2.")) or name in ("general.architecture", "general.file_type"):
            continue
        kind = field.types[0]
        sub = field.types[-1] if kind == GGUFValueType.ARRAY else None
        writer.add_key_value(name, field.contents(), kind, sub_type=sub)


def write_tiny_base_gguf(path: Path, source_gguf: Path, seed: int = 0) -> torch.nn.Module:
    """Write the tiny random Qwen2 (tied, the source's vocabulary) to ``path`` with ``source_gguf``'s tokenizer;
    returns the float32 model it quantized."""
    source = GGUFReader(str(source_gguf))
    vocab = int(source.fields["tokenizer.ggml.tokens"].data.__len__())
    model = random_qwen2(vocab, seed, torch.float32, tied=True)
    config = model.config
    writer = GGUFWriter(str(path), "qwen2")
    _copy_metadata(source, writer)
    writer.add_file_type(7)  # LLAMA_FTYPE_MOSTLY_Q8_0
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_freq_base(float(config.rope_parameters["rope_theta"]))
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    state = {name: value.detach().float().numpy() for name, value in model.state_dict().items()}
    for name in gguf_names(config.num_hidden_layers):
        values = state[str(tensor_name(name))]
        if values.ndim == 1:
            writer.add_tensor(name, values.astype(np.float32))
            continue
        blocks = quantize(values, GGMLQuantizationType.Q8_0)
        writer.add_tensor(name, blocks, raw_shape=blocks.shape, raw_dtype=GGMLQuantizationType.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return model
