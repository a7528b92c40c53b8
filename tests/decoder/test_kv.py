"""The growing KV cache: the same logits as transformers' concatenating cache, without a copy per pass."""

from __future__ import annotations

import torch
from transformers import DynamicCache

from lookahead_lsp.decoder.forward import forward
from lookahead_lsp.decoder.kv import GrowingCache, PrefixKV
from tests.tiny_model import make_tiny_qwen2


def test_growing_cache_gives_the_logits_of_the_concatenating_cache() -> None:
    model = make_tiny_qwen2(seed=3)
    tokens = [(7 * i) % 500 for i in range(300)]  # past the first capacity: the buffers double once
    grown, concatenated = PrefixKV(), PrefixKV()
    concatenated.cache = DynamicCache()
    for kv in (grown, concatenated):
        for start in range(0, 300, 37):
            forward(model, kv, tokens[start : start + 37])
            kv.append(tokens[start : start + 37])
    assert torch.equal(forward(model, grown, [1, 2, 3]), forward(model, concatenated, [1, 2, 3]))


def test_one_token_passes_write_into_spare_capacity_and_crops_keep_it() -> None:
    model = make_tiny_qwen2(seed=3)
    kv = PrefixKV()
    assert isinstance(kv.cache, GrowingCache)
    forward(model, kv, list(range(10)))
    kv.append(list(range(10)))
    layer = kv.cache.layers[0]
    assert layer.keys is not None
    first = layer.keys.data_ptr()
    for token in range(20):
        forward(model, kv, [token])
        kv.append([token])
    forward(model, kv, [5, 6, 7, 8])
    kv.keep_selected(len(kv), [0, 2], [5, 7])  # a gather: kept entries moved to the front in place
    kv.truncate(len(kv) - 3)
    forward(model, kv, [9])
    assert layer.keys.data_ptr() == first  # never reallocated nor copied
    assert layer.keys.shape[-2] == len(kv) + 1 == 30


def test_make_room_widens_the_views_over_spare_room_and_grows_through_update_when_full() -> None:
    cache, held = GrowingCache(), torch.randn(1, 2, 250, 8)
    cache.update(held, held.neg(), 0)  # a buffer of 250 + 256 entries
    room = torch.empty(1, 2, 3, 8)
    keys, values = cache.make_room(0, room)
    assert keys.shape[-2] == values.shape[-2] == 253 and cache.layers[0].keys is keys
    assert torch.equal(keys[..., :250, :], held) and torch.equal(values[..., :250, :], held.neg())
    buffer = keys.data_ptr()
    keys[..., 250:, :] = 1.0  # the caller writes the new entries in place
    assert torch.equal(cache.layers[0].keys[..., 250:, :], torch.ones(1, 2, 3, 8))
    grown, _ = cache.make_room(0, torch.empty(1, 2, 300, 8))  # more than the spare room: update reallocates
    assert grown.shape[-2] == 553 and grown.data_ptr() != buffer
    assert torch.equal(grown[..., :250, :], held) and torch.equal(grown[..., 250:253, :], torch.ones(1, 2, 3, 8))
    fresh, _ = cache.make_room(1, room)  # a layer not there yet
    assert fresh.shape[-2] == 3 and len(cache.layers) == 2


def test_a_gather_keeps_the_chosen_entries_in_order() -> None:
    model = make_tiny_qwen2(seed=4)
    kv, straight = PrefixKV(), PrefixKV()
    forward(model, kv, [1, 2, 3])
    kv.append([1, 2, 3])
    forward(model, kv, [10, 11, 12, 13], positions=[3, 3, 4, 4], mask=torch.tensor(
        [[1, 0, 0, 0], [0, 1, 0, 0], [1, 0, 1, 0], [0, 1, 0, 1]], dtype=torch.bool))  # fmt: skip
    kv.keep_selected(3, [1, 3], [11, 13])  # the branch 11 -> 13
    forward(model, straight, [1, 2, 3, 11, 13])
    straight.append([1, 2, 3, 11, 13])
    assert torch.allclose(forward(model, kv, [20]), forward(model, straight, [20]), atol=1e-12)


def test_the_same_prompt_again_starts_from_the_remembered_prefill_and_decodes_the_same() -> None:
    """An editor re-asking, a benchmark's repeat: no pass for the prompt, and the first call's tokens."""
    from lookahead_lsp.decoder.greedy import GreedyDecoder
    from lookahead_lsp.decoder.lookahead import LookaheadConfig, LookaheadDecoder
    from lookahead_lsp.decoder.types import DecodeRequest

    model = make_tiny_qwen2(seed=3)
    prompt = [(i * 37) % 200 + 5 for i in range(70)]
    for decoder in (GreedyDecoder(model), LookaheadDecoder(model, LookaheadConfig())):
        first = decoder.generate(DecodeRequest(prompt, max_new_tokens=12))
        again = decoder.generate(DecodeRequest(prompt, max_new_tokens=12))
        assert first.stats.prefilled_tokens == len(prompt)
        assert (again.stats.prefilled_tokens, again.stats.reused_tokens) == (0, len(prompt))
        assert again.token_ids == first.token_ids
        longer = decoder.generate(DecodeRequest([*prompt, 9], max_new_tokens=4))  # a new prompt: one token to run
        assert (longer.stats.prefilled_tokens, longer.stats.reused_tokens) == (1, len(prompt))
        shorter = decoder.generate(DecodeRequest(prompt[:-3], max_new_tokens=4))  # no logits: its last token runs
        assert (shorter.stats.prefilled_tokens, shorter.stats.reused_tokens) == (1, len(prompt) - 4)


def test_remembered_logits_are_those_of_the_prefill_and_go_when_their_entries_do() -> None:
    model = make_tiny_qwen2(seed=3)
    kv = PrefixKV()
    prompt = list(range(10, 60))
    from lookahead_lsp.decoder.forward import prefill

    logits = prefill(model, kv, prompt)
    assert logits is not None
    kv.remember(logits)
    assert kv.reuse_for(prompt) == len(prompt)
    held = kv.logits_for(prompt)
    assert held is not None and torch.equal(held, logits)
    assert kv.logits_for(prompt[:-1]) is None and kv.logits_for([*prompt[:-1], 7]) is None
    kv.truncate(len(prompt) - 1)  # the last entry gone: its logits with it
    assert kv.prompt_logits is None and kv.reuse_for(prompt) == len(prompt) - 1
