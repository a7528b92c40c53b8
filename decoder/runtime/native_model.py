"""runtime: a Qwen2 model's module tree for the native pass alone, built without transformers' modeling code.

The native pass (:mod:`decoder.runtime.native_pass`) reads a model's config, its embedding, rotary table, norms
and matrices; it never calls the model's own forward. Building transformers' ``Qwen2ForCausalLM`` only to hold
those modules imports transformers' modeling and masking code, which pulls in ``torch._dynamo``, sympy and
``torch.distributed``: about 85 MB resident in a daemon that never runs them. :class:`NativeQwen2` is the
same tree under the same names (so the packed state, :func:`decoder.runtime.packed_model.use_packed` and
:func:`fill_from_checkpoint` address it alike), holding only what the native pass reads.

Its forward raises: a model that the native pass cannot serve is built as transformers' instead
(:func:`light_config`, and the loader's check that every matrix landed on the native kernel).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from lookahead_lsp.decoder.runtime.native_pass import head_dim, native_config


def light_config(config: Any) -> bool:
    """Whether :class:`NativeQwen2` can stand for transformers' model of ``config``: one the native pass computes
    (:func:`native_config`), with the default rotary embedding and heads the native attention takes (a multiple
    of 16 wide, as :func:`decoder.forward.native_attention` asks)."""
    rope = getattr(config, "rope_parameters", None) or {}
    return (
        native_config(config)
        and rope.get("rope_type", "default") == "default"
        and "rope_theta" in rope
        and head_dim(config) % 16 == 0
    )


class Rotary(nn.Module):
    """The default rotary embedding: cos and sin of each position times each frequency, as transformers'
    ``Qwen2RotaryEmbedding`` computes them (the same operations in the same order)."""

    def __init__(self, theta: float, width: int) -> None:
        super().__init__()
        exponents = torch.arange(0, width, 2, dtype=torch.int64, device="cpu").float() / width
        self.inv_freq = nn.Buffer(1.0 / (theta**exponents), persistent=False)

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = position_ids[..., None].float() * self.inv_freq.to(device=x.device, dtype=torch.float)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class Norm(nn.Module):
    """An RMS norm's weight (the native kernel applies it)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(width), requires_grad=False)


class Linear(nn.Linear):
    """A linear layer on the meta device, left uninitialized (the packed state replaces it)."""

    def reset_parameters(self) -> None:  # a random init of a meta tensor imports torch._dynamo
        pass


class Embedding(nn.Embedding):
    """An embedding on the meta device, left uninitialized (the packed state replaces it)."""

    def reset_parameters(self) -> None:
        pass


def _holder(**children: nn.Module) -> nn.Module:
    """A module that only names its children (transformers' attention, MLP and decoder-layer containers)."""
    holder = nn.Module()
    for name, child in children.items():
        holder.add_module(name, child)
    return holder


def _layer(hidden: int, inner: int, q_width: int, kv_width: int) -> nn.Module:
    attention = _holder(
        q_proj=Linear(hidden, q_width),
        k_proj=Linear(hidden, kv_width),
        v_proj=Linear(hidden, kv_width),
        o_proj=Linear(q_width, hidden, bias=False),
    )
    mlp = _holder(
        gate_proj=Linear(hidden, inner, bias=False),
        up_proj=Linear(hidden, inner, bias=False),
        down_proj=Linear(inner, hidden, bias=False),
    )
    return _holder(self_attn=attention, mlp=mlp, input_layernorm=Norm(hidden), post_attention_layernorm=Norm(hidden))


class NativeQwen2(nn.Module):
    """transformers' Qwen2ForCausalLM module tree (``model.embed_tokens``, ``model.layers[i].self_attn.q_proj``,
    ..., ``model.norm``, ``model.rotary_emb``, ``lm_head``) for the native pass. Built on the meta device, its
    matrices and embedding are then replaced by packed modules and its norms and biases filled from the
    checkpoint; the rotary table is computed at once."""

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.config = config
        hidden, width = int(config.hidden_size), head_dim(config)
        q_width, kv_width = int(config.num_attention_heads) * width, int(config.num_key_value_heads) * width
        with torch.device("meta"):
            layers = [
                _layer(hidden, int(config.intermediate_size), q_width, kv_width)
                for _ in range(int(config.num_hidden_layers))
            ]
            self.model = _holder(
                embed_tokens=Embedding(int(config.vocab_size), hidden),
                layers=nn.ModuleList(layers),
                norm=Norm(hidden),
            )
            self.lm_head = Linear(hidden, int(config.vocab_size), bias=False)
        self.model.add_module("rotary_emb", Rotary(float(config.rope_parameters["rope_theta"]), width))

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("this model runs on the native pass only (decoder.runtime.native_pass)")
