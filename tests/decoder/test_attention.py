"""The decoders' attention, CPU weight layout and CPU linear kernels compute what transformers' own path computes."""

from __future__ import annotations

import torch
from transformers import DynamicCache

from lookahead_lsp.decoder.forward import cache_argument
from lookahead_lsp.decoder.runtime.cpu_linear import OneDnnLinear, use_onednn_linear
from lookahead_lsp.decoder.runtime.model import transpose_linear_weights
from tests.decoder.test_row_attention import tree_visibility
from tests.tiny_model import make_tiny_qwen2, random_qwen2


def _tree_pass(model: torch.nn.Module, prompt: list[int], tokens: list[int], parents: list[int]) -> torch.Tensor:
    """Logits of a draft-tree pass: token i sees the prompt, itself and its ancestors (``parents[i]``, -1: none)."""
    n, past = len(tokens), len(prompt)
    allowed, depth = tree_visibility(parents)
    mask = torch.zeros(1, 1, n, past + n, dtype=torch.float64)
    mask[0, 0, :, past:].masked_fill_(~allowed, torch.finfo(torch.float64).min)
    cache = DynamicCache()
    with torch.inference_mode():
        model(input_ids=torch.tensor([prompt]), **{cache_argument(type(model)): cache})
        return model(
            input_ids=torch.tensor([tokens]),
            position_ids=torch.tensor([[past + d for d in depth]]),
            attention_mask=mask,
            **{cache_argument(type(model)): cache},
        ).logits[0]


def test_packed_gqa_attention_equals_transformers_eager_and_sdpa_on_a_draft_tree() -> None:
    prompt = [5, 17, 99, 3, 250, 41, 7]
    tokens, parents = [11, 12, 13, 14, 15, 16], [-1, 0, 1, 0, 3, 2]
    ours = make_tiny_qwen2(seed=3)
    assert ours.config._attn_implementation == "lookahead_sdpa"
    got = _tree_pass(ours, prompt, tokens, parents)
    # eager takes its softmax in float32, sdpa in the model's dtype
    for implementation, tolerance in (("sdpa", 1e-12), ("eager", 1e-5)):
        reference = random_qwen2(512, seed=3)
        reference.set_attn_implementation(implementation)
        expected = _tree_pass(reference, prompt, tokens, parents)
        torch.testing.assert_close(got, expected, rtol=tolerance, atol=tolerance)
    # and the mask matters: without the tree, token 3 (a sibling of token 1) would see tokens 1 and 2
    chain = _tree_pass(ours, prompt, tokens, [-1, 0, 1, 2, 3, 4])
    assert not torch.allclose(got[3], chain[3])


def test_transposed_weights_keep_values_shapes_and_ties() -> None:
    model = random_qwen2(512, seed=1)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    with torch.inference_mode():
        expected = model(input_ids=ids).logits
    changed = transpose_linear_weights(model)
    linears = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Linear)}
    assert changed == len(linears) > 0
    assert model.lm_head.weight is model.model.embed_tokens.weight  # still tied: no second copy
    for name, p in model.named_parameters():
        torch.testing.assert_close(p, before[name], rtol=0, atol=0)
        if p.dim() == 2:
            assert p.stride() == (1, p.shape[0])  # column-major
    with torch.inference_mode():
        torch.testing.assert_close(model(input_ids=ids).logits, expected)


def test_onednn_linears_keep_weights_ties_and_logits() -> None:
    model = random_qwen2(512, seed=2, dtype=torch.float32)
    weights = {name: p for name, p in model.named_parameters()}
    ids = torch.tensor([[1, 2, 3, 4, 5, 6, 7]])
    with torch.inference_mode():
        expected = model(input_ids=ids).logits
    changed = use_onednn_linear(model)
    assert changed == sum(isinstance(m, torch.nn.Linear) for m in model.modules()) > 0
    assert all(type(m) is OneDnnLinear for m in model.modules() if isinstance(m, torch.nn.Linear))
    assert model.lm_head.weight is model.model.embed_tokens.weight  # still tied: nothing copied
    assert all(p is weights[name] for name, p in model.named_parameters())
    with torch.inference_mode():
        got = model(input_ids=ids).logits
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    assert use_onednn_linear(model) == 0  # nothing plain left to change


def test_float64_keeps_the_default_linear() -> None:
    model = random_qwen2(512, seed=2)  # oneDNN has no float64 kernel: the model is left as it is
    assert use_onednn_linear(model) == 0
    assert not any(isinstance(m, OneDnnLinear) for m in model.modules())
