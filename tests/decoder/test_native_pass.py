"""The native decoding pass (decoder/native_pass.py): each per-row step against its PyTorch reference, the pass
against transformers' forward on a packed tiny model, and every row of a wide pass bit for bit equal to that row
in a one-token pass."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
import torch
from transformers import DynamicCache
from transformers.models.qwen2.modeling_qwen2 import Qwen2RMSNorm, apply_rotary_pos_emb

from lookahead_lsp.decoder.forward import forward, prefill
from lookahead_lsp.decoder.greedy import GreedyDecoder
from lookahead_lsp.decoder.kernels.woq_layout import WoqProduct, woq_state
from lookahead_lsp.decoder.kernels.woq_native import WoqKernel, built_kernel
from lookahead_lsp.decoder.kv import PrefixKV
from lookahead_lsp.decoder.lookahead import LookaheadDecoder
from lookahead_lsp.decoder.runtime.native_pass import _PASSES, NativePass, native_pass, qualifies
from lookahead_lsp.decoder.runtime.packed_model import pack_gguf, use_packed
from lookahead_lsp.decoder.runtime.row_attention import plan_keys
from lookahead_lsp.decoder.runtime.woq_layer import WoqLinear
from lookahead_lsp.decoder.types import CancelToken, DecodeRequest
from tests.decoder.test_packed import write_tiny_gguf
from tests.decoder.test_woq import random_groups
from tests.tiny_model import make_tiny_qwen2


@pytest.fixture(scope="module")
def kernel() -> WoqKernel:
    built = built_kernel()  # tested whether or not $LOOKAHEAD_LSP_NATIVE turns the decoders' use off
    assert built is not None  # the machines this project is tested on have g++
    return built


@pytest.fixture(autouse=True)
def native_forward(monkeypatch: pytest.MonkeyPatch, kernel: WoqKernel) -> None:
    """``forward`` takes the native pass here even where $LOOKAHEAD_LSP_NATIVE=0 turns the decoders' use off."""
    monkeypatch.setattr("lookahead_lsp.decoder.forward.native_kernel", lambda: kernel)


@pytest.fixture(scope="module")
def packed(kernel: WoqKernel, tmp_path_factory: pytest.TempPathFactory) -> torch.nn.Module:
    gguf = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    write_tiny_gguf(make_tiny_qwen2(vocab_size=512, seed=1, dtype=torch.float32), gguf)
    model = make_tiny_qwen2(vocab_size=512, seed=1, dtype=torch.float32)
    use_packed(model, pack_gguf(gguf), kernel=kernel)
    return model


def test_residual_norm_adds_then_normalizes_as_transformers_rms_norm(kernel: WoqKernel) -> None:
    torch.manual_seed(0)
    residual, delta = torch.randn(5, 64), torch.randn(5, 64)
    norm = Qwen2RMSNorm(64, eps=1e-6)
    norm.weight.data = torch.rand(64) + 0.5
    want_residual = residual + delta
    out = torch.empty(5, 64)
    kernel.residual_norm(residual, delta, norm.weight.data, 1e-6, out)
    assert torch.equal(residual, want_residual)
    torch.testing.assert_close(out, norm(want_residual).detach(), rtol=1e-6, atol=1e-6)
    kernel.residual_norm(residual, None, norm.weight.data, 1e-6, out)  # no delta: the residual stays
    assert torch.equal(residual, want_residual)


def test_rope_rotates_q_and_k_heads_in_place_exactly_as_transformers(kernel: WoqKernel) -> None:
    torch.manual_seed(0)
    rows, heads, kv_heads, dim = 3, 4, 2, 16
    qkv = torch.randn(rows, (heads + 2 * kv_heads) * dim)
    angles = torch.rand(rows, dim // 2) * 6
    cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)
    q = qkv[:, : heads * dim].view(rows, heads, dim).transpose(0, 1)[None].clone()
    k = qkv[:, heads * dim : (heads + kv_heads) * dim].view(rows, kv_heads, dim).transpose(0, 1)[None].clone()
    v = qkv[:, (heads + kv_heads) * dim :].clone()
    want_q, want_k = apply_rotary_pos_emb(q, k, cos[None], sin[None])
    kernel.rope(qkv, heads + kv_heads, dim, cos, sin)
    assert torch.equal(qkv[:, : heads * dim], want_q[0].transpose(0, 1).reshape(rows, -1))
    assert torch.equal(qkv[:, heads * dim : (heads + kv_heads) * dim], want_k[0].transpose(0, 1).reshape(rows, -1))
    assert torch.equal(qkv[:, (heads + kv_heads) * dim :], v)  # v is not rotated


def test_swiglu_is_silu_of_the_gate_times_up(kernel: WoqKernel) -> None:
    torch.manual_seed(0)
    for rows, inter in ((300, 96), (30, 600)):  # threaded; 600: rows split in pieces of 256 columns and a rest
        gate_up = torch.randn(rows, 2 * inter) * 8  # large gates saturate exp
        got = kernel.swiglu(gate_up)
        want = torch.nn.functional.silu(gate_up[:, :inter]) * gate_up[:, inter:]
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
        assert torch.equal(kernel.swiglu(gate_up[:1].contiguous()), got[:1])  # a row alone: the same bits


def test_a_product_of_several_weights_equals_each_weight_alone(kernel: WoqKernel) -> None:
    layers = [
        WoqLinear(kernel, woq_state(random_groups(rows, 64, bits, seed=rows, symmetric=bits != 5)), bias)
        for rows, bits, bias in ((12, 5, torch.randn(12)), (8, 5, torch.randn(8)), (7, 8, None))
    ]
    x = torch.randn(5, 64)
    together = kernel.linear(x, WoqProduct.of([(layer.weight(), layer.bias) for layer in layers]))
    assert torch.equal(together, torch.cat([layer(x) for layer in layers], dim=-1))
    narrow = WoqLinear(kernel, woq_state(random_groups(4, 32, 8, seed=0, symmetric=True)), None)
    with pytest.raises(ValueError, match="one width"):
        WoqProduct.of([(layers[0].weight(), None), (narrow.weight(), None)])


def test_the_packed_qwen2_qualifies_and_a_float64_one_does_not(packed: torch.nn.Module, kernel: WoqKernel) -> None:
    assert qualifies(packed, kernel)
    assert native_pass(packed, kernel) is not None
    assert not qualifies(make_tiny_qwen2(vocab_size=512, seed=1), kernel)  # float64, dense matrices


class HalfValuedCache(DynamicCache):
    """transformers' cache holding in float32 what the native pass's float16 cache holds: every key and value
    rounded to float16 as it is written (the native kernel reads a float16 entry as exactly that float32)."""

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args, **kwargs):  # type: ignore[no-untyped-def, override]
        rounded = key_states.half().float(), value_states.half().float()
        return super().update(*rounded, layer_idx, *args, **kwargs)


def transformers_logits(model: torch.nn.Module, prompt: list[int], tokens: list[int]) -> torch.Tensor:
    """The same prefill and pass through transformers' module tree (the native pass set aside for the calls), on
    a cache of the same float16-valued keys and values."""
    kv = PrefixKV()
    kv.cache = HalfValuedCache()
    saved = _PASSES.get(model)
    _PASSES[model] = None
    try:
        prefill(model, kv, prompt)
        kv.append(prompt)
        return forward(model, kv, tokens)
    finally:
        _PASSES[model] = saved


def test_the_native_pass_computes_what_transformers_forward_computes(packed: torch.nn.Module) -> None:
    prompt, tokens = [5, 17, 300, 42, 42, 9, 77, 1], [8, 300, 2, 41]
    kv = PrefixKV()
    prefill(packed, kv, prompt)
    kv.append(prompt)
    got = forward(packed, kv, tokens)
    want = transformers_logits(packed, prompt, tokens)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4 * want.abs().max().item())
    assert len(kv.cache.layers[0].keys[0, 0]) == len(prompt) + len(tokens)  # the cache grew by the pass


def test_every_row_of_a_wide_pass_equals_that_row_in_a_one_token_pass(packed: torch.nn.Module) -> None:
    rng = random.Random(3)
    prompt = [rng.randrange(512) for _ in range(40)]
    tokens = [rng.randrange(512) for _ in range(7)]
    kv = PrefixKV()
    prefill(packed, kv, prompt)
    kv.append(prompt)
    wide = forward(packed, kv, tokens, list(range(40, 47)), torch.tril(torch.ones(7, 7, dtype=torch.bool)))
    kv.cache.crop(-len(tokens))  # the pass's entries (the ids are the caller's: the prompt's still)
    for j, token in enumerate(tokens):
        one = forward(packed, kv, [token])
        kv.append([token])
        assert torch.equal(one[0], wide[j]), f"row {j}"


def test_a_native_prefill_computes_each_row_as_a_one_token_pass_does(packed: torch.nn.Module) -> None:
    rng = random.Random(5)
    prompt = [rng.randrange(512) for _ in range(37)]
    chunked = PrefixKV()
    logits = prefill(packed, chunked, prompt, chunk_size=16)  # chunks of 16, 16 and 5 rows
    assert logits is not None and chunked.ids == prompt
    one_by_one = PrefixKV()
    for token in prompt:
        last = forward(packed, one_by_one, [token])[-1]
        one_by_one.append([token])
    assert torch.equal(logits, last)
    for mine, theirs in zip(chunked.cache.layers, one_by_one.cache.layers, strict=True):
        assert torch.equal(mine.keys, theirs.keys) and torch.equal(mine.values, theirs.values)


def layer_by_steps(
    kernel: WoqKernel,
    native: NativePass,
    i: int,
    residual: torch.Tensor,
    x: torch.Tensor,
    rotary: tuple[torch.Tensor, ...],
    cache: tuple[torch.Tensor, torch.Tensor],
    keys: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
) -> None:
    """Layer ``i`` by the kernel's steps one call each (the reference): x and residual in place, the pass's
    keys and values written into the cache views' last rows."""
    layer, n, d = native.layers[i], x.shape[0], native.head_dim
    q_width, kv_width = native.heads * d, native.kv_heads * d
    qkv = kernel.linear(x, layer.qkv)
    kernel.rope(qkv, native.heads + native.kv_heads, d, *rotary)
    cache[0][:, -n:] = qkv[:, q_width : q_width + kv_width].view(n, native.kv_heads, d).transpose(0, 1)
    cache[1][:, -n:] = qkv[:, q_width + kv_width :].view(n, native.kv_heads, d).transpose(0, 1)
    attended = kernel.attention(qkv[:, :q_width].view(n, native.heads, d), cache[0], cache[1], keys, native.scale)
    kernel.residual_norm(residual, kernel.linear(attended.view(n, q_width), layer.o), layer.post_norm, native.eps, x)
    down = kernel.linear(kernel.swiglu(kernel.linear(x, layer.gate_up)), layer.down)
    after = native.layers[i + 1].input_norm if i + 1 < len(native.layers) else native.final_norm
    kernel.residual_norm(residual, down, after, native.eps, x)


Pair = tuple[torch.Tensor, torch.Tensor]


def layer_call_inputs(
    native: NativePass, kernel: WoqKernel, held: int, n: int
) -> tuple[Pair, tuple[torch.Tensor, torch.Tensor, torch.Tensor], Callable[[torch.Tensor], Pair]]:
    """What a layer call of ``n`` causal rows after ``held`` cached entries takes besides its tensors: the rows'
    (cos, sin), the key plan, and the (kv_heads, held + n, dim) views of a (2, kv_heads, room, dim) buffer."""
    positions = list(range(held, held + n))
    hidden = native.final_norm.numel()
    cos, sin = native.rotary(torch.zeros(1, n, hidden), torch.tensor([positions]))
    keys = plan_keys(kernel, held, positions, None)

    def views(buffers: torch.Tensor) -> Pair:
        return buffers[0, :, : held + n], buffers[1, :, : held + n]

    return (cos[0].float().contiguous(), sin[0].float().contiguous()), (keys.prefix, keys.start, keys.extra), views


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_one_native_layer_call_computes_the_steps_bits(
    packed: torch.nn.Module, kernel: WoqKernel, dtype: torch.dtype
) -> None:
    """The layer call against its steps one by one, on a cache of either precision: a float16 cache's new keys
    and values are rounded by the kernel as torch rounds them (the steps write them through torch)."""
    native = native_pass(packed, kernel)
    assert native is not None
    generator = torch.Generator().manual_seed(11)
    held, n, capacity = 9, 5, 20  # entries already cached, rows of the pass, the cache's room
    hidden = native.final_norm.numel()
    rotary, plan, views = layer_call_inputs(native, kernel, held, n)
    for i in range(len(native.layers)):
        residual = torch.randn(n, hidden, generator=generator)
        x = torch.randn(n, hidden, generator=generator)
        buffers = torch.randn(2, native.kv_heads, capacity, native.head_dim, generator=generator).to(dtype)
        mine = (residual.clone(), x.clone(), buffers.clone())
        layer_by_steps(kernel, native, i, residual, x, rotary, views(buffers), plan)
        scratch = torch.empty(kernel.scratch_floats(native.weights[i], n))
        kernel.layer(native.weights[i], mine[0], mine[1], rotary, views(mine[2]), plan, scratch)
        assert torch.equal(mine[0], residual) and torch.equal(mine[1], x), f"layer {i}"
        assert torch.equal(mine[2], buffers), f"layer {i}: the cache (its other entries untouched)"
        with pytest.raises(ValueError, match="scratch"):
            kernel.layer(native.weights[i], mine[0], mine[1], rotary, views(mine[2]), plan, scratch[:-1])


def test_rows_that_only_write_keys_leave_the_others_bits_and_their_own_rows_alone(
    packed: torch.nn.Module, kernel: WoqKernel
) -> None:
    """``kv_only`` (a prefill chunk's last layer): the first rows write their keys and values and stop; the
    rows after them get the full call's bits, the first rows' residual and input are left as they were."""
    native = native_pass(packed, kernel)
    assert native is not None
    generator = torch.Generator().manual_seed(12)
    held, n, skip, capacity = 6, 5, 3, 16
    hidden = native.final_norm.numel()
    rotary, plan, views = layer_call_inputs(native, kernel, held, n)
    scratch = torch.empty(kernel.scratch_floats(native.weights[0], n))
    residual, x = torch.randn(n, hidden, generator=generator), torch.randn(n, hidden, generator=generator)
    buffers = torch.randn(2, native.kv_heads, capacity, native.head_dim, generator=generator)
    whole = (residual.clone(), x.clone(), buffers.clone())
    part = (residual.clone(), x.clone(), buffers.clone())
    kernel.layer(native.weights[-1], whole[0], whole[1], rotary, views(whole[2]), plan, scratch)
    kernel.layer(native.weights[-1], part[0], part[1], rotary, views(part[2]), plan, scratch, kv_only=skip)
    assert torch.equal(part[2], whole[2])  # every row's keys and values
    assert torch.equal(part[0][skip:], whole[0][skip:]) and torch.equal(part[1][skip:], whole[1][skip:])
    assert torch.equal(part[0][:skip], residual[:skip]) and torch.equal(part[1][:skip], x[:skip])
    assert not torch.equal(whole[0][:skip], residual[:skip])  # the whole call did change them
    with pytest.raises(ValueError, match="rows to compute"):
        kernel.layer(native.weights[-1], part[0], part[1], rotary, views(part[2]), plan, scratch, kv_only=n)


def test_a_prefill_chunk_gives_a_full_pass_last_logits_and_cache_bit_for_bit(packed: torch.nn.Module) -> None:
    prompt = [(7 * i) % 500 + 3 for i in range(21)]
    full, chunk = PrefixKV(), PrefixKV()
    want = forward(packed, full, prompt)
    got = forward(packed, chunk, prompt, last_only=True)
    assert got.shape[0] == 1 and torch.equal(got[-1], want[-1])
    for mine, theirs in zip(chunk.cache.layers, full.cache.layers, strict=True):
        assert torch.equal(mine.keys, theirs.keys) and torch.equal(mine.values, theirs.values)


class CancelAfter(CancelToken):
    """Cancelled from its ``reads``-th look on (the prefill looks before each chunk and before each layer)."""

    def __init__(self, reads: int) -> None:
        super().__init__()
        self.reads, self.looked = reads, 0

    @property
    def cancelled(self) -> bool:
        self.looked += 1
        return self.looked >= self.reads


def test_a_native_prefill_stops_between_layers_and_keeps_the_chunks_it_finished(packed: torch.nn.Module) -> None:
    prompt = list(range(3, 11))
    layers = len(packed.model.layers)
    cancel = CancelAfter(reads=layers + 3)  # chunk 1 whole (1 + layers looks), chunk 2 stopped at its second layer
    kv = PrefixKV()
    assert prefill(packed, kv, prompt, cancel=cancel, chunk_size=4) is None
    assert cancel.looked == layers + 3
    assert kv.ids == prompt[:4]  # the chunk it finished stays
    assert all(layer.keys.shape[-2] == 4 for layer in kv.cache.layers)  # chunk 2's partial entries dropped


@pytest.mark.parametrize("decoder", [GreedyDecoder, LookaheadDecoder])
def test_a_native_decoding_pass_stops_between_layers_and_the_cache_stays_whole(
    packed: torch.nn.Module, decoder: Callable[[torch.nn.Module], GreedyDecoder | LookaheadDecoder]
) -> None:
    """A newer keystroke stops a decoding pass at its next layer, not after the whole pass; the cache keeps
    exactly the entries of the tokens committed before it."""
    prompt = list(range(3, 11))
    layers = len(packed.model.layers)
    # looks: the prefill's (1 + layers), the request's (1), then per step the loop's (1) and the pass's (layers)
    reads = (1 + layers) + 1 + (1 + layers) + 3  # the second pass is stopped before its second layer
    cancel = CancelAfter(reads=reads)
    running = decoder(packed)
    result = running.generate(DecodeRequest(prompt, max_new_tokens=16, cancel=cancel))
    assert result.stats.finish_reason == "cancelled" and cancel.looked == reads
    assert len(result.token_ids) == 2  # the prefill's token and the first pass's
    assert all(layer.keys.shape[-2] == len(running.kv.ids) for layer in running.kv.cache.layers)
    assert running.kv.ids[: len(prompt)] == prompt
