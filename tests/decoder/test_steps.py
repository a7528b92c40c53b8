"""Choosing the next token: the numpy argmax on a CPU picks what torch.argmax picks."""

from __future__ import annotations

import pytest
import torch

from lookahead_lsp.decoder.steps import argmax, pick

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(
    "values",
    [[1.0, 3.0, 3.0, 2.0], [NAN, 1.0, NAN], [1.0, NAN, 5.0], [-INF, -INF, -INF], [INF, 2.0, INF], [0.0, -0.0]],
)
def test_argmax_agrees_with_torch_on_ties_nan_and_infinities(values):
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        logits = torch.tensor(values, dtype=dtype)
        assert argmax(logits) == int(torch.argmax(logits))


def test_argmax_of_views_and_rows_of_real_sized_logits():
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(4, 151936, generator=generator)
    logits[2, 77] = logits[2, 151000] = logits[2].max() + 1  # a tie: the first one
    for row in range(4):
        assert argmax(logits[row]) == int(torch.argmax(logits[row]))
    column = logits[:, 5]  # a strided view
    assert argmax(column) == int(torch.argmax(column))
    assert pick(logits[2], None) == 77 and pick(logits[2], [151000, 3]) == 151000
