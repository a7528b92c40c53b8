"""The draft policy: node probabilities and the choice of what one step verifies."""

from __future__ import annotations

import random
import time
from dataclasses import replace

import pytest

from lookahead_lsp.decoder.drafts import Draft
from lookahead_lsp.decoder.lookahead import LookaheadConfig, LookaheadDecoder
from lookahead_lsp.decoder.policy import (
    CPU_COST,
    OBSERVED_RATIO_CAP,
    PACKED_CPU_COST,
    RISK_STAKE,
    AcceptanceModel,
    CostModel,
    RiskBudget,
    default_jacobi,
    default_verify,
    node_probabilities,
    select,
)
from tests.tiny_model import make_tiny_qwen2


def test_siblings_exclude_each_other():
    drafts = [Draft((1, 2), "suffix", 4), Draft((3, 4), "suffix", 4), Draft((5,), "suffix", 4)]
    probs = node_probabilities(drafts, AcceptanceModel())
    first_level = [probs[(1,)], probs[(3,)], probs[(5,)]]
    assert sum(first_level) < 1.0  # at most one of them can be the model's token
    assert probs[(1, 2)] < probs[(1,)]  # a continuation never likelier than its prefix


def test_cpu_verifies_less_than_gpu():
    drafts = [Draft(tuple(range(i * 10, i * 10 + 7)), "prompt", 1) for i in range(8)]
    cpu = select(drafts, AcceptanceModel(), CostModel.for_device("cpu"), 56)
    gpu = select(drafts, AcceptanceModel(), CostModel.for_device("cuda"), 56)
    cpu_tokens = sum(len(d.tokens) for d in cpu.drafts)
    gpu_tokens = sum(len(d.tokens) for d in gpu.drafts)
    assert cpu_tokens < gpu_tokens
    # where a second row costs a tenth of a pass and each further one more (the native kernel), drafts found on
    # one-token matches are worth their first tokens only, and not all of them
    packed = select(drafts, AcceptanceModel(), CostModel.for_device("cpu", packed=True), 56)
    assert 0 < sum(len(d.tokens) for d in packed.drafts) < gpu_tokens and len(packed.drafts) < len(drafts)
    assert all(len(d.tokens) < len(drafts[0].tokens) for d in packed.drafts)


def test_acceptance_learns_from_misses():
    model = AcceptanceModel()
    draft = Draft((1, 2, 3), "workspace", 2)
    before = model.first(draft)
    for _ in range(50):
        model.observe(draft, offered=3, accepted=0)
    assert model.first(draft) < before / 3


def test_alternatives_that_miss_leave_the_best_drafts_estimate_alone():
    """Where a step verifies several drafts of one source (G > 1), the ones that begin differently exclude each
    other: their misses teach what an alternative is worth, not what the source's best draft is."""
    model = AcceptanceModel()
    best = Draft((1, 2, 3), "prompt", 3)
    alternatives = [Draft((10 + i, 2, 3), "prompt", 3, rank=1 + i) for i in range(3)]
    before = model.first(best)
    for _ in range(10):  # the best draft right every time, its three alternatives wrong
        model.observe(best, offered=3, accepted=3)
        for alternative in alternatives:
            model.observe(alternative, offered=3, accepted=0)
    assert model.first(best) > before  # counted together it would fall to about a quarter
    assert model.first(alternatives[0]) < before / 2
    assert model.ceiling("prompt") == pytest.approx(max(model.first(replace(best, match_len=m)) for m in (1, 2, 3, 4)))


@pytest.mark.parametrize("n", [1, 3, 8, 20, 100])
def test_cost_is_monotone(n):
    cost = CostModel.for_device("cpu")
    assert cost.cost(n + 1) >= cost.cost(n)


def test_a_pass_is_padded_to_a_no_dearer_size():
    # timed: 3 tokens dearer than 8 (as MKL's 2-3 row products are on two threads here)
    cost = CostModel(((1, 1.0), (2, 1.8), (3, 2.5), (4, 2.0), (8, 2.1), (16, 2.7)))
    assert cost.pass_size(3) == 4 and cost.pass_size(5) == 5 and cost.pass_size(2) == 2
    assert cost.cost(3) == pytest.approx(2.0) and cost.cost(2) == pytest.approx(1.8)
    acceptance = AcceptanceModel()
    strong = Draft((1, 2, 3, 4, 5, 6, 7), "suffix", 4)
    weak = [Draft((10 + i, 20 + i), "prompt", 1) for i in range(6)]
    chosen = select([strong, *weak], acceptance, cost, 56)
    tokens = sum(len(d.tokens) for d in chosen.drafts)
    assert tokens + 1 == cost.pass_size(tokens + 1)  # the pass holds exactly a timed, no-dearer size
    assert tokens >= 3
    # nothing worth a pass: no padding either
    assert select(weak[:1], acceptance, cost, 56).drafts == []


def measured(seconds: dict[int, float]) -> CostModel:
    """The start-up timing of a device whose pass of n tokens takes ``seconds[n]`` (slept, so really timed)."""
    return CostModel.measure(lambda n: time.sleep(seconds[n]), sizes=tuple(seconds))


def test_measured_cost_keeps_a_dip():
    cost = measured({1: 0.10, 2: 0.18, 3: 0.26, 4: 0.20, 8: 0.22})
    assert cost.pass_size(3) in (4, 8) and cost.cost(3) < 2.3


def test_an_accelerators_first_pass_of_each_shape_is_not_what_is_timed():
    # a GPU: every pass costs the same, but the first of each new width also loads its kernels (0.3 s here)
    seen: set[int] = set()

    def run_pass(n: int) -> None:
        time.sleep(0.02 if n in seen else 0.3)
        seen.add(n)

    sizes = (1, 2, 4, 8)
    cold = CostModel.measure(run_pass, sizes)
    assert cold.interpolated(8) > 5  # as the start-up timing saw it without a warm-up per shape
    seen.clear()
    warm = CostModel.measure(run_pass, sizes, warm_each=True)
    assert all(warm.interpolated(n) < 1.5 for n in sizes)


def test_live_passes_correct_the_cost_level():
    cost = CostModel(((1, 1.0), (3, 2.5), (4, 2.0), (8, 2.2)))
    for _ in range(40):
        cost.observe(1, 0.100)
        cost.observe(8, 0.330)  # 3.3x a one-token pass where the table said 2.2x
    assert cost.interpolated(8) == pytest.approx(3.3, rel=0.05)
    assert cost.interpolated(1) == 1.0 and cost.pass_size(3) == 4  # the shape is kept


def test_a_size_timed_badly_at_start_up_is_put_right_by_its_own_passes():
    # start-up timing caught a busy moment at 2 and 3 tokens: 2.2x and 2.5x, where passes really cost 1.5x
    cost = CostModel(((1, 1.0), (2, 2.2), (3, 2.5), (4, 1.6), (8, 1.8)))
    assert cost.pass_size(2) == 4  # as timed, a pass of 2 would be padded to 4
    for _ in range(60):
        cost.observe(1, 0.100)
        cost.observe(2, 0.150)
        cost.observe(3, 0.155)
    assert cost.interpolated(2) == pytest.approx(1.5, rel=0.05)
    assert cost.interpolated(3) == pytest.approx(1.55, rel=0.05)
    assert cost.pass_size(2) == 2 and cost.pass_size(3) == 3
    assert cost.interpolated(8) == pytest.approx(1.8)  # sizes never seen keep their timing
    cost.observe(6, 0.250)  # between two timed sizes: both move, by their share
    assert cost.levels[3] > 1.0 and cost.levels[4] > 1.0


def test_a_level_no_pass_corrects_goes_back_to_its_timing():
    """Noise raised the level of 8 tokens; the policy then cut its drafts short of 8, so no pass of 8 came to bring
    it down (an Intel Xeon's stored table: 1.89 where passes of 8 timed 1.55). The passes of other sizes ease it
    back to its timing, while the sizes they do show keep near what they take."""
    cost = CostModel(((1, 1.0), (2, 1.1), (4, 1.25), (8, 1.55)), one_token_seconds=0.010)
    cost.levels[3] = 1.89 / 1.55
    assert cost.pass_size(5) == 5 and cost.interpolated(8) == pytest.approx(1.89)
    for _ in range(300):
        cost.observe(1, 0.010)
        cost.observe(4, 0.0135)  # passes of 4 take 1.35 where the table said 1.25
    assert cost.interpolated(8) == pytest.approx(1.55, rel=0.01)
    assert cost.interpolated(4) == pytest.approx(1.35, rel=0.03)
    assert cost.interpolated(2) == pytest.approx(1.1)  # a size no pass showed and no noise moved: as timed
    fixed = CostModel(((1, 1.0), (8, 1.55)), [1.0, 1.2], adaptive=False)
    fixed.observe(1, 0.010)
    assert fixed.levels == [1.0, 1.2]  # a fixed table (the tests') stays as it is


def test_a_start_up_table_that_makes_small_passes_look_free_is_corrected_without_one_token_passes():
    """A noisy start-up timing said a pass of 3 costs what a pass of 1 does: every step then verifies something,
    no one-token pass ever runs, and the wider passes alone must correct the table from the measured base."""
    timed = {1: 0.100, 2: 0.117, 3: 0.103, 4: 0.123, 8: 0.168}  # the start-up timing (best of one)
    cost = measured(timed).blended(CostModel(adaptive=False), share=0.0)
    assert cost.one_token_seconds is not None and cost.cost(1) == 1.0
    assert cost.interpolated(3) < 1.2  # as timed: nearly free
    for _ in range(60):  # in the decode, passes of 3 cost 1.7x and of 8 cost 2.0x a one-token pass
        cost.observe(3, 0.170)
        cost.observe(8, 0.200)
    assert cost.interpolated(3) == pytest.approx(1.7, rel=0.15)
    assert cost.interpolated(8) == pytest.approx(2.0, rel=0.15)


def test_misses_in_this_generation_lower_acceptance_at_once():
    model = AcceptanceModel()
    draft = Draft((1, 2, 3), "prompt", 3)
    for _ in range(30):  # long-run: this source is usually right
        model.observe(draft, offered=3, accepted=3)
    model.begin()
    confident = model.first(draft)
    for _ in range(4):
        model.observe(draft, offered=3, accepted=0)
    assert model.first(draft) < confident * 0.5
    model.begin()  # a new generation starts from the long-run estimate again
    assert model.first(draft) > confident * 0.8


def test_g_by_device_and_max_drafts():
    assert default_verify(CostModel.for_device("cpu")) == 1
    assert default_verify(CostModel.for_device("cuda")) == 8
    drafts = [Draft((1, 2, 3), "suffix", 4), Draft((4, 5, 6), "prompt", 1), Draft((7, 8), "jacobi", 1)]
    one = select(drafts, AcceptanceModel(), CostModel.for_device("cuda"), 56, max_drafts=1)
    assert [d.tokens for d in one.drafts] == [(1, 2, 3)]  # the likeliest draft alone: a chain, no tree
    assert len(select(drafts, AcceptanceModel(), CostModel.for_device("cuda"), 56).drafts) == 3


def test_the_jacobi_branch_runs_by_default_only_where_wide_passes_are_cheap() -> None:
    tiny_model = make_tiny_qwen2()
    assert default_jacobi(CostModel.for_device("cuda"), 8)
    assert not default_jacobi(CostModel.for_device("cpu"), 8)
    assert not default_jacobi(CostModel.for_device("cpu", packed=True), 8)
    cpu = LookaheadDecoder(tiny_model, cost=CostModel.for_device("cpu"))
    gpu = LookaheadDecoder(tiny_model, cost=CostModel.for_device("cuda"))
    forced = LookaheadDecoder(tiny_model, LookaheadConfig(jacobi=True), cost=CostModel.for_device("cpu"))
    assert (cpu.config.jacobi, gpu.config.jacobi, forced.config.jacobi) == (False, True, True)


def test_the_same_draft_from_two_sources_counts_at_its_likelier_source():
    """One slot (G=1), the same tokens from a source with a poor record and one with a good record: the good
    record decides, and on a CPU the draft is worth a pass."""
    acceptance = AcceptanceModel()
    poor, good = Draft(tuple(range(7)), "prompt", 4), Draft(tuple(range(7)), "workspace", 4)
    for _ in range(3):
        acceptance.observe(poor, offered=7, accepted=0)
    assert acceptance.first(poor) < acceptance.first(good)
    picked = select([poor, good], acceptance, CostModel(CPU_COST, adaptive=False), 7, max_drafts=1)
    assert [d.source for d in picked.drafts] == ["workspace"]


def test_a_start_up_timing_is_pulled_towards_the_device_table():
    cpu, gpu = CostModel.for_device("cpu"), CostModel.for_device("cuda")
    # a busy moment at start-up timed wide passes nearly free on a CPU: alone it would pick G=8
    lucky = CostModel(((1, 1.0), (2, 1.1), (4, 0.95), (8, 1.12), (16, 1.3)))
    assert default_verify(lucky) == 8
    blended = lucky.blended(cpu)
    assert default_verify(blended) == 1
    assert 1.12 < blended.interpolated(8) < cpu.interpolated(8)  # between the timing and the table
    assert blended.pass_size(2) == 4  # the timed dip at 4 tokens is kept
    # a GPU's timing stays a GPU's: wide passes cheap, G=8
    timed_gpu = CostModel(((1, 1.0), (4, 1.02), (8, 1.05), (16, 1.08)))
    assert default_verify(timed_gpu.blended(gpu)) == 8
    assert timed_gpu.blended(gpu, share=0.0).points == timed_gpu.points


PACKED = CostModel(PACKED_CPU_COST, adaptive=False)  # the native kernel's table: a second row costs 0.09 of a pass


def test_a_run_of_right_tokens_is_one_right_draft_and_misses_in_a_row_end_the_trust():
    """A copied block: one 11-token draft right to the end, then the same source misses at the first token.
    The run counts as one right first token (and ten right later ones), so the next draft is likely but no
    sure thing; each miss lowers the trust, and the source's 11-token drafts stop being worth a pass on a CPU,
    where a second row is cheap, after a few misses in a row: when the first token's estimate falls below the
    break-even (the old per-token estimate kept expecting 10.8 tokens of them through ten misses in a row)."""
    acceptance = AcceptanceModel()
    acceptance.begin()
    draft = Draft(tuple(range(11)), "suffix", 4)
    acceptance.observe(draft, offered=11, accepted=11)
    assert 0.6 < acceptance.first(draft) < 0.9
    assert acceptance.rest(draft) > acceptance.first(draft)  # past a right first token the rest mostly follows
    estimates = [acceptance.first(draft)]
    while select([draft], acceptance, PACKED, 15).drafts:  # worth a pass while likely enough to pay for a row
        assert acceptance.first(draft) >= PACKED.break_even(15)
        acceptance.observe(draft, offered=11, accepted=0)
        estimates.append(acceptance.first(draft))
        assert len(estimates) <= 20  # misses in a row end the trust
    assert len(estimates) >= 4  # one right run earns a few chances where a row costs a fraction of a pass
    assert estimates == sorted(estimates, reverse=True)  # every miss lowers it
    assert acceptance.first(draft) < PACKED.break_even(15)


def test_costs_in_one_sweep_equal_cost_and_follow_the_live_passes():
    cost = CostModel(((1, 1.0), (2, 1.8), (3, 2.5), (4, 2.0), (8, 2.1), (16, 2.7)))
    assert cost.costs(40)[1:] == [cost.cost(n) for n in range(1, 41)]
    cost.observe(1, 0.1)
    cost.observe(3, 0.4)
    assert cost.costs(40)[1:] == [cost.cost(n) for n in range(1, 41)]  # not the table before the passes


@pytest.mark.parametrize("seed", range(20))
def test_nothing_at_or_below_break_even_is_verified(seed):
    """break_even is a bound the selection cannot beat: where no draft's first token is likelier than the
    floor, nothing is verified (the selection returns before ranking); where one is, the ranking decides."""
    rng = random.Random(seed)
    cost = CostModel(tuple((n, c * rng.uniform(0.8, 1.2) if n > 1 else c) for n, c in PACKED_CPU_COST), adaptive=False)
    floor = cost.break_even(15)
    acceptance = AcceptanceModel()
    sources = ("prompt", "suffix", "workspace")
    for _ in range(rng.randrange(0, 30)):  # random evidence: estimates anywhere from cold to hot
        draft = Draft((0,), rng.choice(sources), rng.randrange(1, 5))
        offered = rng.randrange(1, 16)
        acceptance.observe(draft, offered, rng.choice((0, 0, rng.randrange(offered + 1))))
    drafts = [
        Draft(tuple(rng.randrange(50) for _ in range(rng.randrange(1, 16))), rng.choice(sources), rng.randrange(1, 5))
        for _ in range(rng.randrange(1, 4))
    ]
    picked = select(drafts, acceptance, cost, 15)
    if max(acceptance.first(d) for d in drafts) <= floor:
        assert picked.drafts == [] and picked.expected_tokens == 1.0
    if picked.drafts:
        assert max(acceptance.first(d) for d in drafts) > floor
    # the bound itself, against the ranking it lets the selection skip: the best n tokens of the tree never
    # pay for a pass of n + 1 when every first token is at or below the floor
    probs = sorted(node_probabilities(drafts, acceptance).values(), reverse=True)
    best = max(((1 + sum(probs[:n])) / cost.cost(n + 1) for n in range(1, min(len(probs), 15) + 1)), default=0.0)
    if max(acceptance.first(d) for d in drafts) <= floor:
        assert best <= 1.0 + 1e-12


def test_a_sure_draft_clears_the_floor():
    sure = AcceptanceModel()
    for _ in range(200):
        sure.observe(Draft(tuple(range(15)), "suffix", 4), offered=15, accepted=15)
    assert sure.first(Draft((1,), "suffix", 4)) > PACKED.break_even(15)
    assert select([Draft(tuple(range(15)), "suffix", 4)], sure, PACKED, 15).drafts


def test_a_pass_stalled_by_other_work_moves_the_table_as_little_as_a_pass_half_again_slow():
    cost = CostModel(((1, 1.0), (8, 2.0)))
    cost.observe(1, 0.100)
    cost.observe(8, 8.0)  # stalled: 40x what the table expects
    assert cost.interpolated(8) == pytest.approx(2.0 * (1 + 0.1 * 0.5))
    cost.observe(1, 4.0)
    assert cost.one_token_seconds == pytest.approx(0.100 * (1 + 0.1 * 0.5))
    for _ in range(60):  # a lasting change still moves it all the way
        cost.observe(1, 0.100)
        cost.observe(8, 0.300)
    assert cost.interpolated(8) == pytest.approx(3.0, rel=0.05)


def test_the_risk_budget_is_charged_the_pass_at_the_table_and_the_steps_time_outside_it():
    """Drafting time beside a pass counts (greedy's step is the pass alone); the pass's own time does not, within
    OBSERVED_RATIO_CAP times the table (its noise is the host's, which greedy meets alike); beyond that, what it
    took over, up to as much again (a stall)."""
    cost = CostModel(PACKED_CPU_COST, adaptive=False, one_token_seconds=0.010)
    assert cost.charged(1, 0.010, 0.002) == pytest.approx(1.2)  # drafting beside a one-token pass
    assert cost.charged(1, 0.014, 0.0) == pytest.approx(1.0)  # a slow minute of the host: greedy's too
    assert cost.charged(4, 0.010, 0.0) == pytest.approx(cost.interpolated(4))  # faster than the table
    assert cost.charged(4, 0.016, 0.0) == pytest.approx(cost.interpolated(4))  # slower, within the cap
    table = cost.interpolated(4)
    over = 0.025 / 0.010 - OBSERVED_RATIO_CAP * table
    assert cost.charged(4, 0.025, 0.0) == pytest.approx(table + over)  # the table far too cheap
    assert cost.charged(4, 1.0, 1.0) == pytest.approx(OBSERVED_RATIO_CAP * table + OBSERVED_RATIO_CAP - 1.0)
    assert cost.charged(4, 0.010, -0.001) == pytest.approx(table)  # a clock's noise is no credit


def test_the_risk_budget_lets_a_generation_lose_its_stake_a_share_of_each_token_and_what_its_drafts_won():
    budget = RiskBudget(stake=0.0, share=0.025)
    assert budget.allowance() == 0.0  # no stake: nothing to bet before a token is committed
    budget.spent(1.0, 1)
    assert budget.allowance() == pytest.approx(0.025)
    budget.spent(1.3, 1)  # a wide pass whose drafts missed
    assert budget.allowance() < 0  # no pass dearer than one token until tokens pay it back
    budget.spent(1.3, 4)  # a wide pass that committed four tokens
    assert budget.allowance() == pytest.approx(0.025 * 6 - (1.0 - 1 + 1.3 - 1 + 1.3 - 4))
    assert RiskBudget().allowance() == RISK_STAKE  # the default's stake


def test_live_levels_that_fell_do_not_hide_what_a_wide_pass_costs_now():
    """Passes timed against a one-token time that stood high drive the live levels down (wide passes looked as
    cheap as one token); once the one-token time is right again, what a wide pass takes beyond 1.5x the fallen
    table is charged, up to as much again (a stall)."""
    cost = CostModel(PACKED_CPU_COST, one_token_seconds=0.020)  # twice the true 10 ms
    for _ in range(60):
        cost.observe(4, 0.013)  # the true 1.3 one-token passes, seen as 0.65
    assert cost.interpolated(4) == pytest.approx(0.65, rel=0.02) and dict(cost.points)[4] == pytest.approx(1.32)
    fell = cost.interpolated(4)
    cost.one_token_seconds = 0.010  # one-token passes have put the base right
    # the fallen table and what the pass took beyond 1.5x it (0.975 of the true 1.3; before the charge, 1.3)
    assert cost.charged(4, 0.013, 0.0) == pytest.approx(fell + (1.3 - OBSERVED_RATIO_CAP * fell))
    assert cost.charged(4, 1.0, 0.0) == pytest.approx(OBSERVED_RATIO_CAP * fell)  # a stall is still capped
