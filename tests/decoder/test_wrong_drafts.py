"""Drafts that are always wrong cost lookahead a bounded number of draft tokens, and no extra passes.

Each draft source proposes a continuation whose first token is never the model's: a new process's decoder (no
record yet, the sources' priors as they stand) verifies some of them, each miss lowers the source's estimate
until its drafts no longer pay for a row at the table's break-even, the probes then follow its drafts as shadows
for free and never see it recover, and every later step is a one-token pass, as greedy's."""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest
import torch

from lookahead_lsp.decoder import lookahead
from lookahead_lsp.decoder.drafts import Draft
from lookahead_lsp.decoder.forward import forward
from lookahead_lsp.decoder.greedy import GreedyDecoder
from lookahead_lsp.decoder.lookahead import LookaheadConfig, LookaheadDecoder
from lookahead_lsp.decoder.policy import (
    CPU_COST,
    LOSS_SHARE,
    OBSERVED_RATIO_CAP,
    PACKED_CPU_COST,
    RISK_STAKE,
    AcceptanceModel,
    CostModel,
)
from lookahead_lsp.decoder.types import DecodeRequest
from tests.tiny_model import make_tiny_qwen2

VOCAB = 512
SOURCES = ("suffix", "workspace")
LONGEST = 15  # LookaheadConfig's draft_len: the most draft tokens one wrong draft can put in a pass (G = 1)


class AlwaysWrong:
    """A draft source whose drafts start with a token the model never picks there (greedy's output is known),
    found on the longest match (the most trusted kind)."""

    def __init__(self, name: str, prompt: Sequence[int], answer: Sequence[int]) -> None:
        self.name = name
        self.prompt_len = len(prompt)
        self.answer = list(answer)
        self.lookups = 0

    def lookup(self, context: Sequence[int], max_len: int, max_count: int) -> list[Draft]:
        self.lookups += 1
        pos = len(context) - self.prompt_len
        right = self.answer[pos] if pos < len(self.answer) else 0
        wrong = tuple((right + 1 + i) % VOCAB for i in range(max_len))
        return [Draft(wrong, self.name, 4)]


def misses_until_silent(source: str, cost: CostModel, max_tokens: int) -> int:
    """How many misses in a row a fresh acceptance record lets ``source``'s drafts (found on the longest match,
    as AlwaysWrong's) have before their first token falls to the break-even of ``cost``: none is verified after."""
    acceptance = AcceptanceModel()
    acceptance.begin()
    floor = cost.break_even(max_tokens)
    draft = Draft((0,), source, 4)
    misses = 0
    while acceptance.first(draft) > floor:
        acceptance.observe(draft, offered=max_tokens, accepted=0)
        misses += 1
        assert misses < 50, "a source that always misses must fall silent"
    return misses


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    return make_tiny_qwen2(vocab_size=VOCAB, seed=3)


@pytest.mark.parametrize("table", [PACKED_CPU_COST, CPU_COST], ids=["native-kernel", "float"])
def test_always_wrong_drafts_cost_a_bounded_number_of_draft_tokens(model: torch.nn.Module, table) -> None:
    prompt = [(i * 37) % VOCAB for i in range(40)]
    max_new = 160
    reference = GreedyDecoder(model).generate(DecodeRequest(prompt, max_new_tokens=max_new))
    assert len(reference.token_ids) == max_new
    cost = CostModel(table, adaptive=False)
    sources = [AlwaysWrong(name, prompt, reference.token_ids) for name in SOURCES]
    decoder = LookaheadDecoder(model, LookaheadConfig(prompt_drafts=False), cost=cost)
    result = decoder.generate(DecodeRequest(prompt, max_new_tokens=max_new, drafts=sources))

    assert result.token_ids == reference.token_ids  # lossless
    stats = result.stats
    assert stats.steps <= reference.stats.steps  # no more model passes than greedy
    assert stats.accepted_per_step == [1] * stats.steps  # (every draft missed)
    # The bound: each source is verified at most as often as its misses leave it above the break-even (at most
    # 20 misses from a cold record on these tables: asserted), each time with at most one draft of LONGEST tokens
    # (G = 1 on a CPU); the generation is long enough (160 steps) for every source to fall silent.
    silent_after = {name: misses_until_silent(name, cost, decoder.config.longest_draft) for name in SOURCES}
    assert all(1 <= m <= 20 for m in silent_after.values()), silent_after
    bound = sum(silent_after.values()) * LONGEST
    draft_tokens = stats.tokens_in_passes - stats.steps
    assert 0 < draft_tokens <= bound, (draft_tokens, bound)


class Credulous(AcceptanceModel):
    """An acceptance record that never learns: it believes every draft's first token is right 95 times in 100
    and every later one 90 (as a miscalibrated estimate would, on a source whose past was good)."""

    def first(self, draft: Draft) -> float:
        return 0.95

    def rest(self, draft: Draft) -> float:
        return 0.90

    def ceiling(self, source: str) -> float:
        return 0.95


@pytest.mark.parametrize("table", [PACKED_CPU_COST, CPU_COST], ids=["native-kernel", "float"])
def test_even_estimates_that_never_learn_leave_lookahead_within_its_risk_budget_of_greedy(
    model: torch.nn.Module, table, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The policy's bound does not rest on the estimates: whatever they say, what lookahead's passes cost beyond
    greedy's (by the cost table) stays within RISK_STAKE + LOSS_SHARE a committed token, at every length a
    generation may stop at: a completion of two tokens as well as one of 96."""
    prompt = [(i * 37) % VOCAB for i in range(40)]
    reference = GreedyDecoder(model).generate(DecodeRequest(prompt, max_new_tokens=96))
    widest = 1
    for max_new in (2, 3, 5, 8, 13, 21, 34, 96):
        cost = CostModel(table, adaptive=False)
        sources = [AlwaysWrong(name, prompt, reference.token_ids) for name in SOURCES]
        decoder = LookaheadDecoder(model, LookaheadConfig(prompt_drafts=False), cost=cost)
        decoder.acceptance = Credulous()
        widths: list[int] = []  # the drafted passes (one-token steps go through plain_step)

        def counted(model_: torch.nn.Module, kv, tokens, *args, widths=widths, **kwargs):
            widths.append(len(tokens))
            return forward(model_, kv, tokens, *args, **kwargs)

        monkeypatch.setattr(lookahead, "forward", counted)
        result = decoder.generate(DecodeRequest(prompt, max_new_tokens=max_new, drafts=sources))

        assert result.token_ids == reference.token_ids[:max_new]  # lossless
        stats = result.stats
        assert stats.accepted_per_step == [1] * stats.steps and stats.steps <= max_new
        beyond = sum(cost.interpolated(n) - 1.0 for n in widths)
        assert beyond <= RISK_STAKE + LOSS_SHARE * max_new + 1e-9, (max_new, beyond, widths)
        widest = max([widest, *widths])
    assert widest > 1  # it believed the drafts at first
    assert len(widths) < stats.steps  # and then ran one-token passes, as greedy


def test_a_table_that_rates_wide_passes_too_cheap_does_not_lift_the_risk_budget(
    model: torch.nn.Module, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bound holds on the passes' time, not only on the table: a table timed under other load that rates
    every pass as cheap as one token would let always-believed drafts widen every pass. Each wide pass here takes
    far longer than a one-token pass, so the budget counts it at the cap (OBSERVED_RATIO_CAP times the table's
    cost), and the drafts stop once that is spent."""
    prompt = [(i * 37) % VOCAB for i in range(40)]
    max_new = 96
    reference = GreedyDecoder(model).generate(DecodeRequest(prompt, max_new_tokens=max_new))
    flat = tuple((n, 1.0) for n, _ in PACKED_CPU_COST)  # every size as cheap as one token
    cost = CostModel(flat, adaptive=False, one_token_seconds=0.005)
    sources = [AlwaysWrong(name, prompt, reference.token_ids) for name in SOURCES]
    decoder = LookaheadDecoder(model, LookaheadConfig(prompt_drafts=False), cost=cost)
    decoder.acceptance = Credulous()
    widths: list[int] = []

    def slow_when_wide(model_: torch.nn.Module, kv, tokens, *args, **kwargs):
        widths.append(len(tokens))
        if len(tokens) > 1:
            time.sleep(0.05)  # ten one-token passes of the table
        return forward(model_, kv, tokens, *args, **kwargs)

    monkeypatch.setattr(lookahead, "forward", slow_when_wide)
    result = decoder.generate(DecodeRequest(prompt, max_new_tokens=max_new, drafts=sources))

    assert result.token_ids == reference.token_ids  # lossless
    wide = [n for n in widths if n > 1]
    assert wide  # it believed the drafts at first
    charged = (OBSERVED_RATIO_CAP - 1.0) * len(wide)  # each wide pass beyond a one-token pass, as the budget counts
    # the last wide pass may start with the allowance not yet spent and overrun it by one pass's charge
    assert charged <= RISK_STAKE + LOSS_SHARE * max_new + (OBSERVED_RATIO_CAP - 1.0), (len(wide), widths)
    assert len(wide) < result.stats.steps / 4  # by the table alone, every step would have drafted
