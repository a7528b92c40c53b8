"""The native weight-only-quantized kernel: its stored layouts, its products against a float64 reference, each row of
a pass computed on its own (what lossless lookahead needs), the build cache and the fallbacks."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from lookahead_lsp.decoder.kernels.isa import LEVELS, chosen_level
from lookahead_lsp.decoder.kernels.woq_layout import (
    LAYOUTS,
    SCALE_MODES,
    WoqProduct,
    groups_from_state,
    layout_for,
    pack_codes,
    unpack_codes,
    woq_state,
)
from lookahead_lsp.decoder.kernels.woq_native import (
    WoqKernel,
    build,
    built_kernel,
    compiler,
    k_quant_groups,
    load_kernel,
    probe,
    prune_builds,
    reference_linear,
    reference_product,
)
from lookahead_lsp.decoder.runtime.woq_layer import WoqLinear
from lookahead_lsp.decoder.weights.gguf_blocks import AffineGroups


@pytest.fixture(scope="module")
def kernel() -> WoqKernel:
    found = built_kernel()  # tested whether or not $LOOKAHEAD_LSP_NATIVE turns the decoders' use off
    assert found is not None, "the native kernel should build on the machines this project is tested on"
    return found


def random_groups(rows: int, cols: int, bits: int, seed: int, symmetric: bool) -> AffineGroups:
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 2**bits, (rows, cols), dtype=np.uint8)
    scale = rng.uniform(0.001, 0.05, (rows, cols // 32)).astype(np.float16).astype(np.float32)
    if symmetric:
        offset = (-(2 ** (bits - 1)) * scale).astype(np.float32)
    else:
        offset = -rng.uniform(0.0, 0.3, (rows, cols // 32)).astype(np.float32)  # not float16: float32 stored
    return AffineGroups(codes, scale, offset, bits)


@pytest.mark.parametrize("bits", [4, 5, 6, 8])
def test_codes_pack_and_unpack_exactly(bits: int) -> None:
    codes = np.random.default_rng(bits).integers(0, 2**bits, (7, 96), dtype=np.uint8)
    layout = layout_for(bits)
    packed = pack_codes(codes, bits)
    assert packed.shape == (7, 3 * {4: 16, 5: 20, 8: 32}[layout])  # bytes per group of 32: 0.5, 0.625, 1 a weight
    np.testing.assert_array_equal(unpack_codes(packed, layout, 96), codes)


def test_nine_bit_codes_have_no_layout() -> None:
    with pytest.raises(ValueError):
        layout_for(9)


@pytest.mark.parametrize(("bits", "symmetric"), [(4, False), (5, True), (8, True), (8, False)])
def test_the_stored_state_holds_the_groups_exactly(bits: int, symmetric: bool) -> None:
    groups = random_groups(16, 64, bits, seed=bits, symmetric=symmetric)
    state = woq_state(groups)
    assert ("zero" in state) == symmetric and ("offset" in state) != symmetric
    assert state["scale"].dtype == (torch.float16 if symmetric else torch.float32)  # float16 only where exact
    back = groups_from_state(state)
    np.testing.assert_array_equal(back.codes, groups.codes)
    np.testing.assert_array_equal(back.dequantize(), groups.dequantize())


@pytest.mark.parametrize(("bits", "symmetric"), [(4, False), (5, True), (8, True), (5, False)])
@pytest.mark.parametrize("shape", [(13, 96), (64, 256)])
def test_the_kernel_computes_its_reference_product(
    kernel: WoqKernel, bits: int, symmetric: bool, shape: tuple[int, int]
) -> None:
    rows, cols = shape  # 13 rows: not a whole number of the kernel's row blocks; 3 groups: not a vector of groups
    groups = random_groups(rows, cols, bits, seed=rows + bits, symmetric=symmetric)
    bias = torch.randn(rows, generator=torch.Generator().manual_seed(1))
    layer = WoqLinear(kernel, woq_state(groups), bias)
    x = torch.randn(2, 9, cols, generator=torch.Generator().manual_seed(2))
    got = layer(x).double()
    assert got.shape == (2, 9, rows)
    codes, scale, offset = (torch.from_numpy(a) for a in (groups.codes, groups.scale, groups.offset))
    want = reference_linear(x.reshape(-1, cols), codes, scale, offset).reshape(2, 9, rows) + bias.double()
    assert (got - want).abs().max() <= 1e-5 * want.abs().max()
    # against the float weights themselves: only the activations' rounding (int8 per 32)
    exact = x.double() @ torch.from_numpy(groups.dequantize()).double().t() + bias.double()
    assert (got - exact).abs().max() <= 0.02 * exact.abs().max()


@pytest.mark.parametrize("bits", [4, 5, 8])
def test_each_row_of_a_pass_is_computed_as_if_alone(kernel: WoqKernel, bits: int) -> None:
    groups = random_groups(40, 160, bits, seed=bits, symmetric=bits != 4)
    layer = WoqLinear(kernel, woq_state(groups), None)
    x = torch.randn(17, 160, generator=torch.Generator().manual_seed(bits))
    alone = torch.cat([layer(x[i : i + 1]) for i in range(17)])
    for width in (2, 3, 4, 5, 8, 9, 17):  # every tile of the kernel and its remainders
        assert torch.equal(layer(x[:width]), alone[:width])
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert torch.equal(layer(x), alone)  # and whichever thread computes it
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize(("type_name", "layout"), [("Q4_K", 4), ("Q5_K", 5)])
def test_k_quant_scales_are_stored_in_their_two_levels_and_computed_exactly(
    kernel: WoqKernel, type_name: str, layout: int
) -> None:
    groups = k_quant_groups(24, 512, seed=3, type_name=type_name)
    state = woq_state(groups)
    assert state["scale"].dtype == torch.float16 and state["scale"].shape == (24, 2)  # one per 256 weights
    assert state["scale_sub"].dtype == torch.uint8 and state["scale_sub"].shape == (24, 16)
    back = groups_from_state(state)
    np.testing.assert_array_equal(back.scale, groups.scale)
    np.testing.assert_array_equal(back.offset, groups.offset)
    layer = WoqLinear(kernel, state, None)
    assert layer.layout == layout
    weight = torch.from_numpy(groups.dequantize())
    for rows in (1, 5, 8, 17):  # one tile, a block of rows, and the kept scales of a wider pass
        x = torch.randn(rows, 512, generator=torch.Generator().manual_seed(rows))
        got = layer(x).double()
        want = reference_product(x, weight, supers=True)  # activations per super-block (as llama.cpp's Q8_K)
        assert (got - want).abs().max() <= 1e-6 * want.abs().max()
        assert (got - reference_product(x, weight)).abs().max() > 1e-4 * want.abs().max()  # not per group
    assert layer.nbytes == 24 * 512 // 256 * {4: 144, 5: 176}[layout]  # the GGUF's own bytes (Q4_K, Q5_K blocks)


def test_a_zero_row_of_activations_gives_the_bias(kernel: WoqKernel) -> None:
    groups = random_groups(8, 64, 8, seed=0, symmetric=True)
    bias = torch.arange(8, dtype=torch.float32)
    out = WoqLinear(kernel, woq_state(groups), bias)(torch.zeros(1, 64))
    assert torch.equal(out[0], bias)


def test_the_kernel_refuses_activations_of_the_wrong_width(kernel: WoqKernel) -> None:
    layer = WoqLinear(kernel, woq_state(random_groups(8, 64, 8, seed=0, symmetric=True)), None)
    with pytest.raises(ValueError, match="float32 rows of 64"):
        kernel.linear(torch.zeros(1, 32), layer.product())


def test_the_build_is_cached_per_machine(tmp_path: Path) -> None:
    cxx = compiler()
    assert cxx is not None
    first = build(tmp_path, cxx, chosen_level())
    inode = first.stat().st_ino
    os.utime(first, (1_000_000, 1_000_000))  # built and last used long ago
    assert build(tmp_path, cxx, chosen_level()) == first and first.stat().st_ino == inode  # not compiled again
    assert [p.name for p in first.parent.iterdir()] == [first.name]  # no scratch left behind
    # used now (its access time, what pruning keeps by), still built then: a timing stored since is this build's
    assert first.stat().st_mtime == 1_000_000 and first.stat().st_atime > time.time() - 60


def test_a_new_build_removes_all_but_the_most_recently_used_builds_of_its_level(tmp_path: Path) -> None:
    """Each change of the sources, flags or compiler is a build of its own: a new one leaves the level's
    KEPT_BUILDS most recently used (a cached build counts as used when it is loaded), with their cost and pair
    tables, and removes the rest with theirs; another level's builds and files that are not builds stay."""
    cxx, level = compiler(), chosen_level()
    assert cxx is not None
    folder = tmp_path / "native-v2"
    folder.mkdir()
    old = [folder / f"woq-{level}-{n:020x}.so" for n in range(4)]
    other = folder / f"woq-{level}-amx-{0:020x}.so"  # another level whose name starts with this one's
    for age, path in enumerate([*old, other]):
        path.write_bytes(b"old build")
        for table in ("cost", "pairs"):
            (folder / f"{table}-{path.stem}-{age:020x}.json").write_text("{}")
        os.utime(path, (1_000_000 + age, 1_000_000 + age))  # old[3] and `other` used last
    stray = folder / f"woq-{level}-notes.so"
    stray.write_bytes(b"not a build")
    os.utime(old[0], None)  # loaded now: the most recently used of the old ones
    new = build(tmp_path, cxx, level)
    kept = {old[0], old[3], new, other, stray}
    assert {p for p in folder.iterdir() if p.suffix == ".so"} == kept
    tables = {p.name.split("-", 1)[1].rsplit("-", 1)[0] for p in folder.glob("*.json")}
    assert tables == {old[0].stem, old[3].stem, other.stem}  # the removed builds' tables went with them
    assert prune_builds(folder, level, ".so") == []  # nothing more to remove


def test_a_failing_compiler_leaves_the_aten_kernel(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="lookahead_lsp.decoder.kernels.woq_native"):
        assert load_kernel(tmp_path, "/bin/false") is None
        assert load_kernel(tmp_path, None) is None
    assert "native kernel unavailable" in caplog.text and "no C++ compiler" in caplog.text
    assert not list((tmp_path / "native-v2").glob("*.so"))


def every_kind_of_weight() -> list[AffineGroups]:
    """A weight of every affine layout and every way of keeping scales: float16 with a zero code, float16 pairs,
    float32 pairs, a K-quant's two levels; 13 rows (not a whole tile) and 5 groups (Q6_K's layout:
    tests/decoder/test_q6_k.py)."""
    rng = np.random.default_rng(7)
    half_pair = random_groups(13, 160, 4, seed=5, symmetric=False)
    half_offset = rng.uniform(-0.3, 0.0, half_pair.offset.shape).astype(np.float16).astype(np.float32)
    return [
        random_groups(13, 160, 5, seed=1, symmetric=True),
        random_groups(13, 160, 8, seed=2, symmetric=True),
        random_groups(13, 160, 8, seed=3, symmetric=False),
        AffineGroups(half_pair.codes, half_pair.scale, half_offset, 4),
        k_quant_groups(13, 512, seed=4),
        k_quant_groups(13, 512, seed=6, type_name="Q5_K"),
    ]


def test_the_kernel_is_built_for_every_level_this_cpu_runs(levels: dict[str, WoqKernel]) -> None:
    names = {level: {"avx512": "avx512-vnni"}.get(level, level) for level in LEVELS}  # the names woq_isa() reports
    assert "scalar" in levels and set(levels) <= set(LEVELS)
    assert all(kernel.isa == names[level] for level, kernel in levels.items())
    assert all(probe(kernel) for kernel in levels.values())


def test_the_start_up_probe_rejects_a_kernel_that_gets_k_quants_wrong(kernel: WoqKernel) -> None:
    """The probe holds a K-quant weight (the 1.5B's main format) beside every layout and Q6_K: a kernel whose
    K-quant products alone are off by 1% is not used."""

    class OffOnKQuants:
        def linear(self, x: torch.Tensor, product: WoqProduct) -> torch.Tensor:
            out = kernel.linear(x, product)
            return out * 1.01 if any(job.mode == SCALE_MODES["k-quant"] for job in product.jobs) else out

    assert probe(kernel)
    assert not probe(OffOnKQuants())  # type: ignore[arg-type]


def narrow_pass_masks(kernel: WoqKernel) -> Iterator[int | None]:
    """Each of the kernel's masks for passes of 1 to 4 rows set in turn (at an AVX-512 level none and all: one tile
    at a time and the two-tile loop; else None, no choice), the mask before set again at the end."""
    before = kernel.pair_rows()
    try:
        for mask in (0, 15) if before is not None else (None,):
            kernel.pair_rows(mask)
            assert kernel.pair_rows() == mask
            yield mask
    finally:
        kernel.pair_rows(before)


def assert_narrow_passes_as_alone(kernel: WoqKernel, layer: WoqLinear, x: torch.Tensor, want: torch.Tensor) -> None:
    """Each row of ``x`` alone and passes of its first 2 to 4 rows give ``want``'s rows; at an AVX-512 level both
    with the two-tile loop for such passes (``pair_rows``) and without."""
    for mask in narrow_pass_masks(kernel):
        assert torch.equal(torch.cat([layer(x[i : i + 1]) for i in range(x.shape[0])]), want), mask
        for rows in (2, 3, 4):
            assert torch.equal(layer(x[:rows]), want[:rows]), (mask, rows)


def test_every_level_computes_the_same_bits_as_the_scalar_build(levels: dict[str, WoqKernel]) -> None:
    modes = set()
    for groups in every_kind_of_weight():
        state = woq_state(groups)
        x = torch.randn(11, groups.shape[1], generator=torch.Generator().manual_seed(groups.shape[1]))
        x[3] *= 1000.0  # a row of outliers: large integer dots
        outputs = {}
        for level, kernel in levels.items():
            layer = WoqLinear(kernel, state, None)
            modes.add(layer.mode)
            outputs[level] = layer(x)
            # each row of a pass as if alone, at every level; and in a pass of one whole block of rows
            assert torch.equal(layer(x[:8]), outputs[level][:8])
            for rows in (5, 6, 7):  # passes narrower than a block that take AVX-512's two-tile loop all the same
                assert torch.equal(layer(x[:rows]), outputs[level][:rows])
            assert_narrow_passes_as_alone(kernel, layer, x, outputs[level])
            dense = layer.dense(torch.float32).double()
            np.testing.assert_allclose(dense.numpy(), groups.dequantize(), rtol=1e-6, atol=1e-7)
        for level, got in outputs.items():
            assert torch.equal(got, outputs["scalar"]), level
        codes, scale, offset = (torch.from_numpy(a) for a in (groups.codes, groups.scale, groups.offset))
        want = reference_linear(x, codes, scale, offset, supers=groups.levels is not None)
        assert (outputs["scalar"].double() - want).abs().max() <= 1e-5 * want.abs().max()
    assert modes == set(SCALE_MODES.values()) - {SCALE_MODES["sub-scales"]}


def test_tiles_in_pairs_give_the_plain_orders_bits_at_every_level(levels: dict[str, WoqKernel]) -> None:
    """The paired order (an AVX-512 build's: tiles two by two, group by group) holds the plain order's tile-groups
    moved, an odd last tile as it was; read that way every level gives the plain order's bits, for every pass width
    (one tile or two at a time, scales kept or decoded in each block of rows) and in dequantization."""
    weights = [*every_kind_of_weight(), k_quant_groups(40, 512, seed=8)]  # 40 rows: 5 tiles, the last alone
    for groups in weights:
        state = woq_state(groups)
        x = torch.randn(40, groups.shape[1], generator=torch.Generator().manual_seed(9))
        x[5] *= 1000.0
        for level, kernel in levels.items():
            plain, paired = WoqLinear(kernel, state, None, paired=False), WoqLinear(kernel, state, None, paired=True)
            assert not plain.paired and paired.paired
            assert torch.equal(paired.tiles.sort().values, plain.tiles.sort().values)
            assert not torch.equal(paired.tiles, plain.tiles)  # moved: two tiles at least
            count = (groups.shape[0] + 7) // 8
            if count % 2:  # the last tile in the plain order in both
                last = plain.tiles.numel() // count
                assert torch.equal(paired.tiles[-last:], plain.tiles[-last:])
            for mask in narrow_pass_masks(kernel):
                for rows in (1, 2, 3, 4, 5, 8, 9, 12, 33, 40):
                    assert torch.equal(paired(x[:rows]), plain(x[:rows])), (level, mask, rows)
            assert torch.equal(paired.dense(torch.float32), plain.dense(torch.float32)), level
            assert torch.equal(paired.dense(), plain.dense()), level


def test_the_layouts_cover_every_code_width_the_gguf_readers_produce() -> None:
    assert sorted(LAYOUTS) == [4, 5, 8] and all(layout_for(bits) >= bits for bits in range(1, 9))


def test_a_wide_pass_with_rounding_ties_computes_the_scalar_builds_bits_row_by_row(
    levels: dict[str, WoqKernel],
) -> None:
    """A prefill-sized pass (its activations quantized in parallel, its rows in blocks, the weight's tiles in
    groups) whose activations round at exact halves: every level gives the scalar build's bits, and each row
    what it gives alone."""
    groups = random_groups(40, 160, 4, seed=11, symmetric=False)  # 5 tiles: two tile groups
    state = woq_state(groups)
    gen = torch.Generator().manual_seed(3)
    x = torch.randint(-126, 126, (1003, 160), generator=gen).float() + 0.5  # 1003: a last block of 3 rows
    x[:, ::32] = 127.0  # each group's largest: 127 / 127 = 1, so x * that is an exact half, a tie
    x[::7] *= 0.25  # still exact halves of smaller values in some rows
    outputs = {level: WoqLinear(kernel, state, None)(x) for level, kernel in levels.items()}
    for level, got in outputs.items():
        assert torch.equal(got, outputs["scalar"]), level
    layer = WoqLinear(levels[max(levels, key=lambda name: name != "scalar")], state, None)
    alone = torch.cat([layer(x[i : i + 1]) for i in range(0, 1003, 17)])
    assert torch.equal(alone, outputs["scalar"][::17])
    codes, scale, offset = (torch.from_numpy(a) for a in (groups.codes, groups.scale, groups.offset))
    want = reference_linear(x, codes, scale, offset)
    assert (outputs["scalar"].double() - want).abs().max() <= 1e-2 * want.abs().max()


def prefill_sized_pass_as_scalar(
    levels: dict[str, WoqKernel], state: dict[str, torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A weight of 48 rows and 9 super-blocks (``state``) against 72 rows of a pass: every level gives the scalar
    build's bits, with and without a bias, and each row what it gives alone. Returns the pass, the bias and the
    scalar build's output with it."""
    x = torch.randn(72, 9 * 256, generator=torch.Generator().manual_seed(5))
    x[7] *= 1000.0  # a row of outliers: large integer sums
    x[12, 256:512] = 0.0  # a super-block of zeros
    bias = torch.randn(48, generator=torch.Generator().manual_seed(6))
    for b in (None, bias):
        outputs = {level: WoqLinear(kernel, state, b)(x) for level, kernel in levels.items()}
        for level, kernel in levels.items():
            assert torch.equal(outputs[level], outputs["scalar"]), level
            layer = WoqLinear(kernel, state, b)
            assert torch.equal(torch.cat([layer(x[i : i + 1]) for i in range(0, 72, 13)]), outputs["scalar"][::13])
    return x, bias, outputs["scalar"]


@pytest.mark.parametrize("type_name", ["Q4_K", "Q5_K"])
def test_a_prefill_sized_k_quant_pass_computes_the_scalar_builds_bits_row_by_row(
    levels: dict[str, WoqKernel], type_name: str
) -> None:
    """A K-quant weight of whole pairs of tiles (48 rows) against 72 rows of a pass (AMX's tiles of 16 rows two by
    two, the last one alone and partial; 9 super-blocks, more than one slice): every level gives the scalar build's
    bits, with and without a bias, and each row what it gives alone."""
    groups = k_quant_groups(48, 9 * 256, seed=13, type_name=type_name)
    x, bias, outputs = prefill_sized_pass_as_scalar(levels, woq_state(groups))
    codes, scale, offset = (torch.from_numpy(a) for a in (groups.codes, groups.scale, groups.offset))
    want = reference_linear(x, codes, scale, offset, supers=True)
    assert (outputs.double() - want - bias.double()).abs().max() <= 1e-5 * want.abs().max()
