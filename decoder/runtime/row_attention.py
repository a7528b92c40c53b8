"""runtime: attention whose result for a query row depends on that row's keys only, never on the rest of the pass.

Lookahead's promise is that its output equals greedy decoding token for token. Every other stage of a pass
computes each row on its own (norms, rotary embeddings, the linears: checked bit for bit in the tests), but
attention does not: CPU attention kernels split the query rows of a call into blocks, sum the keys of a row in
vector lanes by their index in the call, and run a row's arithmetic in a different order when the pass is wider,
when the row's keys are interleaved with keys it may not see (a token tree), or when the cache ends at a different
place. The differences sit in float32's last bits, and at a near tie between two tokens they change the text.

Here a row's attention is computed the same way wherever the row is: in a one-token greedy pass, in a chain of
draft tokens, or deep in a tree branch. For a row at position ``p`` with ``s = p - p % BLOCK``:

- part A: its keys at positions ``0 .. s-1``, always the first ``s`` keys of the cache in order (a view) unless
  the row is a tree branch that left storage order before ``s`` (then those keys are gathered, rarely);
- part B: its keys at positions ``s .. p``, gathered into ``BLOCK`` slots in position order, the slots after
  ``p`` masked;
- the two merged through their log-sum-exp, element by element.

Each part is one call of ATen's CPU flash-attention kernel with one batch entry per row and each row's query
heads padded to a multiple of :data:`ROW_SLOTS`: every matrix product in the kernel then has the same shape for
a row whatever the pass, so its result does not depend on which other rows share the call, whichever BLAS code
path the CPU takes (checked against one-row calls in the tests, at every instruction-set level).
Greedy's one-token pass goes through the same function, so both decoders do the same arithmetic per row.

:func:`plan_rows` works out the positions and indices once per pass (token positions only); the model's
attention modules call :func:`row_attention` per layer with it. Where the native kernels are built
(decoder/woq_native.py) a pass brings a :class:`KeyPlan` instead and :func:`native_row_attention` computes each
row directly over its keys in position order (no parts to merge; about a tenth of the time at 1000 cached
tokens).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from lookahead_lsp.decoder.kernels.woq_native import WoqKernel

BLOCK = 32  # positions per part B: the keys a row gathers for itself
ROW_SLOTS = 8  # query rows per token in a call: a row's query heads padded to a multiple of this


@dataclass(frozen=True)
class PartA:
    """Rows that share their first ``length`` keys: the cache's first keys in order, or ``index`` gathered."""

    rows: torch.Tensor  # (n,) long
    length: int
    index: torch.Tensor | None  # (length,) storage indices, or None for the first ``length`` entries


@dataclass(frozen=True)
class RowPlan:
    """Per pass: each row's part B (storage indices and mask) and its part-A groups."""

    b_index: torch.Tensor  # (rows * BLOCK,) long: storage index of each slot (masked slots hold the row's own)
    b_mask: torch.Tensor  # (rows, 1, 1, BLOCK) float32: 0 where the row sees the slot, -inf where not
    a_parts: tuple[PartA, ...]
    rows: int


def pass_keys(past: int, positions: Sequence[int], visible: torch.Tensor | None) -> list[list[int]]:
    """For each row of a pass of ``len(positions)`` rows after ``past`` cached entries, the storage indices of
    its keys at positions ``past .. p`` in position order (its ancestors in the pass, then itself).

    The cache holds positions ``0 .. past-1`` at the same storage indices; row ``j`` is stored at ``past + j``
    and sits at ``positions[j]``. ``visible[j, i]``: row ``j`` sees row ``i`` (None: causal, each row sees the
    rows before it). ValueError for a row that does not see exactly one pass row per position up to its own."""
    sees = None if visible is None else visible.tolist()
    keys = []
    for j, p in enumerate(positions):
        seen = range(j + 1) if sees is None else [i for i, yes in enumerate(sees[j]) if yes]
        by_position = {positions[i]: past + i for i in seen}
        if len(by_position) != p - past + 1 or by_position.get(p) != past + j:
            raise ValueError(f"row {j} at position {p} does not see exactly one pass row per position")
        keys.append([by_position[pos] for pos in range(past, p + 1)])
    return keys


@dataclass(frozen=True)
class KeyPlan:
    """Per pass, for the native row attention (decoder/row_kernel.cpp) of ``kernel``: row ``j`` sees the
    cache's first ``prefix[j]`` entries, then ``extra[start[j]:start[j + 1]]`` (int64 tensors)."""

    kernel: WoqKernel
    prefix: torch.Tensor
    start: torch.Tensor
    extra: torch.Tensor


def plan_keys(kernel: WoqKernel, past: int, positions: Sequence[int], visible: torch.Tensor | None) -> KeyPlan:
    """The :class:`KeyPlan` of a pass on ``kernel`` (the other arguments as :func:`pass_keys`)."""
    keys = pass_keys(past, positions, visible)
    start = [0]
    for row in keys:
        start.append(start[-1] + len(row))
    flat = [index for row in keys for index in row]
    prefix = torch.full((len(keys),), past, dtype=torch.long)
    return KeyPlan(kernel, prefix, torch.tensor(start, dtype=torch.long), torch.tensor(flat, dtype=torch.long))


def plan_rows(past: int, positions: Sequence[int], visible: torch.Tensor | None) -> RowPlan:
    """The :class:`RowPlan` of a pass (arguments as :func:`pass_keys`)."""
    n = len(positions)
    b_index = torch.empty((n, BLOCK), dtype=torch.long)
    b_visible = torch.zeros((n, BLOCK), dtype=torch.bool)
    groups: dict[int, list[int]] = {}
    gathered: list[PartA] = []
    for j, (p, ancestors) in enumerate(zip(positions, pass_keys(past, positions, visible), strict=True)):
        start = p - p % BLOCK
        stored = [pos if pos < past else ancestors[pos - past] for pos in range(start, p + 1)]
        b_index[j, : len(stored)] = torch.tensor(stored, dtype=torch.long)
        b_index[j, len(stored) :] = past + j
        b_visible[j, : len(stored)] = True
        if start == 0:
            continue
        in_pass = ancestors[: max(0, start - past)]
        if all(index == pos for pos, index in zip(range(past, start), in_pass, strict=True)):
            groups.setdefault(start, []).append(j)
        else:
            index = torch.cat([torch.arange(past), torch.tensor(in_pass, dtype=torch.long)])
            gathered.append(PartA(torch.tensor([j]), start, index))
    shared = tuple(PartA(torch.tensor(rows), length, None) for length, rows in sorted(groups.items()))
    b_mask = torch.zeros((n, 1, 1, BLOCK)).masked_fill_(~b_visible[:, None, None, :], float("-inf"))
    return RowPlan(b_index.reshape(-1), b_mask, shared + tuple(gathered), n)


_flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu


def row_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, plan: RowPlan, scaling: float | None
) -> torch.Tensor:
    """Attention of ``query`` (1, heads, rows, dim) over ``key``/``value`` (1, kv_heads, stored, dim), a
    key/value head serving ``heads // kv_heads`` query heads; returns (1, rows, heads, dim)."""
    _, heads, rows, dim = query.shape
    kv_heads = key.shape[1]
    groups = heads // kv_heads
    slots = -(-groups // ROW_SLOTS) * ROW_SLOTS
    # (kv_heads, rows, slots, dim): a row's query heads of one key/value head, zero-padded to whole slots.
    q = query[0].reshape(kv_heads, groups, rows, dim).transpose(1, 2)
    q = torch.nn.functional.pad(q, (0, 0, 0, slots - groups))
    # Part B: every row at once, one batch entry per row.
    k_b = key[0].index_select(1, plan.b_index).reshape(kv_heads, rows, BLOCK, dim).transpose(0, 1).contiguous()
    v_b = value[0].index_select(1, plan.b_index).reshape(kv_heads, rows, BLOCK, dim).transpose(0, 1).contiguous()
    mask = plan.b_mask.to(query.dtype)  # built once per pass, used by every layer
    out, lse = _flash(
        q.transpose(0, 1).contiguous(),
        k_b,
        v_b,
        0.0,
        False,
        attn_mask=mask.expand(rows, 1, slots, BLOCK),
        scale=scaling,
    )  # (rows, kv_heads, slots, dim), (rows, kv_heads, slots)
    if plan.a_parts:
        out_a = torch.zeros_like(out)
        lse_a = torch.full_like(lse, float("-inf"))
        for part in plan.a_parts:
            # one batch entry per row, as in part B: the kernel's products then have the same shape for a row
            # whatever the pass (BLAS libraries pick their code by shape: MKL's AVX2 path on Intel CPUs rounds a
            # row differently when more rows share the product)
            q_a = q.index_select(1, part.rows).transpose(0, 1).contiguous()
            if part.index is None:
                k_a, v_a = key[:, :, : part.length], value[:, :, : part.length]
            else:
                k_a, v_a = key.index_select(2, part.index), value.index_select(2, part.index)
            shape = (len(part.rows), *k_a.shape[1:])
            o, part_lse = _flash(q_a, k_a.expand(shape), v_a.expand(shape), 0.0, False, scale=scaling)
            out_a[part.rows] = o
            lse_a[part.rows] = part_lse
        weight_a, weight_b = _merge_weights(lse_a, lse)
        out = out_a * weight_a + out * weight_b
    # (rows, kv_heads, slots, dim) -> (1, rows, heads, dim), head = kv_head * groups + g
    return out[:, :, :groups].reshape(1, rows, heads, dim)


def native_row_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, plan: KeyPlan, scaling: float | None
) -> torch.Tensor:
    """:func:`row_attention`'s contract on the native kernel (decoder/row_kernel.cpp): each row's scores,
    softmax and sum over its own keys in position order, one fixed sequence of operations per row."""
    _, heads, rows, dim = query.shape
    scale = dim**-0.5 if scaling is None else scaling
    keys = (plan.prefix, plan.start, plan.extra)
    out = plan.kernel.attention(query[0].transpose(0, 1), key[0], value[0], keys, scale)
    return out.reshape(1, rows, heads, dim)


def _merge_weights(lse_a: torch.Tensor, lse_b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The weights of parts A and B from their log-sum-exps (rows, kv_heads, slots), each (..., 1).

    ATen computes ``exp`` in vector lanes over the bulk of a tensor and with a scalar routine over its last few
    elements, and the two differ in the last bit; so each row's values are laid out on whole multiples of
    :data:`_LANES` (zero-padded), where a row always takes the vector path, however many rows the pass has."""
    rows = lse_a.shape[0]
    per_row = lse_a[0].numel()
    padded = -(-per_row // _LANES) * _LANES
    a = torch.nn.functional.pad(lse_a.reshape(rows, per_row), (0, padded - per_row))
    b = torch.nn.functional.pad(lse_b.reshape(rows, per_row), (0, padded - per_row))
    both = torch.logaddexp(a, b)
    weights = torch.stack([torch.exp(a - both), torch.exp(b - both)])[:, :, :per_row]
    return weights[0].reshape(*lse_a.shape, 1), weights[1].reshape(*lse_a.shape, 1)


_LANES = 32  # elements per step of ATen's vectorized elementwise loops (two AVX-512 registers of float32)
