"""weights: the names of a qwen2 GGUF's tensors in transformers (``blk.3.attn_q.weight`` -> ``model.layers.3...``).

Names follow transformers' GGUF mapping for qwen2. The conversion (:mod:`decoder.weights.gguf_convert`) and the
packing (:mod:`decoder.runtime.packed_model`) both name tensors through here.
"""

from __future__ import annotations

_LAYER_NAMES = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def module_name(gguf_name: str) -> str | None:
    """The transformers module of a GGUF weight (``blk.3.attn_q.weight`` -> ``model.layers.3.self_attn.q_proj``)."""
    if gguf_name == "token_embd.weight":
        return "model.embed_tokens"
    if gguf_name == "output.weight":
        return "lm_head"
    parts = gguf_name.split(".")
    if len(parts) == 4 and parts[0] == "blk" and parts[3] == "weight" and parts[2] in _LAYER_NAMES:
        return f"model.layers.{parts[1]}.{_LAYER_NAMES[parts[2]]}"
    return None


_NORM_NAMES = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm"}


def tensor_name(gguf_name: str) -> str | None:
    """The transformers tensor of any qwen2 GGUF tensor: weights, biases and norms
    (``blk.3.attn_q.bias`` -> ``model.layers.3.self_attn.q_proj.bias``); None for one it does not know."""
    if gguf_name == "output_norm.weight":
        return "model.norm.weight"
    stem, _, kind = gguf_name.rpartition(".")
    module = module_name(f"{stem}.weight") if kind in ("weight", "bias") else None
    if module is not None:
        return f"{module}.{kind}"
    parts = gguf_name.split(".")
    if len(parts) == 4 and parts[0] == "blk" and parts[3] == "weight" and parts[2] in _NORM_NAMES:
        return f"model.layers.{parts[1]}.{_NORM_NAMES[parts[2]]}.weight"
    return None
