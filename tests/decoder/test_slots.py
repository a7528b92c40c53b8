"""One KV cache per document (decoder/slots.py): a file the decoder served lately is not prefilled again.

The slots themselves on plain objects, then both decoders over the tiny random Qwen2 (float64: no ties), whose
output must stay greedy's whichever cache a request lands in.
"""

from __future__ import annotations

import random

import pytest
import torch

from lookahead_lsp.decoder.greedy import GreedyDecoder
from lookahead_lsp.decoder.lookahead import LookaheadConfig, LookaheadDecoder
from lookahead_lsp.decoder.policy import GPU_COST, CostModel
from lookahead_lsp.decoder.slots import KVSlots
from lookahead_lsp.decoder.types import DecodeRequest
from tests.tiny_model import make_tiny_qwen2

VOCAB = 512


def test_a_key_keeps_its_cache_and_the_least_recently_used_one_goes() -> None:
    slots = KVSlots(2)
    a, b = slots.get("a"), slots.get("b")
    assert a is not b and slots.get("a") is a  # held: the same cache again
    assert slots.keys() == ["b", "a"]  # "a" used last
    a.append([1, 2, 3])
    c = slots.get("c")  # full: "b", the least recently used, is given up
    assert c is b and slots.keys() == ["a", "c"]
    assert slots.get("a") is a and a.ids == [1, 2, 3] and slots.latest is a


def test_a_key_not_held_takes_the_oldest_cache_as_it_is_so_one_slot_is_the_single_cache_of_before() -> None:
    slots = KVSlots(1)
    first = slots.get(None)
    first.append([7, 8, 9])
    other = slots.get("file.py")
    assert other is first and other.ids == [7, 8, 9]  # the shared prefix stays reusable
    assert slots.keys() == ["file.py"]


def test_reset_forgets_every_cache_and_a_capacity_below_one_is_refused() -> None:
    slots = KVSlots(3)
    for key in "xyz":
        slots.get(key).append([1])
    slots.reset()
    assert slots.keys() == [] and len(slots.latest) == 0
    with pytest.raises(ValueError, match="at least 1"):
        KVSlots(0)


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    return make_tiny_qwen2(vocab_size=VOCAB, seed=3)


def _prompt(seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(VOCAB) for _ in range(48)]


def _decoders(model: torch.nn.Module, slots: int) -> list[GreedyDecoder | LookaheadDecoder]:
    gpu = CostModel(GPU_COST, adaptive=False)  # wide trees: every kind of pass goes through the slot's cache
    return [GreedyDecoder(model, slots), LookaheadDecoder(model, LookaheadConfig(), gpu, slots)]


@pytest.mark.parametrize("slots", [2, 1])
def test_back_in_a_file_only_what_changed_is_prefilled(model: torch.nn.Module, slots: int) -> None:
    """File a, then file b, then a again with one more token typed: with two slots a's cache is still there
    (one token prefilled); with one, b's prompt took it and a's is prefilled again. Output is greedy's."""
    a, b = _prompt(1), _prompt(2)
    typed = [*a, 17]
    fresh = GreedyDecoder(model).generate(DecodeRequest(typed, 12)).token_ids
    for decoder in _decoders(model, slots):
        decoder.generate(DecodeRequest(a, 12, slot="a.py"))
        decoder.generate(DecodeRequest(b, 12, slot="b.py"))
        back = decoder.generate(DecodeRequest(typed, 12, slot="a.py"))
        assert back.token_ids == fresh
        if slots == 2:
            assert (back.stats.reused_tokens, back.stats.prefilled_tokens) == (len(a), 1)
        else:
            assert back.stats.reused_tokens == 0 and back.stats.prefilled_tokens == len(typed)


def test_warming_one_file_leaves_another_files_cache(model: torch.nn.Module) -> None:
    a, b = _prompt(4), _prompt(5)
    for decoder in _decoders(model, 2):
        decoder.generate(DecodeRequest(a, 8, slot="a.py"))
        assert decoder.warm(b, slot="b.py") == len(b) - 1  # all but the last token: the request gets logits
        again = decoder.generate(DecodeRequest(a, 8, slot="a.py"))
        assert again.stats.prefilled_tokens == 0  # a's prompt as it was: its remembered logits, no pass
        got_b = decoder.generate(DecodeRequest(b, 8, slot="b.py"))
        assert got_b.stats.prefilled_tokens == 1
        assert got_b.token_ids == GreedyDecoder(model).generate(DecodeRequest(b, 8)).token_ids
