"""runtime: linear layers through oneDNN on a CPU: the matrix products of a decoding pass at a fraction of MKL's cost.

PyTorch sends a float32 ``nn.Linear`` on a CPU to MKL's GEMM. For the few rows of a decoding pass (1 to 32
tokens) that path is slow on this project's reference CPU (a 2-core AMD EPYC with AVX-512): with the embedded
0.5B model a one-token pass took 162 ms and an eight-token pass 334 ms; through oneDNN's linear kernel
(``torch.ops.mkldnn._linear_pointwise``, the op TorchInductor emits for CPU linears) the same passes take 96 ms
and 161 ms, and a 300-token float32 prefill 1.13 s instead of 2.3 s (``lookahead-lsp bench passes``
compares the two in one run). The weights stay where they are, dense and shared
(tied embeddings stay tied): only the layers' class changes, so nothing is copied.

Both decoders run every pass through the same layers, so greedy and lookahead still agree token for token.
Where the op is missing or fails a probe (a PyTorch built without oneDNN) the model is left as it was.
"""

from __future__ import annotations

import logging

import torch

logger = logging.getLogger(__name__)


class OneDnnLinear(torch.nn.Linear):
    """An ``nn.Linear`` whose forward is oneDNN's linear kernel (same weights, same result up to rounding)."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:  # noqa: A002 - nn.Linear's parameter name
        return torch.ops.mkldnn._linear_pointwise(input, self.weight, self.bias, "none", [], "")


def onednn_linear_works(dtype: torch.dtype) -> bool:
    """Whether oneDNN's linear kernel runs here for ``dtype`` and agrees with ``F.linear`` on a small probe."""
    if not torch.backends.mkldnn.is_available():
        return False
    try:
        generator = torch.Generator().manual_seed(0)
        x = torch.randn(3, 16, generator=generator).to(dtype)
        weight = torch.randn(8, 16, generator=generator).to(dtype)
        bias = torch.randn(8, generator=generator).to(dtype)
        got = torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")
        want = torch.nn.functional.linear(x, weight, bias)
    except (RuntimeError, AttributeError, NotImplementedError) as exc:
        logger.info("oneDNN linear unavailable (%s): keeping PyTorch's default", exc)
        return False
    return bool(torch.allclose(got.float(), want.float(), rtol=1e-2, atol=1e-2))


def use_onednn_linear(model: torch.nn.Module) -> int:
    """Make every plain ``nn.Linear`` of a CPU model an :class:`OneDnnLinear`; return how many (0: left as is)."""
    linears = [module for module in model.modules() if type(module) is torch.nn.Linear]
    if not linears or not onednn_linear_works(linears[0].weight.dtype):
        return 0
    for module in linears:
        module.__class__ = OneDnnLinear
    return len(linears)
