"""runtime: a linear layer on the GGUF's own codes through the native kernel (:mod:`decoder.kernels.woq_native`).

The layer holds its weight as the kernel reads it (:class:`decoder.kernels.woq_layout.WoqWeight`), made once from
the stored state (:func:`decoder.kernels.woq_layout.woq_state`)."""

from __future__ import annotations

import weakref

import torch

from lookahead_lsp.decoder.kernels.woq_layout import WoqProduct, WoqWeight
from lookahead_lsp.decoder.kernels.woq_native import WoqKernel
from lookahead_lsp.decoder.weights.gguf_blocks import GROUP


class WoqLinear(torch.nn.Module):
    """``y = x W^T + b`` on the native kernel; float32 in and out, any leading shape. Holds the weight's tiles
    only (made from its stored state once, when the layer is built), in pairs where the kernel takes tiles two by
    two (``paired``: that kernel's :attr:`WoqKernel.two_tiles` unless given)."""

    tiles: torch.Tensor
    bias: torch.Tensor | None

    def __init__(
        self, kernel: WoqKernel, state: dict[str, torch.Tensor], bias: torch.Tensor | None, paired: bool | None = None
    ) -> None:
        super().__init__()
        self.kernel = kernel
        weight = WoqWeight.of(state, kernel.two_tiles if paired is None else paired)
        self.register_buffer("tiles", weight.tiles)
        self.register_buffer("bias", None if bias is None else bias.float().contiguous())
        self.layout, self.mode, self.zero, self.paired = weight.layout, weight.mode, weight.zero, weight.paired
        self.in_features, self.out_features = weight.groups * GROUP, weight.rows

    def weight(self) -> WoqWeight:
        """The weight as the kernel reads it."""
        groups = self.in_features // GROUP
        return WoqWeight(self.tiles, self.layout, self.mode, self.zero, self.out_features, groups, self.paired)

    def product(self) -> WoqProduct:
        """This layer as a one-weight :class:`WoqProduct` (made once; again if its tensors were replaced)."""
        made = _PRODUCTS.get(self)
        if made is None or made.weights[0][0].tiles is not self.tiles or made.weights[0][1] is not self.bias:
            made = _PRODUCTS[self] = WoqProduct.of([(self.weight(), self.bias)])
        return made

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, self.in_features).to(torch.float32)
        out = self.kernel.linear(flat, self.product())
        return out.to(x.dtype).reshape(*x.shape[:-1], self.out_features)

    def dense(self, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
        """The weight as a dense matrix (out_features, in_features) of ``dtype`` (bfloat16 or float32), made now."""
        return self.kernel.dequantize(self.weight(), dtype)

    @property
    def nbytes(self) -> int:
        return int(self.tiles.numel())

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, layout={self.layout}"


_PRODUCTS: weakref.WeakKeyDictionary[WoqLinear, WoqProduct] = weakref.WeakKeyDictionary()
"""Each layer's one-weight product, made on its first call (outside the module: ctypes arrays do not copy)."""
