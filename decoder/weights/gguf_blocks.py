"""weights: a GGUF's block-quantized weights as integer codes with group-wise affine scales (no float copy).

llama.cpp stores most weight matrices in blocks of 32 (or super-blocks of 256 with 32-element sub-blocks) where
every weight is ``scale * code + offset`` with a small unsigned integer ``code`` and one ``scale`` and
``offset`` per 32 weights along a row. This module reads those blocks (with the ``gguf`` package's memory-mapped
reader) into :class:`AffineGroups`: ``codes`` (uint8, one per weight), ``scale`` and ``offset`` (float32, one
per group of 32), so that ``codes * scale + offset`` is exactly the float32 weight that transformers'
GGUF loader produces (``gguf.quants.dequantize``). Formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (32-element blocks)
and Q4_K, Q5_K (32-element sub-blocks). Q6_K has a signed scale per 16 weights, which groups of 32 cannot hold:
:func:`read_blocks` reads it into :class:`SixBitGroups` (its own codes and both levels of its scales, exactly).
Others (F16, ...) return None: the caller keeps them as dense floats.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GROUP = 32  # weights per scale/offset pair in every format read here


@dataclass(frozen=True)
class SuperBlocks:
    """K-quant scales in their own two levels: ``scale = scale_super[n, g // 8] * scale_sub[n, g]`` and
    ``offset = offset_super[n, g // 8] * offset_sub[n, g]``, a float16 per 256 weights times a 6-bit integer per
    32 (every product exact in float32): 0.08 bytes a weight instead of 0.25 for two float32 per group."""

    scale_super: np.ndarray  # float32 holding float16 values (rows, cols // 256)
    scale_sub: np.ndarray  # uint8 (rows, cols // 32)
    offset_super: np.ndarray
    offset_sub: np.ndarray


SUB_PER_SUPER = 8  # groups of 32 per super-block of 256


@dataclass(frozen=True)
class AffineGroups:
    """``weight[n, k] = codes[n, k] * scale[n, k // 32] + offset[n, k // 32]``, codes in ``0 .. 2**bits - 1``;
    for a K-quant also the two levels its scales and offsets are made of."""

    codes: np.ndarray  # uint8 (rows, cols)
    scale: np.ndarray  # float32 (rows, cols // 32)
    offset: np.ndarray  # float32 (rows, cols // 32)
    bits: int
    levels: SuperBlocks | None = None

    @property
    def shape(self) -> tuple[int, int]:
        rows, cols = self.codes.shape
        return int(rows), int(cols)

    def dequantize(self) -> np.ndarray:
        """The float32 weight matrix."""
        rows, cols = self.shape
        codes = self.codes.reshape(rows, cols // GROUP, GROUP).astype(np.float32)
        return (codes * self.scale[..., None] + self.offset[..., None]).reshape(rows, cols)


SIX_BIT_SUB = 16  # Q6_K's weights per signed sub-block scale
SIX_BIT_ZERO = 32  # Q6_K's code of weight 0


@dataclass(frozen=True)
class SixBitGroups:
    """Q6_K's blocks as they are: ``weight[n, k] = d[n, k // 256] * sub[n, k // 16] * (codes[n, k] - 32)``, 6-bit
    codes, a float16 per 256 weights and a signed 8-bit scale per 16 (6.5625 bits a weight, as the GGUF). Every
    product is exact in float32 (11 + 7 + 5 significant bits), so :meth:`dequantize` is the GGUF's own value."""

    codes: np.ndarray  # uint8 (rows, cols), 0 .. 63
    d: np.ndarray  # float32 holding float16 values (rows, cols // 256)
    sub: np.ndarray  # int8 (rows, cols // 16)
    bits: int = 6

    @property
    def shape(self) -> tuple[int, int]:
        rows, cols = self.codes.shape
        return int(rows), int(cols)

    def scales(self) -> np.ndarray:
        """``d * sub`` per 16 weights (rows, cols // 16), float32 (exact)."""
        per = self.sub.shape[1] // self.d.shape[1]
        return np.repeat(self.d, per, axis=1) * self.sub.astype(np.float32)

    def dequantize(self) -> np.ndarray:
        """The float32 weight matrix, as ``gguf.quants.dequantize`` computes it: ``(d * sub) * (code - 32)``."""
        rows, cols = self.shape
        centred = self.codes.reshape(rows, -1, SIX_BIT_SUB).astype(np.float32) - np.float32(SIX_BIT_ZERO)
        return (self.scales()[..., None] * centred).reshape(rows, cols)


def _f16(column: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(column).view(np.float16).astype(np.float32)[..., 0]


def _low_high_nibbles(packed: np.ndarray) -> np.ndarray:
    """16 bytes per block -> 32 codes: the low nibbles are codes 0..15, the high nibbles 16..31 (ggml order)."""
    return np.concatenate([packed & 0x0F, packed >> 4], axis=-1)


Read = tuple[np.ndarray, np.ndarray, np.ndarray, int]
"""codes, scale, offset (flat, one per group), bits"""


def _q4_0(blocks: np.ndarray) -> Read:
    d = _f16(blocks[:, 0:2])
    return _low_high_nibbles(blocks[:, 2:18]), d, -8.0 * d, 4


def _q4_1(blocks: np.ndarray) -> Read:
    return _low_high_nibbles(blocks[:, 4:20]), _f16(blocks[:, 0:2]), _f16(blocks[:, 2:4]), 4


def _fifth_bits(qh: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(qh).view(np.uint32)[:, 0:1] >> np.arange(32, dtype=np.uint32)
    return ((bits & 1) << 4).astype(np.uint8)


def _q5_0(blocks: np.ndarray) -> Read:
    d = _f16(blocks[:, 0:2])
    codes = _low_high_nibbles(blocks[:, 6:22]) | _fifth_bits(blocks[:, 2:6])
    return codes, d, -16.0 * d, 5


def _q5_1(blocks: np.ndarray) -> Read:
    codes = _low_high_nibbles(blocks[:, 8:24]) | _fifth_bits(blocks[:, 4:8])
    return codes, _f16(blocks[:, 0:2]), _f16(blocks[:, 2:4]), 5


def _q8_0(blocks: np.ndarray) -> Read:
    d = _f16(blocks[:, 0:2])
    codes = (blocks[:, 2:34].view(np.int8).astype(np.int16) + 128).astype(np.uint8)
    return codes, d, -128.0 * d, 8


def _q4_k_levels(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """d, dmin (one per super-block) and the 6-bit sub-block scales and mins (8 per super-block)."""
    n = blocks.shape[0]
    d, dmin = _f16(blocks[:, 0:2]), _f16(blocks[:, 2:4])
    packed = blocks[:, 4:16].reshape(n, 3, 4)
    lo, mid, top = packed[:, 0], packed[:, 1], packed[:, 2]
    sc = np.concatenate([lo & 0x3F, (top & 0x0F) | ((lo >> 2) & 0x30)], axis=-1)
    mn = np.concatenate([mid & 0x3F, (top >> 4) | ((mid >> 2) & 0x30)], axis=-1)
    return d, sc, dmin, mn


def _k_nibbles(packed: np.ndarray) -> np.ndarray:
    """A K-quant's 128 bytes of nibbles per super-block -> its 8 sub-blocks' 32 codes (n * 8, 32): 4 chunks of 32
    bytes, the low nibbles sub-block 2c, the high nibbles sub-block 2c + 1."""
    qs = packed.reshape(-1, 4, 1, 32) >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)
    return (qs & 0x0F).reshape(-1, 32)


def _k_affine(blocks: np.ndarray, codes: np.ndarray, bits: int) -> Read:
    """A Q4_K or Q5_K super-block's groups: ``scale = d * sc``, ``offset = -(dmin * m)`` (exact in float32)."""
    n = blocks.shape[0]
    d, sc8, dmin, mn8 = _q4_k_levels(blocks)
    scale = (d[:, None] * sc8.astype(np.float32)).reshape(n * 8)
    offset = (-(dmin[:, None] * mn8.astype(np.float32))).reshape(n * 8)
    return codes, scale, offset, bits


def _q4_k(blocks: np.ndarray) -> Read:
    """Super-blocks of 256: d, dmin (fp16), 12 bytes of 6-bit sub-block scales and mins, 128 bytes of nibbles."""
    return _k_affine(blocks, _k_nibbles(blocks[:, 16:144]), 4)


def _q5_k(blocks: np.ndarray) -> Read:
    """Q4_K's super-block with 32 bytes of fifth bits before the nibbles: bit s of byte i is the fifth bit of
    code i of sub-block s."""
    n = blocks.shape[0]
    fifth = (blocks[:, 16:48].reshape(n, 1, 32) >> np.arange(8, dtype=np.uint8).reshape(1, 8, 1)) & 1
    return _k_affine(blocks, _k_nibbles(blocks[:, 48:176]) | (fifth.reshape(n * 8, 32) << 4), 5)


_READERS = {"Q4_0": (_q4_0, 18, 32), "Q4_1": (_q4_1, 20, 32), "Q5_0": (_q5_0, 22, 32), "Q5_1": (_q5_1, 24, 32),
            "Q8_0": (_q8_0, 34, 32), "Q4_K": (_q4_k, 144, 256), "Q5_K": (_q5_k, 176, 256)}  # fmt: skip
"""format name -> (reader, bytes per block, weights per block)"""
K_QUANTS = ("Q4_K", "Q5_K")  # the formats whose groups keep their super-blocks' two levels (:class:`SuperBlocks`)


def supported(type_name: str) -> bool:
    """Whether :func:`read_blocks` reads tensors of this GGUF type (e.g. ``"Q5_0"``, ``"Q6_K"``)."""
    return type_name in _READERS or type_name == "Q6_K"


def block_bytes(type_name: str) -> int:
    """Bytes of one block of an affine format :func:`read_affine` reads, as the GGUF stores it."""
    return _READERS[type_name][1]


def read_affine(raw: np.ndarray, type_name: str, rows: int, cols: int) -> AffineGroups | None:
    """The affine groups of one tensor's raw blocks (``GGUFReader``'s ``tensor.data``: uint8, one row of
    blocks per weight row), or None for a format not read here."""
    if type_name not in _READERS:
        return None
    reader, block_bytes, block_weights = _READERS[type_name]
    if cols % block_weights:
        raise ValueError(f"{type_name} tensor with {cols} columns: not a whole number of blocks")
    blocks = np.ascontiguousarray(raw, dtype=np.uint8).reshape(rows * cols // block_weights, block_bytes)
    codes, scale, offset, bits = reader(blocks)
    groups = cols // GROUP
    levels = None
    if type_name in K_QUANTS:
        d, sc, dmin, mn = _q4_k_levels(blocks)
        supers = cols // (GROUP * SUB_PER_SUPER)
        levels = SuperBlocks(
            d.reshape(rows, supers), sc.reshape(rows, groups), -dmin.reshape(rows, supers), mn.reshape(rows, groups)
        )
    return AffineGroups(
        codes.reshape(rows, cols).astype(np.uint8, copy=False),
        scale.reshape(rows, groups).astype(np.float32, copy=False),
        offset.reshape(rows, groups).astype(np.float32, copy=False),
        bits,
        levels,
    )


def _q6_k(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Super-blocks of 256: 128 bytes of low nibbles, 64 of high 2-bit pairs, 16 signed sub-block scales, d (fp16);
    in each half of 128 codes, code r's low nibble is byte r % 64 shifted by 4 (r // 64) and its high pair byte
    r % 32 shifted by 2 (r // 32) (ggml's order). Returns codes (n, 256), d (n,), sub (n, 16)."""
    n = blocks.shape[0]
    low = blocks[:, :128].reshape(n, 2, 1, 64) >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)
    high = blocks[:, 128:192].reshape(n, 2, 1, 32) >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 4, 1)
    codes = (low & 0x0F).reshape(n, 256) | ((high & 0x03).reshape(n, 256) << 4)
    return codes, _f16(blocks[:, 208:210]), blocks[:, 192:208].view(np.int8)


def read_blocks(raw: np.ndarray, type_name: str, rows: int, cols: int) -> AffineGroups | SixBitGroups | None:
    """One tensor's raw blocks as :func:`read_affine` reads them, Q6_K's as :class:`SixBitGroups`; None for a
    format read neither way."""
    if type_name != "Q6_K":
        return read_affine(raw, type_name, rows, cols)
    if cols % 256:
        raise ValueError(f"Q6_K tensor with {cols} columns: not a whole number of blocks")
    codes, d, sub = _q6_k(np.ascontiguousarray(raw, dtype=np.uint8).reshape(rows * cols // 256, 210))
    return SixBitGroups(
        codes.reshape(rows, cols), d.reshape(rows, cols // 256), np.ascontiguousarray(sub).reshape(rows, cols // 16)
    )
