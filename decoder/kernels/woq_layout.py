"""kernels: the GGUF's own codes laid out as the native kernel reads them (decoder/kernels/woq_kernel.cpp).

A weight is stored (:func:`woq_state`) as its integer codes in the narrowest layout that holds them (4-bit
nibbles, nibbles plus a mask of fifth bits, or bytes: 0.5, 0.625 or 1 byte a weight) with one scale per 32
weights (float16 where that is exact, as for every GGUF format with a float16 block scale, else float32) and
either one offset per 32 weights or one zero code for the whole matrix (``offset = -zero * scale``: the
symmetric formats). Q6_K keeps its own form (:class:`SixBitGroups`, layout :data:`SIX_BIT_LAYOUT`): 6-bit codes
as a nibble plane and a plane of 2-bit pairs, a float16 per 256 weights and a signed byte per 16, 6.5625 bits a
weight as in the GGUF. A layer holds it as the kernel reads it (:class:`WoqWeight`): tiles of 8 rows, group by
group, each group's 8 scales and offsets next to its codes interleaved four by four, so that one integer dot
serves 8 rows and a wide pass decodes each weight once; for an AVX-512 build's two-tile loop the tiles lie two by
two, group by group (:attr:`WoqWeight.paired`), so that the loop reads one stream. The kernel multiplies the exact
codes by activations quantized to int8 per 32 (as llama.cpp) and applies each group's scale and offset in float32.

:func:`woq_state` and :func:`groups_from_state` convert between the groups and the stored tensors, so that one
cached state serves both kernels."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from lookahead_lsp.decoder.weights.gguf_blocks import GROUP, AffineGroups, SixBitGroups

LAYOUTS = (4, 5, 8)
"""The kernel's layouts of affine groups, each named by the code bits it holds: nibbles, nibbles + a fifth-bit
mask, bytes."""
SIX_BIT_LAYOUT = 6
"""Q6_K's layout: nibbles + a plane of 2-bit pairs, with its own scales (scale mode ``sub-scales``)."""


def layout_for(bits: int) -> int:
    """The kernel layout that holds ``bits``-bit codes (ValueError beyond 8)."""
    for layout in LAYOUTS:
        if bits <= layout:
            return layout
    raise ValueError(f"{bits}-bit codes do not fit the native kernel's layouts")


def pack_codes(codes: np.ndarray, bits: int, layout: int | None = None) -> torch.Tensor:
    """Codes (rows, cols) as the kernel's bytes (in ``layout``, by default the narrowest affine one), group by
    group: nibbles in ggml's order (byte j holds codes j and j + 16), then for 5-bit codes a little-endian 32-bit
    mask of the groups' fifth bits, for Q6_K's layout 8 bytes of high pairs (byte j: codes j, j + 8, j + 16,
    j + 24 from bit 0 up)."""
    layout = layout_for(bits) if layout is None else layout
    rows, cols = codes.shape
    grouped = codes.reshape(rows, cols // GROUP, GROUP).astype(np.uint8)
    if layout == 8:
        return torch.from_numpy(np.ascontiguousarray(grouped).reshape(rows, -1))
    nibbles = (grouped[..., :16] & 0x0F) | ((grouped[..., 16:] & 0x0F) << 4)
    if layout == 4:
        return torch.from_numpy(np.ascontiguousarray(nibbles).reshape(rows, -1))
    if layout == SIX_BIT_LAYOUT:
        pairs = (grouped >> 4).reshape(rows, cols // GROUP, 4, 8) << (2 * np.arange(4, dtype=np.uint8))[:, None]
        high = pairs.sum(axis=-2, dtype=np.uint8)
        return torch.from_numpy(np.ascontiguousarray(np.concatenate([nibbles, high], axis=-1)).reshape(rows, -1))
    fifth = ((grouped >> 4) & 1).astype(np.uint32) << np.arange(GROUP, dtype=np.uint32)
    mask = fifth.sum(axis=-1, dtype=np.uint32).astype("<u4").view(np.uint8).reshape(rows, cols // GROUP, 4)
    return torch.from_numpy(np.ascontiguousarray(np.concatenate([nibbles, mask], axis=-1)).reshape(rows, -1))


def unpack_codes(packed: torch.Tensor, layout: int, cols: int) -> np.ndarray:
    """The inverse of :func:`pack_codes`: codes (rows, cols) as uint8."""
    data = packed.numpy()
    rows, groups = data.shape[0], cols // GROUP
    if layout == 8:
        return data.reshape(rows, cols).copy()
    blocks = data.reshape(rows, groups, -1)
    nibbles = blocks[..., :16]
    codes = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=-1)
    if layout == 5:
        mask = np.ascontiguousarray(blocks[..., 16:20]).view("<u4")[..., 0]
        codes = codes | ((((mask[..., None] >> np.arange(GROUP, dtype=np.uint32)) & 1) << 4).astype(np.uint8))
    elif layout == SIX_BIT_LAYOUT:
        pairs = blocks[..., None, 16:24] >> (2 * np.arange(4, dtype=np.uint8))[:, None]  # (rows, groups, 4, 8)
        codes = codes | ((pairs & 3) << 4).reshape(rows, groups, GROUP)
    return codes.reshape(rows, cols)


def _narrowest(values: np.ndarray) -> torch.Tensor:
    """float16 where every value survives the round trip exactly, else float32."""
    half = values.astype(np.float16)
    exact = np.array_equal(half.astype(np.float32), values) and bool(np.isfinite(half).all())
    return torch.from_numpy(half if exact else values.astype(np.float32))


def woq_state(groups: AffineGroups | SixBitGroups) -> dict[str, torch.Tensor]:
    """The stored tensors of one weight: ``codes``, ``scale``, ``layout`` and ``cols`` (int64 scalars), and
    either ``offset`` or ``zero`` (a float32 scalar: every offset is ``-zero * scale``, computed so in float32);
    for a K-quant, ``scale`` and ``offset`` per super-block (float16) with ``scale_sub`` and ``offset_sub``;
    for Q6_K (layout 6), ``scale`` per super-block (float16) and ``scale_sub`` (int8, one per 16 weights)."""
    if isinstance(groups, SixBitGroups):
        return {
            "codes": pack_codes(groups.codes, groups.bits, SIX_BIT_LAYOUT),
            "layout": torch.tensor(SIX_BIT_LAYOUT),
            "cols": torch.tensor(groups.shape[1]),
            "scale": torch.from_numpy(groups.d.astype(np.float16)),
            "scale_sub": torch.from_numpy(np.ascontiguousarray(groups.sub, dtype=np.int8)),
        }
    scale = groups.scale.astype(np.float32)
    state = {
        "codes": pack_codes(groups.codes, groups.bits),
        "layout": torch.tensor(layout_for(groups.bits)),
        "cols": torch.tensor(groups.shape[1]),
    }
    if groups.levels is not None:
        levels = groups.levels
        state["scale"] = torch.from_numpy(levels.scale_super.astype(np.float16))
        state["offset"] = torch.from_numpy(levels.offset_super.astype(np.float16))
        state["scale_sub"] = torch.from_numpy(np.ascontiguousarray(levels.scale_sub, dtype=np.uint8))
        state["offset_sub"] = torch.from_numpy(np.ascontiguousarray(levels.offset_sub, dtype=np.uint8))
        return state
    ratios = np.unique(-groups.offset[scale != 0] / scale[scale != 0])
    zero = np.float32(ratios[0]) if ratios.size == 1 else None
    if zero is not None and np.array_equal(-zero * scale, groups.offset.astype(np.float32)):
        state["zero"] = torch.tensor(float(zero))
        state["scale"] = _narrowest(scale)
        return state
    both = _narrowest(np.stack([scale, groups.offset.astype(np.float32)]))
    state["scale"], state["offset"] = both[0].contiguous(), both[1].contiguous()
    return state


def groups_from_state(state: dict[str, torch.Tensor]) -> AffineGroups | SixBitGroups:
    """The groups a :func:`woq_state` holds (for ATen's int4 planes where the kernel is missing)."""
    layout, cols = int(state["layout"]), int(state["cols"])
    if layout == SIX_BIT_LAYOUT:
        codes = unpack_codes(state["codes"], layout, cols)
        return SixBitGroups(codes, state["scale"].float().numpy(), state["scale_sub"].numpy().copy())
    scale = state["scale"].float().numpy()
    offset = state["offset"].float().numpy() if "offset" in state else -np.float32(state["zero"]) * scale
    if "scale_sub" in state:  # a K-quant's two levels: the products are exact in float32
        per = cols // GROUP // scale.shape[1]
        scale = np.repeat(scale, per, axis=1) * state["scale_sub"].numpy().astype(np.float32)
        offset = np.repeat(offset, per, axis=1) * state["offset_sub"].numpy().astype(np.float32)
    codes = unpack_codes(state["codes"], layout, cols)
    return AffineGroups(codes, scale, offset.astype(np.float32), layout)  # a layout is named by its code bits


SCALE_MODES = {"half-zero": 0, "half-pair": 1, "float-pair": 2, "k-quant": 3, "sub-scales": 4}
"""How a tile-group keeps its 8 rows' scales and offsets (decoder/woq_kernel.cpp's ``Scales``): float16
scales with ``offset = -zero * scale``; float16 scales and offsets; float32 both; a K-quant's float16 super-block
values with the group's 6-bit integers (packed: low nibbles, then high pairs) and one row's float16 d and -dmin
(the 8 rows' in the super-block's 8 tile-groups: the GGUF's own bytes); Q6_K's two signed bytes a row (one per 16
weights) and one row's float16 super-block value (as the K-quants')."""
SCALE_BYTES = (16, 32, 64, 16, 18)
CODE_BYTES = {4: 128, 5: 160, SIX_BIT_LAYOUT: 192, 8: 256}
LANES = 8  # weight rows in a tile
SLAB = 4096  # rows tiled at a time: the temporary copies stay small for the largest matrix (the output head)


def _tile_codes(codes: np.ndarray, layout: int) -> np.ndarray:
    """Codes (8 t, cols) as the kernel's tile-groups (t, groups, code bytes): chunk k of a group is 32 bytes,
    byte 4j+b holding code 4k+b of row j; nibbles: chunks k and k + 4 in one byte (low, high); 5-bit codes:
    then 32 bytes whose bit k of byte 4j+b is the fifth bit of chunk k's code; 6-bit codes: then two 32-byte
    vectors whose byte 4j+b holds chunk k's high pair at bits 2 (k % 4) of vector k // 4."""
    tiles, groups = codes.shape[0] // LANES, codes.shape[1] // GROUP
    chunks = codes.reshape(tiles, LANES, groups, 8, 4).transpose(0, 2, 3, 1, 4)  # (t, g, k, j, b)
    if layout == 8:
        return np.ascontiguousarray(chunks).reshape(tiles, groups, -1)
    nibbles = chunks & 0x0F
    packed = (nibbles[:, :, :4] | (nibbles[:, :, 4:] << 4)).reshape(tiles, groups, -1)
    if layout == 4:
        return np.ascontiguousarray(packed)
    if layout == SIX_BIT_LAYOUT:
        shifts = (2 * np.arange(4, dtype=np.uint8))[:, None, None]  # chunk 4v + i's pair at bits 2i of vector v
        pairs = (chunks >> 4).reshape(tiles, groups, 2, 4, LANES, 4) << shifts
        return np.concatenate([packed, pairs.sum(axis=3, dtype=np.uint8).reshape(tiles, groups, -1)], axis=-1)
    fifth = (((chunks >> 4) & 1) << np.arange(8, dtype=np.uint8)[:, None, None]).sum(axis=2, dtype=np.uint8)
    return np.concatenate([packed, fifth.reshape(tiles, groups, -1)], axis=-1)


def _rows(values: np.ndarray, dtype: type) -> np.ndarray:
    """(8 t, groups) values as (t, groups, 8 * itemsize) bytes: the tile's 8 rows side by side per group."""
    tiles, groups = values.shape[0] // LANES, values.shape[1]
    lanes: np.ndarray = values.astype(dtype).reshape(tiles, LANES, groups).transpose(0, 2, 1)
    return np.ascontiguousarray(lanes).view(np.uint8).reshape(tiles, groups, -1)


def _scale_mode(state: dict[str, torch.Tensor]) -> int:
    if int(state["layout"]) == SIX_BIT_LAYOUT:
        return SCALE_MODES["sub-scales"]
    if "scale_sub" in state:
        return SCALE_MODES["k-quant"]
    if state["scale"].dtype != torch.float16:
        return SCALE_MODES["float-pair"]
    return SCALE_MODES["half-pair" if "offset" in state else "half-zero"]


def _spread_supers(values: np.ndarray, groups: int) -> np.ndarray:
    """Per-super-block float16 values (rows, supers) as each tile-group's 2 bytes (t, groups, 2): tile-group g
    holds row g % 8's value of its super-block g // 8, so the 8 rows' lie in the super-block's 8 tile-groups."""
    supers = values.shape[1]
    spread = _padded(values).astype(np.float16).reshape(-1, LANES, supers).transpose(0, 2, 1)  # (t, supers, 8)
    return np.ascontiguousarray(spread).reshape(-1, groups, 1).view(np.uint8)


def _high_pairs(subs: np.ndarray) -> np.ndarray:
    """6-bit integers (8 t, groups) as each tile-group's 2 bytes of their high pairs, row j's at bits 2j."""
    pairs = ((subs >> 4) & 3).astype(np.uint16).reshape(-1, LANES, subs.shape[1]).transpose(0, 2, 1)
    return (pairs << (2 * np.arange(LANES, dtype=np.uint16))).sum(axis=-1, dtype=np.uint16)[..., None].view(np.uint8)


def _tile_scales(state: dict[str, torch.Tensor], mode: int, rows: slice, groups: int) -> np.ndarray:
    """The tile-groups' scale bytes of ``rows`` (a whole number of tiles, padded with zeros) of a stored weight."""
    scale = state["scale"][rows].numpy()
    if mode == SCALE_MODES["sub-scales"]:
        sub = _padded(state["scale_sub"][rows].numpy())  # (8 t, 2 groups): the halves of group g at 2g, 2g + 1
        halves = [_rows(sub[:, 0::2], np.int8), _rows(sub[:, 1::2], np.int8)]
        return np.concatenate([*halves, _spread_supers(scale, groups)], axis=-1)
    if mode == SCALE_MODES["k-quant"]:
        sub, low = (_padded(state[name][rows].numpy()) for name in ("scale_sub", "offset_sub"))
        nibbles = _rows((sub & 0x0F) | ((low & 0x0F) << 4), np.uint8)
        supers = [_spread_supers(state[name][rows].numpy(), groups) for name in ("scale", "offset")]
        return np.concatenate([nibbles, _high_pairs(sub), _high_pairs(low), *supers], axis=-1)
    if mode == SCALE_MODES["half-zero"]:
        return _rows(_padded(scale), np.float16)
    if "offset" in state:
        offset = state["offset"][rows].numpy()
    else:  # as the kernel computes it: -zero * scale in float32
        offset = np.float32(-float(state["zero"])) * scale.astype(np.float32)
    dtype = np.float16 if mode == SCALE_MODES["half-pair"] else np.float32
    return np.concatenate([_rows(_padded(scale), dtype), _rows(_padded(offset), dtype)], axis=-1)


def _padded(values: np.ndarray) -> np.ndarray:
    """``values`` with zero rows added up to a whole number of tiles."""
    extra = -values.shape[0] % LANES
    return values if extra == 0 else np.concatenate([values, np.zeros((extra, *values.shape[1:]), values.dtype)])


@dataclass(frozen=True)
class WoqWeight:
    """One weight as the kernel reads it: ``tiles`` (uint8) holds, tile of 8 rows by tile, group by group, each
    tile-group's scales (``mode``: one of :data:`SCALE_MODES`) then its codes (``layout``), as decoder/woq_kernel.cpp
    describes; ``zero`` gives the offsets of the half-zero mode. ``paired``: tiles 2i and 2i + 1 interleaved group
    by group instead (tile 2i's group g, tile 2i + 1's, then group g + 1 of each; an odd last tile after them on
    its own), the order an AVX-512 build's two-tile loop reads as one stream (woq_kernel.cpp: tile_at)."""

    tiles: torch.Tensor
    layout: int
    mode: int
    zero: float
    rows: int
    groups: int
    paired: bool = False

    @classmethod
    def of(cls, state: dict[str, torch.Tensor], paired: bool = False) -> WoqWeight:
        """The tiles of a :func:`woq_state` (made now, :data:`SLAB` rows at a time), in pairs where ``paired``."""
        layout, cols, rows = int(state["layout"]), int(state["cols"]), int(state["scale"].shape[0])
        groups, mode = cols // GROUP, _scale_mode(state)
        block = SCALE_BYTES[mode] + CODE_BYTES[layout]
        count = (rows + LANES - 1) // LANES
        tiles = np.empty((count, groups, block), dtype=np.uint8)
        pairs = count // 2 * 2 if paired else 0
        in_pairs = tiles.reshape(-1)[: pairs * groups * block].reshape(pairs // 2, groups, 2, block)
        for first in range(0, rows, SLAB):  # SLAB rows: whole pairs of tiles
            part = slice(first, min(rows, first + SLAB))
            codes = _padded(unpack_codes(state["codes"][part], layout, cols))
            t0, t1 = first // LANES, first // LANES + codes.shape[0] // LANES
            split = min(max(pairs, t0), t1)  # the slab's tiles below `split` go into pairs, the rest as they are
            made = tiles[t0:t1] if split == t0 else np.empty((t1 - t0, groups, block), dtype=np.uint8)
            made[:, :, : SCALE_BYTES[mode]] = _tile_scales(state, mode, part, groups)
            made[:, :, SCALE_BYTES[mode] :] = _tile_codes(codes, layout)
            if split > t0:
                in_pairs[t0 // 2 : split // 2] = made[: split - t0].reshape(-1, 2, groups, block).transpose(0, 2, 1, 3)
                tiles[split:t1] = made[split - t0 :]
        zero = float(state["zero"]) if "zero" in state else 0.0
        return cls(torch.from_numpy(tiles.reshape(-1)), layout, mode, zero, rows, groups, paired)


class WoqJob(ctypes.Structure):
    """One weight of a product as decoder/woq_kernel.cpp's ``Job`` holds it (same fields, same order)."""

    _fields_ = [
        ("tiles", ctypes.c_void_p),
        ("bias", ctypes.c_void_p),
        ("layout", ctypes.c_int64),
        ("mode", ctypes.c_int64),
        ("rows", ctypes.c_int64),
        ("groups", ctypes.c_int64),
        ("column", ctypes.c_int64),
        ("paired", ctypes.c_int64),
        ("zero", ctypes.c_float),
    ]


def fill_job(job: WoqJob, weight: WoqWeight, bias: torch.Tensor | None, column: int = 0) -> None:
    """``job`` describes ``weight`` (and its bias) with its results at output column ``column``."""
    job.tiles, job.bias = weight.tiles.data_ptr(), None if bias is None else bias.data_ptr()
    job.layout, job.mode, job.rows, job.groups = weight.layout, weight.mode, weight.rows, weight.groups
    job.column, job.paired, job.zero = column, int(weight.paired), weight.zero


@dataclass(frozen=True)
class WoqProduct:
    """Weights that multiply the same input, side by side in one output (q, k and v; gate and up): one kernel
    call prepares the input once and shares all their rows out among the threads. Holds its tensors, so the
    pointers in ``jobs`` stay valid while it lives."""

    weights: tuple[tuple[WoqWeight, torch.Tensor | None], ...]
    jobs: ctypes.Array[WoqJob]
    cols: int  # the input's width
    rows: int  # the output's width: every weight's rows

    @classmethod
    def of(cls, weights: Sequence[tuple[WoqWeight, torch.Tensor | None]]) -> WoqProduct:
        """The product of ``(weight, bias or None)`` pairs, outputs in that order (ValueError: widths differ)."""
        if len({w.groups for w, _ in weights}) != 1:
            raise ValueError("the weights of one product take inputs of one width")
        jobs = (WoqJob * len(weights))()
        column = 0
        for job, (weight, bias) in zip(jobs, weights, strict=True):
            fill_job(job, weight, bias, column)
            column += weight.rows
        return cls(tuple(weights), jobs, weights[0][0].groups * GROUP, column)

    @property
    def nbytes(self) -> int:
        """The bytes one pass reads of this product's weights: their tiles and biases."""
        tensors = [t for weight, bias in self.weights for t in (weight.tiles, bias) if t is not None]
        return sum(t.numel() * t.element_size() for t in tensors)
