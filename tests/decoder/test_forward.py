"""A pass through the model's interface warns about nothing: ``complete`` prints no FutureWarning to a user."""

from __future__ import annotations

import warnings

import torch

from lookahead_lsp.decoder.forward import cache_argument, forward, prefill
from lookahead_lsp.decoder.kv import PrefixKV
from tests.tiny_model import make_tiny_qwen2


def test_prefill_and_a_masked_step_emit_no_warning() -> None:
    model = make_tiny_qwen2(seed=3, dtype=torch.float32)
    kv = PrefixKV()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a FutureWarning (``past_key_values`` is deprecated) fails the test
        assert prefill(model, kv, list(range(10))) is not None
        kv.append(list(range(10)))
        logits = forward(model, kv, [1, 2, 3], [10, 11, 12], torch.tril(torch.ones(3, 3, dtype=torch.bool)))
    assert logits.shape == (3, 512)


def test_the_cache_goes_under_the_name_the_model_takes() -> None:
    class Renamed:
        def forward(self, input_ids: object = None, cache: object = None) -> None: ...

    class Before:
        def forward(self, input_ids: object = None, past_key_values: object = None) -> None: ...

    assert cache_argument(Renamed) == "cache"
    assert cache_argument(Before) == "past_key_values"
