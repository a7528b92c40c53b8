"""One KV cache per document (decoder/slots.py): a file the decoder served lately is not prefilled again.

The slots themselves on plain objects, then both decoders over the tiny random Qwen2 (float64: no ties), whose
output must stay greedy's whichever cache a request lands in.
"""

from __future__ import annotations

import random
from typing import cast

import pytest
import torch

from lookahead_lsp.decoder.forward import PREFILL_CHUNK
from lookahead_lsp.decoder.greedy import GreedyDecoder
from lookahead_lsp.decoder.kv import PrefixKV
from lookahead_lsp.decoder.lookahead import LookaheadConfig, LookaheadDecoder
from lookahead_lsp.decoder.policy import GPU_COST, CostModel
from lookahead_lsp.decoder.slots import KVSlots
from lookahead_lsp.decoder.types import CancelToken, DecodeRequest
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


def test_a_spare_is_one_key_s_and_takes_its_place_within_the_capacity() -> None:
    slots = KVSlots(2)
    slots.get("a").append([1, 2])
    slots.get("b").append([3])
    spare = slots.spare("a")
    assert spare is slots.spare("a") and spare not in (slots.get("a"), slots.get("b"))  # one spare, a's
    spare.append([1, 9, 9])
    assert not slots.holds("a", [1, 9, 9, 4]) and slots.holds("a", [1, 2, 5])  # all but the last token held
    assert len(slots.spare("b")) == 0  # another key's spare: a's partial prefill is given up
    slots.spare("a").append([1, 9, 9])
    slots.promote("a")
    assert slots.get("a").ids == [1, 9, 9] and slots.holds("a", [1, 9, 9, 4]) and slots.keys() == ["b", "a"]
    with pytest.raises(KeyError, match="no spare"):
        slots.promote("a")  # promoted: the spare is gone
    slots.spare("c").append([7])
    slots.promote("c")  # a key not held: the least recently used cache goes, the capacity stays
    assert slots.keys() == ["a", "c"]
    slots.spare("a")
    slots.reset()
    with pytest.raises(KeyError):
        slots.promote("a")


class _StopAt:
    """A cancel token that reads as cancelled once ``kv`` holds ``entries`` ids (a keystroke arriving then)."""

    def __init__(self, kv: PrefixKV, entries: int) -> None:
        self.kv, self.entries = kv, entries

    def cancel(self) -> None:
        pass

    @property
    def cancelled(self) -> bool:
        return len(self.kv) >= self.entries


@pytest.mark.parametrize("next_prompt", ["old head", "moved head"])
def test_a_warm_stopped_half_way_leaves_the_slot_s_cache_and_the_next_request_takes_what_shares_more(
    model: torch.nn.Module, next_prompt: str
) -> None:
    """A document's prompt, then an idle-time prefill of a prompt whose head moved (its snippets ranked again:
    16 tokens shared), stopped after one chunk. It went to the spare: a keystroke whose prompt keeps the old
    head finds the slot's cache whole (one token prefilled), and the next idle prefill goes on from the spare's
    chunk; a request for the moved prompt takes the spare and prefills only the rest. Output is greedy's."""
    rng = random.Random(9)
    head = [rng.randrange(VOCAB) for _ in range(16)]
    old = [*head, *_prompt(10)]
    moved = [*head, *(rng.randrange(VOCAB) for _ in range(PREFILL_CHUNK + 64))]
    rest = len(moved) - len(head) - PREFILL_CHUNK  # the moved prompt's tokens after the stopped chunk
    key = [*old, 17]
    for decoder in _decoders(model, 2):
        decoder.generate(DecodeRequest(old, 8, slot="a.py"))
        stop = cast(CancelToken, _StopAt(decoder.slots.spare("a.py"), len(head) + PREFILL_CHUNK))
        assert decoder.warm(moved, stop, slot="a.py") == PREFILL_CHUNK
        assert not decoder.holds(moved, "a.py")
        if next_prompt == "old head":
            typed = decoder.generate(DecodeRequest(key, 8, slot="a.py"))
            assert (typed.stats.reused_tokens, typed.stats.prefilled_tokens) == (len(old), 1)
            assert typed.token_ids == GreedyDecoder(model).generate(DecodeRequest(key, 8)).token_ids
            assert decoder.warm(moved, slot="a.py") == rest - 1  # on from the spare's chunk (the last token left)
            assert decoder.holds(moved, "a.py")
        after = decoder.generate(DecodeRequest(moved, 8, slot="a.py"))
        assert after.stats.prefilled_tokens == (1 if next_prompt == "old head" else rest)
        assert after.token_ids == GreedyDecoder(model).generate(DecodeRequest(moved, 8)).token_ids
