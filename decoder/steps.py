"""decoder: what greedy and lookahead decoding share: choosing the next token and committing new tokens.

Both decoders commit through :class:`Generation`, so end-of-sequence, the token limit, the stop callback and
the constraint behave identically in both.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Protocol

import torch

from lookahead_lsp.decoder.forward import Preempted, forward, preemptible, prefill
from lookahead_lsp.decoder.ids import common_prefix_len
from lookahead_lsp.decoder.kv import PrefixKV
from lookahead_lsp.decoder.slots import KVSlots
from lookahead_lsp.decoder.types import CancelToken, DecodeRequest, DecodeResult, DecodeStats, FinishReason


def argmax(logits: torch.Tensor) -> int:
    """The index of the largest of one position's logits, the first of equal ones (as ``torch.argmax``).

    On a CPU through numpy: torch's reduction over a vocabulary of 152k float32 logits takes 130-270 us there,
    numpy's about 13 us, and every decoding step picks at least once."""
    if logits.device.type == "cpu" and logits.dtype in (torch.float32, torch.float64) and not logits.requires_grad:
        return int(logits.numpy().argmax())
    return int(torch.argmax(logits).item())


ALLOWED_KEPT = 16  # allowed-id sequences whose set and index tensor are kept (:func:`allowed_index`)
_ALLOWED: OrderedDict[int, tuple[Sequence[int], frozenset[int], torch.Tensor]] = OrderedDict()


def allowed_index(allowed: Sequence[int]) -> tuple[frozenset[int], torch.Tensor]:
    """The set and the index tensor of an allowed-ids sequence, kept per sequence object: constraints hand out
    the same cached sequences step after step and request after request, and turning one of a whole
    vocabulary's ids into a tensor costs about 20 ms on a CPU."""
    kept = _ALLOWED.get(id(allowed))
    if kept is None or kept[0] is not allowed:
        kept = (allowed, frozenset(allowed), torch.as_tensor(list(allowed), dtype=torch.long))
        _ALLOWED[id(allowed)] = kept
        if len(_ALLOWED) > ALLOWED_KEPT:
            _ALLOWED.popitem(last=False)
    else:
        _ALLOWED.move_to_end(id(allowed))
    return kept[1], kept[2]


def pick(logits: torch.Tensor, allowed: Sequence[int] | None) -> int:
    """Greedy choice from one position's logits, restricted to ``allowed`` ids when given."""
    if not allowed:  # None: no constraint; empty: none of the ids fits, so the model's own choice
        return argmax(logits)
    ids = allowed_index(allowed)[1].to(logits.device)
    return int(ids[torch.argmax(logits.index_select(0, ids))].item())


def plain_step(model: torch.nn.Module, kv: PrefixKV, gen: Generation) -> int:
    """One greedy step: a pass over the last committed token, its cache entry kept; the model's next token.

    The greedy decoder's every step, and a lookahead step with nothing worth verifying."""
    token = gen.tokens[-1]
    logits = forward(model, kv, [token], between_layers=gen.between_layers)[-1]
    kv.append([token])
    stats = gen.stats
    stats.steps += 1
    stats.tokens_in_passes += 1
    stats.accepted_per_step.append(1)
    return pick(logits, gen.allowed())


class Generation:
    """The new tokens of one request and whether (and why) it has finished."""

    def __init__(self, request: DecodeRequest) -> None:
        self.request = request
        self.tokens: list[int] = []
        self.finish: FinishReason | None = None
        self.stats = DecodeStats(prompt_tokens=len(request.prompt_ids))
        self.between_layers: Callable[[], None] | None = None  # a pass's cancel check (:func:`drive` sets it)
        self._t0 = time.perf_counter()

    def allowed(self, extra: Sequence[int] = ()) -> Sequence[int] | None:
        """The constraint's allowed ids after the committed tokens plus ``extra`` (None: any)."""
        constraint = self.request.constraint
        if constraint is None:
            return None
        return constraint.allowed([*self.tokens, *extra])

    def cancelled(self) -> bool:
        cancel = self.request.cancel
        if cancel is not None and cancel.cancelled:
            self.finish = "cancelled"
            return True
        return False

    def commit(self, new: Sequence[int]) -> int:
        """Append ``new`` tokens, applying EOS, the token limit and the stop callback; return how many stayed."""
        before = len(self.tokens)
        for token in new:
            if token in self.request.eos_ids:
                self.finish = "eos"
                break
            self.tokens.append(token)
            if len(self.tokens) >= self.request.max_new_tokens:
                self.finish = "length"
                break
        if self.request.stop is not None and len(self.tokens) > before:
            keep = self.request.stop(self.tokens)
            if keep is not None:
                del self.tokens[max(keep, 0) :]
                self.finish = "stop"
        return max(len(self.tokens) - before, 0)

    def done(self) -> bool:
        return self.finish is not None

    def result_stats(self) -> DecodeStats:
        self.stats.new_tokens = len(self.tokens)
        self.stats.finish_reason = self.finish or "length"
        return self.stats


def begin(model: torch.nn.Module, kv: PrefixKV, gen: Generation) -> torch.Tensor | None:
    """Reuse the cached prefix, prefill the rest of the prompt; return the next-token logits (None: cancelled)."""
    prompt = list(gen.request.prompt_ids)
    if not prompt:
        raise ValueError("the prompt is empty")
    t0 = time.perf_counter()
    reused = kv.reuse_for(prompt)
    logits = kv.logits_for(prompt) if reused == len(prompt) else None
    if logits is None:
        logits = prefill(model, kv, prompt[reused:], gen.request.cancel)
        if logits is not None:
            kv.remember(logits)
    gen.stats.reused_tokens = reused
    gen.stats.prefilled_tokens = len(prompt) - reused
    gen.stats.prefill_ms = (time.perf_counter() - t0) * 1000
    if logits is None or gen.cancelled():
        gen.finish = "cancelled"
        return None
    return logits


class Stepper(Protocol):
    """A decoder's step: what it learns from committed tokens, and one forward pass producing new tokens."""

    def extend(self, committed: Sequence[int]) -> None: ...

    def step(self) -> list[int]: ...


def drive(
    model: torch.nn.Module, kv: PrefixKV, request: DecodeRequest, make_stepper: Callable[[Generation], Stepper]
) -> DecodeResult:
    """The decoding loop both decoders share: prefill, then commit and step until finished or cancelled."""
    gen = Generation(request)
    logits = begin(model, kv, gen)
    if logits is None:
        return DecodeResult(gen.tokens, gen.result_stats())
    t0 = time.perf_counter()
    stepper = make_stepper(gen)
    pending = [pick(logits, gen.allowed())]
    try:
        with preemptible(model, kv, request.cancel) as gen.between_layers:
            while True:
                committed = gen.commit(pending)
                stepper.extend(gen.tokens[len(gen.tokens) - committed :])
                if gen.done() or gen.cancelled():
                    break
                pending = stepper.step()
    except Preempted:  # a newer request stopped a pass mid-way; the cache is back to its last whole state
        gen.finish = "cancelled"
    gen.stats.decode_ms = (time.perf_counter() - t0) * 1000
    return DecodeResult(gen.tokens, gen.result_stats())


def warm(model: torch.nn.Module, kv: PrefixKV, prompt_ids: Sequence[int], cancel: CancelToken | None = None) -> int:
    """Prefill ``prompt_ids`` into the cache ahead of a request (idle time); returns tokens newly prefilled.

    Stops between chunks when cancelled; what was prefilled so far stays and is reused by the next request.
    All but the last token are prefilled, so a request for exactly this prompt still gets its logits.
    """
    prompt = list(prompt_ids)
    if len(prompt) < 2:
        return 0
    reused = kv.reuse_for(prompt)
    before = len(kv)
    prefill(model, kv, prompt[reused:-1], cancel)
    return len(kv) - before


def warm_slot(
    model: torch.nn.Module,
    slots: KVSlots,
    key: Hashable | None,
    prompt_ids: Sequence[int],
    cancel: CancelToken | None = None,
) -> int:
    """:func:`warm` into ``key``'s cache; returns tokens newly prefilled.

    A prompt that extends what the cache holds, or that it holds already, is warmed in place. One that departs
    from it is prefilled into the key's spare (:mod:`decoder.slots`), from the longest prefix either cache shares
    with it (the key's copied in), and the spare takes the key's place once it holds the whole prompt: a cancel
    half-way leaves the key's cache as it was, and the next request continues whichever shares more."""
    held = slots.get(key)
    prompt = list(prompt_ids)
    shared = common_prefix_len(held.ids, prompt)
    if shared >= min(len(held), len(prompt) - 1):
        return warm(model, held, prompt, cancel)
    spare = slots.spare(key)
    if common_prefix_len(spare.ids, prompt) < shared:
        spare.copy_prefix(held, shared)
    done = warm(model, spare, prompt, cancel)
    if spare.holds(prompt):
        slots.promote(key)
    return done


class SlotDecoder:
    """What greedy and lookahead decoding share around their KV caches: one per document (:mod:`decoder.slots`),
    warmed in idle time, asked whether one holds a prompt, forgotten."""

    def __init__(self, model: torch.nn.Module, slots: int) -> None:
        self.model = model
        self.slots = KVSlots(slots)

    @property
    def kv(self) -> PrefixKV:
        """The cache used last."""
        return self.slots.latest

    def warm(self, prompt_ids: Sequence[int], cancel: CancelToken | None = None, slot: Hashable | None = None) -> int:
        """Prefill a prompt's KV entries in idle time (see :func:`warm_slot`)."""
        return warm_slot(self.model, self.slots, slot, prompt_ids, cancel)

    def holds(self, prompt_ids: Sequence[int], slot: Hashable | None = None) -> bool:
        """Whether ``slot``'s cache holds the prompt (all but its last token at least)."""
        return self.slots.holds(slot, prompt_ids)

    def reset(self) -> None:
        """Forget every cached prefix: the next call prefills its whole prompt."""
        self.slots.reset()

    def learned(self) -> object:
        """A copy of what this decoder has learned from its generations, for :meth:`relearn` (nothing here;
        lookahead: its estimates of drafts and pass costs)."""
        return None

    def relearn(self, learned: object) -> None:
        """Back to what :meth:`learned` returned: the benchmarks start a hole's every round from what its first
        round knew, so that each round is the one a user meets."""
