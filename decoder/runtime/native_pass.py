"""runtime: a decoding pass of a Qwen2 model on the native kernels, the layer loop written out.

Through transformers' module tree a one-token pass of the 0.5B model spends about 10 ms in Python on a
2-core CPU (module calls, hooks, masks, rotary and norm ops, seven matrix calls a layer): a quarter of the
pass at 1000 cached tokens. Here a layer is one native call (decoder/kernels/pass_kernel.cpp) after the cache
makes room for the pass's entries:

    q|k|v (one product: the input prepared once) -> rotary in place -> k, v into the cache -> row attention
    -> o -> residual + norm -> gate|up (one product) -> SwiGLU -> down -> residual + the next layer's norm

(Called step by step from Python, the same steps cost about 3 ms more a pass of the 1.5B model: 10% of a
one-token pass.)

Every step computes each row of the pass on its own in one fixed sequence of operations (the matrix kernel,
decoder/row_kernel.cpp, decoder/layer_kernel.cpp), so a lookahead row equals a one-token greedy pass bit for
bit. A prefill chunk on the model's own weights runs here too (its rows then equal decoding rows bit for bit);
a prefill twin in a cheaper precision (bfloat16 on a CPU with a bfloat16 matrix unit) keeps transformers' path.
A chunk reads only its last row's logits, so its last layer stops the other rows once their keys and values
are in the cache (their attention, o, and MLP skipped: a layer of the model's 24 or 28 for all rows but one).

The cache holds keys and values in float16 (:data:`CACHE_DTYPE`), as llama.cpp's does by default: half the
memory of float32 (a 2048-token prompt of the 1.5B: 58 MB against 117), and half what each pass reads of it; the
kernel reads them exactly as float32 and computes as before, so every row still equals a one-token pass (greedy
and lookahead read the same cache). A cache another path filled in float32 is read as it is.

:func:`native_pass` says whether a model qualifies: a Qwen2 whose every matrix is a :class:`WoqLinear` on the
built kernel, float32, with no sliding window.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache

from lookahead_lsp.decoder.kernels.woq_layout import WoqProduct
from lookahead_lsp.decoder.kernels.woq_native import LayerShape, WoqKernel, layer_weights
from lookahead_lsp.decoder.runtime.row_attention import KeyPlan
from lookahead_lsp.decoder.runtime.woq_layer import WoqLinear

CACHE_DTYPE = torch.float16  # the keys and values a native pass writes (the module docstring)


@dataclass(frozen=True)
class NativeLayer:
    """One decoder layer's weights as the native pass uses them."""

    input_norm: torch.Tensor  # (hidden,) float32
    post_norm: torch.Tensor
    qkv: WoqProduct
    o: WoqProduct
    gate_up: WoqProduct
    down: WoqProduct


def head_dim(config: Any) -> int:
    """The width of one attention head in a transformers config (``head_dim``, else hidden size / heads)."""
    heads = getattr(config, "num_attention_heads", 0) or 1
    return int(getattr(config, "head_dim", None) or getattr(config, "hidden_size", 0) // heads)


def _product(*linears: torch.nn.Module) -> WoqProduct:
    """The linears (all :class:`WoqLinear`, checked by :func:`native_pass`) as one product, outputs side by side."""
    return WoqProduct.of([(linear.weight(), linear.bias) for linear in linears if isinstance(linear, WoqLinear)])


class NativePass:
    """:meth:`__call__` runs a decoding pass of the model it was made from (see the module docstring)."""

    def __init__(self, model: Any, kernel: WoqKernel) -> None:  # a transformers Qwen2ForCausalLM
        config = model.config
        self.kernel = kernel
        self.heads = int(config.num_attention_heads)
        self.kv_heads = int(config.num_key_value_heads)
        self.head_dim = head_dim(config)
        self.scale = float(self.head_dim**-0.5)
        self.eps = float(config.rms_norm_eps)
        inner = model.model
        self.embed: torch.nn.Module = inner.embed_tokens
        self.rotary: torch.nn.Module = inner.rotary_emb
        self.final_norm = inner.norm.weight.detach().float().contiguous()
        self.head = _product(model.lm_head)
        self.layers = [
            NativeLayer(
                layer.input_layernorm.weight.detach().float().contiguous(),
                layer.post_attention_layernorm.weight.detach().float().contiguous(),
                _product(layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj),
                _product(layer.self_attn.o_proj),
                _product(layer.mlp.gate_proj, layer.mlp.up_proj),
                _product(layer.mlp.down_proj),
            )
            for layer in inner.layers
        ]
        shape = LayerShape(int(config.hidden_size), self.heads, self.kv_heads, self.head_dim, self.eps, self.scale)
        nexts = [layer.input_norm for layer in self.layers[1:]] + [self.final_norm]
        self.weights = [  # what each layer's one native call reads (pointers into the tensors held above)
            layer_weights((layer.qkv, layer.o, layer.gate_up, layer.down), layer.post_norm, after, shape)
            for layer, after in zip(self.layers, nexts, strict=True)
        ]

    def products(self) -> list[WoqProduct]:
        """Every matrix product of a pass: the layers' in order, then the head."""
        return [p for layer in self.layers for p in (layer.qkv, layer.o, layer.gate_up, layer.down)] + [self.head]

    def __call__(
        self,
        cache: DynamicCache,
        tokens: Sequence[int],
        positions: Sequence[int],
        plan: KeyPlan,
        last_only: bool = False,
        between_layers: Callable[[], None] | None = None,
    ) -> torch.Tensor:
        """Logits (len(tokens), vocab) of ``tokens`` at ``positions`` after the cache's entries, each row seeing
        the keys ``plan`` gives it; the cache grows by len(tokens) entries. ``last_only``: the last row's logits
        only, (1, vocab) (a prefill chunk). ``between_layers`` is called before each layer (it may raise to stop
        the pass: the caller then drops the entries the stopped pass left)."""
        kernel, n = self.kernel, len(tokens)
        ids = torch.tensor([list(tokens)], dtype=torch.long)
        residual = self.embed(ids)[0].float().clone()  # (n, hidden): the residual stream, summed in place
        cos, sin = self.rotary(residual, torch.tensor([list(positions)], dtype=torch.long))
        rotary = (cos[0].float().contiguous(), sin[0].float().contiguous())
        keys = (plan.prefix, plan.start, plan.extra)
        x = torch.empty_like(residual)
        kernel.residual_norm(residual, None, self.layers[0].input_norm, self.eps, x)
        room = torch.empty(1, self.kv_heads, n, self.head_dim, dtype=CACHE_DTYPE)  # the entries each layer writes
        scratch = torch.empty(kernel.scratch_floats(self.weights[0], n))
        grow = getattr(cache, "make_room", None)  # decoder/kv.py's GrowingCache: its views widened, no copy
        last = len(self.weights) - 1
        for i, weights in enumerate(self.weights):
            if between_layers is not None:
                between_layers()
            all_k, all_v = grow(i, room) if grow is not None else cache.update(room, room, i)
            # ``last_only``: past its keys and values, the last layer computes only the row the logits read
            kv_only = n - 1 if last_only and i == last else 0
            kernel.layer(weights, residual, x, rotary, (all_k[0], all_v[0]), keys, scratch, kv_only)
        return kernel.linear(x[-1:] if last_only else x, self.head)


_PASSES: weakref.WeakKeyDictionary[torch.nn.Module, NativePass | None] = weakref.WeakKeyDictionary()


def native_pass(model: torch.nn.Module, kernel: WoqKernel) -> NativePass | None:
    """The model's :class:`NativePass` on ``kernel`` (made once per model), or None where the model does not
    qualify (see the module docstring): then transformers' forward runs the pass."""
    if model not in _PASSES:
        _PASSES[model] = NativePass(model, kernel) if qualifies(model, kernel) else None
    return _PASSES[model]


MATRICES = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
            "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")  # fmt: skip
"""Each decoder layer's matrices, as transformers' Qwen2 names them."""


def native_config(config: Any) -> bool:
    """Whether a model of ``config`` is one :class:`NativePass` computes: a Qwen2 with SiLU, no sliding window
    and a hidden width the kernels take (its weights are :func:`qualifies`' part)."""
    return (
        getattr(config, "model_type", None) == "qwen2"
        and not getattr(config, "use_sliding_window", False)
        and getattr(config, "hidden_act", "silu") == "silu"
        and config.hidden_size % 16 == 0
    )


def qualifies(model: torch.nn.Module, kernel: WoqKernel) -> bool:
    """Whether :class:`NativePass` computes what transformers' Qwen2 forward computes for ``model``."""
    config = getattr(model, "config", None)
    inner = getattr(model, "model", None)
    if config is None or inner is None or not native_config(config):
        return False
    if next(model.parameters()).dtype != torch.float32:
        return False
    linears = [model.lm_head] + [layer.get_submodule(name) for layer in inner.layers for name in MATRICES]
    return all(isinstance(m, WoqLinear) and m.kernel is kernel for m in linears)
