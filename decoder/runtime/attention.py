"""runtime: attention for multi-token passes with a custom mask, without copying the KV cache per head.

transformers' "sdpa" attention handles grouped-query attention (GQA: several query heads share one key/value
head) in two ways on a CPU: a one-token pass folds the query heads of a group into one head ("pack_gqa"), but a
pass of several tokens with an explicit mask, which is every lookahead step, repeats each key/value head for every
query head of its group ("repeat_kv"), copying the whole cache of every layer once per pass. This module
registers ``"lookahead_sdpa"``: the same function, except that a masked multi-token pass packs the queries
instead: queries ``(b, heads, q, d)`` become ``(b, kv_heads, groups * q, d)`` (a view: head ``i`` uses key/value
head ``i // groups``), the mask is repeated ``groups`` times along the query axis (``groups * q * kv_len``
values, small), and the keys and values are used as they are. The arithmetic per query is unchanged.
Decoding passes on a CPU bring a plan instead and take :mod:`decoder.row_attention`.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

from lookahead_lsp.decoder.runtime.row_attention import KeyPlan, RowPlan, native_row_attention, row_attention

NAME = "lookahead_sdpa"


def packed_gqa_sdpa(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' sdpa attention, with packed queries for masked multi-token GQA passes; a decoding pass
    that brings a :class:`RowPlan` (``row_plan=``) gets :func:`row_attention`, one with a :class:`KeyPlan`
    the native :func:`native_row_attention`: the same arithmetic per row in every pass."""
    plan = kwargs.get("row_plan")
    if isinstance(plan, RowPlan):
        return row_attention(query, key, value, plan, scaling), None
    if isinstance(plan, KeyPlan):
        return native_row_attention(query, key, value, plan, scaling), None
    groups = int(getattr(module, "num_key_value_groups", 1))
    batch, heads, q_len, dim = query.shape
    packable = (
        groups > 1
        and q_len > 1
        and attention_mask is not None
        and attention_mask.dim() == 4
        and attention_mask.shape[1] == 1
        and key.shape[1] * groups == heads
        and kwargs.get("position_bias") is None
        and kwargs.get("cache") is None
    )
    if not packable:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout, scaling, **kwargs)
    assert attention_mask is not None
    kv_heads, kv_len = key.shape[1], key.shape[2]
    packed_query = query.reshape(batch, kv_heads, groups * q_len, dim)
    mask = attention_mask[:, :, None].expand(attention_mask.shape[0], 1, groups, q_len, kv_len)
    mask = mask.reshape(attention_mask.shape[0], 1, groups * q_len, kv_len)
    out = torch.nn.functional.scaled_dot_product_attention(
        packed_query, key, value, attn_mask=mask, dropout_p=dropout, scale=scaling
    )
    return out.reshape(batch, heads, q_len, dim).transpose(1, 2).contiguous(), None


def register() -> str:
    """Register the attention function and its mask builder (sdpa's) with transformers; return the name."""
    if NAME not in AttentionInterface._global_mapping:
        AttentionInterface.register(NAME, packed_gqa_sdpa)
        AttentionMaskInterface.register(NAME, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])
    return NAME
