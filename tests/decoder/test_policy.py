"""The draft policy: node probabilities and the choice of what one step verifies."""

from __future__ import annotations

import pytest

from decoder.drafts import Draft
from decoder.policy import AcceptanceModel, CostModel, node_probabilities, select


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
    assert cpu_tokens <= 4  # eight weak one-token-match drafts are not worth a wide pass on a CPU


def test_acceptance_learns_from_misses():
    model = AcceptanceModel()
    draft = Draft((1, 2, 3), "workspace", 2)
    before = model.q(draft)
    for _ in range(50):
        model.observe(draft, offered=3, accepted=0)
    assert model.q(draft) < before / 3


@pytest.mark.parametrize("n", [1, 3, 8, 20, 100])
def test_cost_is_monotone(n):
    cost = CostModel.for_device("cpu")
    assert cost.cost(n + 1) >= cost.cost(n)
