"""Row attention: a row's result is bit for bit what the same row computes alone after its own keys."""

from __future__ import annotations

import random

import pytest
import torch

from lookahead_lsp.decoder.kernels.woq_native import WoqKernel, built_kernel
from lookahead_lsp.decoder.runtime.row_attention import (
    BLOCK,
    native_row_attention,
    plan_keys,
    plan_rows,
    row_attention,
)

KINDS = ["flash", "native"]
"""ATen's flash kernel on a RowPlan, the native kernel (decoder/row_kernel.cpp) on a KeyPlan"""


def attend(kind: str, query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, past: int,
           positions: list[int], visible: torch.Tensor | None, scale: float) -> torch.Tensor:  # fmt: skip
    """One pass's attention through either implementation."""
    if kind == "flash":
        return row_attention(query, keys, values, plan_rows(past, positions, visible), scale)
    kernel = built_kernel()
    assert kernel is not None
    return native_row_attention(query, keys, values, plan_keys(kernel, past, positions, visible), scale)


def _tree(rng: random.Random, n: int) -> list[int]:
    """Parents of a random token tree of ``n`` rows in insertion order (-1: the root's children)."""
    parents = [-1]
    for i in range(1, n):
        parents.append(rng.choice([i - 1, i - 1, rng.randrange(i)]))
    return parents


def tree_visibility(parents: list[int]) -> tuple[torch.Tensor, list[int]]:
    """Which row of a token tree sees which (itself and its ancestors), and each row's depth."""
    n = len(parents)
    visible = torch.zeros(n, n, dtype=torch.bool)
    depths = []
    for i, parent in enumerate(parents):
        visible[i, i] = True
        if parent >= 0:
            visible[i] |= visible[parent]
        depths.append(0 if parent < 0 else depths[parent] + 1)
    return visible, depths


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("heads", "kv_heads"), [(14, 2), (12, 2), (4, 2), (8, 8)])
@pytest.mark.parametrize("past", [0, 5, 31, 40, 63, 300, 530])
def test_each_row_of_a_tree_pass_equals_that_row_alone_after_its_keys(
    kind: str, heads: int, kv_heads: int, past: int
) -> None:
    rng = random.Random(past * 31 + heads)
    torch.manual_seed(past + heads)
    n, dim = 24, 64
    parents = _tree(rng, n)
    visible, depths = tree_visibility(parents)
    # the cache as the model holds it: views of buffers with spare capacity
    keys = torch.randn(1, kv_heads, past + n + 40, dim)[:, :, : past + n]
    values = torch.randn(1, kv_heads, past + n + 40, dim)[:, :, : past + n]
    query = torch.randn(1, heads, n, dim)
    positions = [past + d for d in depths]
    together = attend(kind, query, keys, values, past, positions, visible, 0.125)
    for j in range(n):
        # greedy's layout: the cache, then the row's ancestors in position order, then the row itself
        mine = sorted((positions[i], past + i) for i in range(n) if visible[j, i])
        order = torch.tensor(list(range(past)) + [index for _, index in mine])
        alone = attend(
            kind,
            query[:, :, j : j + 1],
            keys.index_select(2, order),
            values.index_select(2, order),
            positions[j],
            [positions[j]],
            None,
            0.125,
        )
        assert torch.equal(alone[0, 0], together[0, j]), f"row {j} at position {positions[j]}"


@pytest.mark.parametrize("kind", KINDS)
def test_row_attention_is_attention(kind: str) -> None:
    torch.manual_seed(0)
    past, n, heads, kv_heads, dim = 70, 9, 14, 2, 64
    visible, depths = tree_visibility(_tree(random.Random(1), n))
    keys, values = torch.randn(1, kv_heads, past + n, dim), torch.randn(1, kv_heads, past + n, dim)
    query = torch.randn(1, heads, n, dim)
    got = attend(kind, query, keys, values, past, [past + d for d in depths], visible, 0.125)
    allowed = torch.cat([torch.ones(n, past, dtype=torch.bool), visible], 1)
    expected = torch.nn.functional.scaled_dot_product_attention(
        query,
        keys.repeat_interleave(heads // kv_heads, 1),
        values.repeat_interleave(heads // kv_heads, 1),
        attn_mask=allowed,
        scale=0.125,
    ).transpose(1, 2)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_every_level_attends_with_the_same_bits_as_the_scalar_build(
    levels: dict[str, WoqKernel], dtype: torch.dtype
) -> None:
    """The attention kernel at each instruction-set level this CPU runs computes the scalar build's bits, for
    head sizes compiled as constants (64, 128) and taken at run time (32), over a token tree's rows, on a cache
    of float32 or float16 keys and values (each level widens a half with its own instructions)."""
    for dim in (64, 128, 32):
        torch.manual_seed(dim)
        past, n, heads, kv_heads = 300, 7, 14, 2
        visible, depths = tree_visibility(_tree(random.Random(dim), n))
        keys, values = torch.randn(1, kv_heads, past + n, dim), torch.randn(1, kv_heads, past + n, dim)
        keys, values = keys.to(dtype), values.to(dtype)
        query = torch.randn(1, heads, n, dim) * 3.0
        outputs = {
            level: native_row_attention(
                query, keys, values, plan_keys(kernel, past, [past + d for d in depths], visible), 0.125
            )
            for level, kernel in levels.items()
        }
        for level, got in outputs.items():
            assert torch.equal(got, outputs["scalar"]), (level, dim)


def test_a_half_cache_attends_with_the_bits_of_float32_keys_of_the_same_values() -> None:
    """A float16 cache (the native pass's) is read as exactly the float32 numbers it holds: the same bits as a
    float32 cache of those numbers, over keys past the first-level blocks, subnormal, huge and signed zeros
    included; a cache of any other precision is refused."""
    kernel = built_kernel()
    assert kernel is not None
    torch.manual_seed(4)
    past, n, heads, kv_heads, dim = 1100, 6, 12, 2, 128
    visible, depths = tree_visibility(_tree(random.Random(4), n))
    keys = torch.randn(1, kv_heads, past + n, dim).half()
    values = torch.randn(1, kv_heads, past + n, dim).half()
    keys[0, 0, 5, :8] = torch.tensor([6e-8, -6e-8, 3e-5, -0.0, 0.0, 65504.0, -65504.0, 1e-7]).half()
    values[0, 1, 7, :4] = torch.tensor([6e-8, -3e-5, -0.0, 60000.0]).half()
    query = torch.randn(1, heads, n, dim) * 0.05
    plan = plan_keys(kernel, past, [past + d for d in depths], visible)
    half = native_row_attention(query, keys, values, plan, 0.088)
    wide = native_row_attention(query, keys.float(), values.float(), plan, 0.088)
    assert torch.isfinite(half).all() and torch.equal(half, wide)
    with pytest.raises(ValueError, match="float32 or float16"):
        native_row_attention(query, keys.bfloat16(), values.bfloat16(), plan, 0.088)


def test_the_native_kernel_refuses_heads_it_cannot_take() -> None:
    kernel = built_kernel()
    assert kernel is not None
    keys = torch.randn(2, 4, 24)  # a head 24 wide: not a multiple of 16
    with pytest.raises(ValueError, match="sixteens"):
        plan = plan_keys(kernel, 3, [3], None)
        kernel.attention(torch.randn(1, 2, 24), keys, keys, (plan.prefix, plan.start, plan.extra), 1.0)


def test_a_pass_of_no_rows_attends_to_nothing() -> None:
    kernel = built_kernel()
    assert kernel is not None
    keys = torch.randn(2, 4, 64)
    empty = torch.zeros(0, dtype=torch.int64)
    out = kernel.attention(torch.randn(0, 4, 64), keys, keys, (empty, torch.zeros(1, dtype=torch.int64), empty), 1.0)
    assert out.shape == (0, 4, 64)


def test_a_plan_spans_blocks_and_gathers_only_rows_that_left_storage_order() -> None:
    past = BLOCK - 2  # the pass crosses a block boundary at its third position
    parents = [-1, 0, 1, 0, 3, 4]  # rows 3..5: a second branch from row 0
    visible, depths = tree_visibility(parents)
    plan = plan_rows(past, [past + d for d in depths], visible)
    shared = [part for part in plan.a_parts if part.index is None]
    gathered = [part for part in plan.a_parts if part.index is not None]
    assert [p.rows.tolist() for p in shared] == [[2]]  # the first branch past the boundary: a view of the cache
    assert [p.rows.tolist() for p in gathered] == [[4], [5]]  # the second: its first BLOCK keys gathered
    assert gathered[0].index is not None
    assert gathered[0].index.tolist() == [*range(past), past, past + 3]


def test_a_row_that_does_not_see_one_row_per_position_is_refused() -> None:
    visible = torch.tensor([[True, False], [False, True]])
    with pytest.raises(ValueError, match="row 1"):
        plan_rows(10, [10, 11], visible)  # row 1 at position 11 without a row at 10
