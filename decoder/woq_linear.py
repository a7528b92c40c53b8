"""Linear layers on the GGUF's own codes through the native kernel (decoder/woq_kernel.cpp).

A weight is kept as its integer codes in the narrowest layout that holds them (4-bit nibbles, nibbles plus a
mask of fifth bits, or bytes: 0.5, 0.625 or 1 byte a weight) with one scale per 32 weights (float16 where that
is exact, as for every GGUF format with a float16 block scale, else float32) and either one offset per 32
weights or one zero code for the whole matrix (``offset = -zero * scale``: the symmetric formats). The kernel
dequantizes every weight exactly (``code * scale + offset`` in float32) once per pass and multiplies float32
activations: the layer computes the GGUF's own weights at float32 precision, with no rounding of scales or
activations to bfloat16 (ATen's int4 kernel, decoder/packed_linear.py, rounds both).

:func:`woq_state` and :func:`groups_from_state` convert between :class:`AffineGroups` and the stored tensors,
so that one cached state serves both kernels.
"""

from __future__ import annotations

import ctypes
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from lookahead_lsp.decoder.gguf_blocks import GROUP, AffineGroups

if TYPE_CHECKING:
    from lookahead_lsp.decoder.woq_native import WoqKernel

LAYOUTS = (4, 5, 8)
"""The kernel's layouts, each named by the code bits it holds: nibbles, nibbles + a fifth-bit mask, bytes."""


def layout_for(bits: int) -> int:
    """The kernel layout that holds ``bits``-bit codes (ValueError beyond 8)."""
    for layout in LAYOUTS:
        if bits <= layout:
            return layout
    raise ValueError(f"{bits}-bit codes do not fit the native kernel's layouts")


def pack_codes(codes: np.ndarray, bits: int) -> torch.Tensor:
    """Codes (rows, cols) as the kernel's bytes, group by group: nibbles in ggml's order (byte j holds codes j
    and j + 16), then for 5-bit codes a little-endian 32-bit mask of the groups' fifth bits."""
    layout = layout_for(bits)
    rows, cols = codes.shape
    grouped = codes.reshape(rows, cols // GROUP, GROUP).astype(np.uint8)
    if layout == 8:
        return torch.from_numpy(np.ascontiguousarray(grouped).reshape(rows, -1))
    nibbles = (grouped[..., :16] & 0x0F) | ((grouped[..., 16:] & 0x0F) << 4)
    if layout == 4:
        return torch.from_numpy(np.ascontiguousarray(nibbles).reshape(rows, -1))
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
    return codes.reshape(rows, cols)


def _narrowest(values: np.ndarray) -> torch.Tensor:
    """float16 where every value survives the round trip exactly, else float32."""
    half = values.astype(np.float16)
    exact = np.array_equal(half.astype(np.float32), values) and bool(np.isfinite(half).all())
    return torch.from_numpy(half if exact else values.astype(np.float32))


def woq_state(groups: AffineGroups) -> dict[str, torch.Tensor]:
    """The stored tensors of one weight: ``codes``, ``scale``, ``layout`` and ``cols`` (int64 scalars), and
    either ``offset`` or ``zero`` (a float32 scalar: every offset is ``-zero * scale``, computed so in float32);
    for a K-quant, ``scale`` and ``offset`` per super-block (float16) with ``scale_sub`` and ``offset_sub``."""
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


def groups_from_state(state: dict[str, torch.Tensor]) -> AffineGroups:
    """The :class:`AffineGroups` a :func:`woq_state` holds (for ATen's int4 planes where the kernel is missing)."""
    layout, cols = int(state["layout"]), int(state["cols"])
    scale = state["scale"].float().numpy()
    offset = state["offset"].float().numpy() if "offset" in state else -np.float32(state["zero"]) * scale
    if "scale_sub" in state:  # a K-quant's two levels: the products are exact in float32
        per = cols // GROUP // scale.shape[1]
        scale = np.repeat(scale, per, axis=1) * state["scale_sub"].numpy().astype(np.float32)
        offset = np.repeat(offset, per, axis=1) * state["offset_sub"].numpy().astype(np.float32)
    codes = unpack_codes(state["codes"], layout, cols)
    return AffineGroups(codes, scale, offset.astype(np.float32), layout)  # a layout is named by its code bits


@dataclass(frozen=True)
class WoqWeight:
    """One weight as the kernel reads it (:func:`woq_state` stores it): ``codes`` in ``layout``, ``scale``
    (rows, cols / 32) float16 or float32, ``offset`` like it or None (``offset = -zero * scale``); for a K-quant
    ``subs`` = its uint8 sub-block scales and offsets (rows, cols / 32), ``scale``/``offset`` then float16 per
    super-block of 256."""

    codes: torch.Tensor
    layout: int
    scale: torch.Tensor
    offset: torch.Tensor | None
    zero: float
    subs: tuple[torch.Tensor, torch.Tensor] | None = None

    @property
    def rows(self) -> int:
        return int(self.scale.shape[0])

    @property
    def groups(self) -> int:
        return int(self.scale.shape[1] if self.subs is None else self.subs[0].shape[1])

    def arguments(self) -> tuple[int | float | None, ...]:
        """codes, layout, scale, offset, zero, half, rows, groups (the C functions' common arguments)."""
        half = int(self.scale.dtype == torch.float16 or self.subs is not None)
        offset = None if self.offset is None else self.offset.data_ptr()
        return (
            self.codes.data_ptr(),
            self.layout,
            self.scale.data_ptr(),
            offset,
            self.zero,
            half,
            self.rows,
            self.groups,
        )

    def sub_pointers(self) -> tuple[int | None, int | None]:
        return (None, None) if self.subs is None else (self.subs[0].data_ptr(), self.subs[1].data_ptr())


class WoqJob(ctypes.Structure):
    """One weight of a product as decoder/woq_kernel.cpp's ``Job`` holds it (same fields, same order)."""

    _fields_ = [
        ("codes", ctypes.c_void_p),
        ("scale", ctypes.c_void_p),
        ("offset", ctypes.c_void_p),
        ("scale_sub", ctypes.c_void_p),
        ("offset_sub", ctypes.c_void_p),
        ("bias", ctypes.c_void_p),
        ("layout", ctypes.c_int64),
        ("half", ctypes.c_int64),
        ("rows", ctypes.c_int64),
        ("groups", ctypes.c_int64),
        ("column", ctypes.c_int64),
        ("zero", ctypes.c_float),
    ]


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
            codes, layout, scale, offset, zero, half, rows, groups = weight.arguments()
            scale_sub, offset_sub = weight.sub_pointers()
            bias_pointer = None if bias is None else bias.data_ptr()
            job.codes, job.scale, job.offset, job.bias = codes, scale, offset, bias_pointer
            job.scale_sub, job.offset_sub = scale_sub, offset_sub
            job.layout, job.half, job.rows, job.groups, job.column, job.zero = layout, half, rows, groups, column, zero
            column += weight.rows
        return cls(tuple(weights), jobs, weights[0][0].groups * GROUP, column)


class WoqLinear(torch.nn.Module):
    """``y = x W^T + b`` on the native kernel; float32 in and out, any leading shape."""

    codes: torch.Tensor
    scale: torch.Tensor
    offset: torch.Tensor | None
    bias: torch.Tensor | None
    scale_sub: torch.Tensor | None
    offset_sub: torch.Tensor | None

    def __init__(self, kernel: WoqKernel, state: dict[str, torch.Tensor], bias: torch.Tensor | None) -> None:
        super().__init__()
        self.kernel = kernel
        self.register_buffer("codes", state["codes"])
        self.register_buffer("scale", state["scale"])
        self.register_buffer("offset", state.get("offset"))
        self.register_buffer("bias", None if bias is None else bias.float().contiguous())
        self.register_buffer("scale_sub", state.get("scale_sub"))
        self.register_buffer("offset_sub", state.get("offset_sub"))
        self.layout = int(state["layout"])
        self.zero = float(state["zero"]) if "zero" in state else 0.0
        self.in_features, self.out_features = int(state["cols"]), int(state["scale"].shape[0])

    def weight(self) -> WoqWeight:
        """The stored weight as the kernel reads it."""
        subs = None if self.scale_sub is None or self.offset_sub is None else (self.scale_sub, self.offset_sub)
        return WoqWeight(self.codes, self.layout, self.scale, self.offset, self.zero, subs)

    def product(self) -> WoqProduct:
        """This layer as a one-weight :class:`WoqProduct` (made once; again if its tensors were replaced)."""
        made = _PRODUCTS.get(self)
        if made is None or made.weights[0][0].codes is not self.codes or made.weights[0][1] is not self.bias:
            made = _PRODUCTS[self] = WoqProduct.of([(self.weight(), self.bias)])
        return made

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, self.in_features).to(torch.float32)
        out = self.kernel.linear(flat, self.product())
        return out.to(x.dtype).reshape(*x.shape[:-1], self.out_features)

    def dense(self) -> torch.Tensor:
        """The weight as a dense bfloat16 matrix (out_features, in_features), made now."""
        return self.kernel.dequantize(self.weight())

    @property
    def nbytes(self) -> int:
        tensors = [self.codes, self.scale, self.offset, self.scale_sub, self.offset_sub]
        return sum(int(t.numel()) * t.element_size() for t in tensors if t is not None)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, layout={self.layout}"


_PRODUCTS: weakref.WeakKeyDictionary[WoqLinear, WoqProduct] = weakref.WeakKeyDictionary()
"""Each layer's one-weight product, made on its first call (outside the module: ctypes arrays do not copy)."""
