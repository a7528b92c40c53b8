"""runtime: linear layers whose weights stay in 4-bit planes: ATen's int4 group-32 kernel instead of a float copy.

A batch-1 decoding pass on a CPU is bound by the bytes of weights it reads. PyTorch ships a weight-only int4
matrix product for CPUs (``torch.ops.aten._weight_int4pack_mm_for_cpu``: 4-bit codes, one bfloat16 scale and
zero per 32 weights along a row, bfloat16 activations, float accumulation), which on the reference CPU runs the
embedded model's matrix products about 2.5x faster than float32 through oneDNN.

A GGUF weight with codes of more than 4 bits (Q5_0, Q8_0) is split exactly into *planes*: ``code = 16 * high +
low`` gives a low plane (scale ``s``, the group's offset) and a high plane (scale ``16 s``, no offset), and the
layer's product is the sum of the planes' products. Every plane is an ordinary int4 group-32 weight, so the
model is the GGUF's own, up to the rounding of each group's scale and offset to bfloat16 (8 significant bits;
the codes are exact) and of the activations to bfloat16. :func:`requantize` fits 8-bit codes to a float weight
for the formats that have no such groups (Q6_K here; F16 for either kernel).

:class:`PackedEmbedding` keeps an embedding table as its codes and float32 scales and dequantizes the rows
it looks up, exactly (the same float32 values as a dense table, a quarter of the memory for 8-bit codes).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch

from lookahead_lsp.decoder.weights.gguf_blocks import GROUP, AffineGroups

ACTIVATIONS = torch.bfloat16  # the kernel's fast path: float32 activations take a slow path (~40x here)


@functools.cache
def int4_kernel_works() -> bool:
    """Whether this PyTorch has the CPU int4 kernel and it agrees with a dense product on a small probe."""
    try:
        generator = torch.Generator().manual_seed(0)
        codes = torch.randint(0, 16, (64, 64), generator=generator, dtype=torch.uint8).numpy()
        scale = torch.rand(64, 2, generator=generator).numpy() + 0.5
        groups = AffineGroups(codes, scale, -8 * scale, 4)
        layer = PackedLinear.from_groups(groups, None)
        x = torch.randn(3, 64, generator=generator)
        want = x.bfloat16().float() @ torch.from_numpy(groups.dequantize()).bfloat16().float().t()
        got = layer(x)
    except (RuntimeError, AttributeError, NotImplementedError):
        return False
    # the kernel rounds its output to bfloat16: a few units in the last place of the largest value
    return bool((got - want).abs().max() <= 0.03 * want.abs().max())


@dataclass
class Plane:
    """One int4 group-32 weight in the kernel's packed layout."""

    packed: torch.Tensor  # _convert_weight_to_int4pack_for_cpu's output
    scales_zeros: torch.Tensor  # (cols // 32, rows, 2) bfloat16: w = (code - 8) * scale + zero

    @classmethod
    def pack(cls, codes: np.ndarray, scale: np.ndarray, offset: np.ndarray) -> Plane:
        """Pack 4-bit ``codes`` (rows, cols) with ``w = codes * scale + offset`` per group of 32."""
        packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(torch.from_numpy(codes.astype(np.int32)), 1)
        zero = offset + 8.0 * scale  # the kernel subtracts 8 from every code
        scales_zeros = torch.from_numpy(np.stack([scale.T, zero.T], axis=-1)).to(ACTIVATIONS).contiguous()
        return cls(packed, scales_zeros)

    def matmul(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.aten._weight_int4pack_mm_for_cpu(x, self.packed, GROUP, self.scales_zeros)

    @property
    def nbytes(self) -> int:
        return self.packed.numel() * self.packed.element_size() + self.scales_zeros.numel() * 2


def split_planes(groups: AffineGroups) -> list[Plane]:
    """The exact 4-bit planes of ``groups``: one for codes of up to 4 bits, two (low, high) for up to 8.

    ``code = 16 * high + low``. The low plane is ``scale * (low - 8)`` (zero point 0), the high plane
    ``16 * scale * high`` plus the rest of the offset, its codes shifted up by ``8 - 2 ** (bits - 5)`` so
    that for the symmetric formats (Q5_0, Q8_0: offset ``-2 ** (bits - 1) * scale``) its zero point is
    ``8 * scale``: every scale and zero point of both planes is then a power-of-two multiple of the group's
    scale, so rounding them to bfloat16 scales the group's weights uniformly (by at most 2**-9) instead of
    shifting them. Both planes stay centred, so the kernel's bfloat16 products are no larger than the
    layer's output."""
    if groups.bits <= 4:
        return [Plane.pack(groups.codes, groups.scale, groups.offset)]
    if groups.bits > 8:
        raise ValueError(f"{groups.bits}-bit codes do not split into two 4-bit planes")
    shift = 8 - 2 ** (groups.bits - 5)
    scale = groups.scale.astype(np.float64)
    low_offset = -8.0 * scale
    high_scale = 16.0 * scale
    high_offset = groups.offset - low_offset - shift * high_scale  # value = high_scale * (high + shift) + this
    high_codes = (groups.codes >> 4) + np.uint8(shift)
    return [
        Plane.pack(groups.codes & 0x0F, scale, low_offset),
        Plane.pack(high_codes, high_scale, high_offset),
    ]


def requantize(weight: torch.Tensor) -> AffineGroups:
    """8-bit codes fitted to a float weight (rows, cols), symmetric per group of 32 as llama.cpp's Q8_0:
    ``scale = max|w| / 127``, ``code = round(w / scale) + 128``. For GGUF formats the planes cannot hold
    exactly (Q6_K's 16-weight sub-blocks, which only the native kernel keeps as they are): each weight moves by
    at most half a step, a quarter of Q6_K's own step, and the layer runs on the same row-independent int4
    kernel as the others (a float GEMM's result for one row depends on how many rows share the pass: lookahead
    would stop matching greedy)."""
    rows, cols = weight.shape
    w = weight.detach().float().reshape(rows, cols // GROUP, GROUP)
    # a float16 scale (exact in the native kernel's two-byte scales), never below float16's smallest normal
    scale = (w.abs().amax(dim=-1) / 127.0).clamp_min(2.0**-14).half().float()
    codes = (torch.round(w / scale[..., None]).clamp(-127, 127) + 128).to(torch.uint8)
    return AffineGroups(codes.reshape(rows, cols).numpy(), scale.numpy(), (-128.0 * scale).numpy(), 8)


class PackedLinear(torch.nn.Module):
    """``y = x W^T + b`` with W as a sum of int4 planes; float32 in and out, bfloat16 into the kernel."""

    bias: torch.Tensor | None

    def __init__(self, planes: list[Plane], bias: torch.Tensor | None, in_features: int, out_features: int) -> None:
        super().__init__()
        self.planes = planes
        for i, plane in enumerate(planes):  # buffers: state_dict, .to() and copies see the planes' tensors
            self.register_buffer(f"plane{i}_packed", plane.packed)
            self.register_buffer(f"plane{i}_scales_zeros", plane.scales_zeros)
        self.register_buffer("bias", bias)
        self.in_features = in_features
        self.out_features = out_features

    @classmethod
    def from_groups(cls, groups: AffineGroups, bias: torch.Tensor | None) -> PackedLinear:
        rows, cols = groups.shape
        return cls(split_planes(groups), bias, cols, rows)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, self.in_features).to(ACTIVATIONS)
        out = self.planes[0].matmul(flat)
        for plane in self.planes[1:]:
            out = out + plane.matmul(flat)
        result = out.to(x.dtype)
        if self.bias is not None:
            result = result + self.bias
        return result.reshape(*x.shape[:-1], self.out_features)

    @property
    def nbytes(self) -> int:
        return sum(plane.nbytes for plane in self.planes)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, planes={len(self.planes)}"


class PackedEmbedding(torch.nn.Module):
    """An embedding table kept as codes and float32 scales; looked-up rows are dequantized exactly."""

    codes: torch.Tensor
    scale: torch.Tensor
    offset: torch.Tensor

    def __init__(self, codes: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("codes", codes)
        self.register_buffer("scale", scale)
        self.register_buffer("offset", offset)
        self.num_embeddings, self.embedding_dim = int(codes.shape[0]), int(codes.shape[1])

    @classmethod
    def from_groups(cls, groups: AffineGroups) -> PackedEmbedding:
        return cls(torch.from_numpy(groups.codes), torch.from_numpy(groups.scale), torch.from_numpy(groups.offset))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        flat = ids.reshape(-1)
        codes = self.codes.index_select(0, flat).float().reshape(flat.numel(), -1, GROUP)
        rows = codes * self.scale.index_select(0, flat)[..., None] + self.offset.index_select(0, flat)[..., None]
        return rows.reshape(*ids.shape, self.embedding_dim)

    @property
    def nbytes(self) -> int:
        return self.codes.numel() + (self.scale.numel() + self.offset.numel()) * 4
