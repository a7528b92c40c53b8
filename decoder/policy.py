"""Cost-aware drafting: which draft tokens one lookahead step verifies.

A pass over n tokens costs ``CostModel.ms(n)``; a draft token at depth d of a candidate is accepted with a
probability estimated online per (source, match length) as q**d. The step verifies the prefix of draft
tokens, taken in order of probability, that maximises expected committed tokens per millisecond. On a CPU
(each extra token costs about a quarter of a plain step) few tokens pass; on a GPU nearly all do; where
nothing is likely to match, the step is plain greedy.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from decoder.drafts import Draft

# Relative pass cost by number of tokens, from DESIGN.md's measurement (2-core CPU, 0.5B fp32, 800 in cache).
CPU_COST: tuple[tuple[int, float], ...] = ((1, 1.0), (2, 1.29), (4, 1.92), (8, 2.61), (15, 3.49), (57, 5.1))
# A GPU at batch 1 is memory-bound: a pass of 64 tokens costs about as much as one of 1.
GPU_COST: tuple[tuple[int, float], ...] = ((1, 1.0), (64, 1.08), (256, 1.6))


@dataclass
class CostModel:
    """Piecewise-linear pass cost (relative to a one-token pass) by number of tokens in the pass."""

    points: tuple[tuple[int, float], ...] = CPU_COST

    @classmethod
    def for_device(cls, device_type: str) -> CostModel:
        return cls(CPU_COST if device_type in ("cpu", "mps") else GPU_COST)

    def cost(self, n: int) -> float:
        xs = [p[0] for p in self.points]
        i = bisect.bisect_left(xs, n)
        if i < len(xs) and xs[i] == n:
            return self.points[i][1]
        if i == 0:
            return self.points[0][1]
        if i == len(xs):
            (x0, y0), (x1, y1) = self.points[-2], self.points[-1]
        else:
            (x0, y0), (x1, y1) = self.points[i - 1], self.points[i]
        return y0 + (y1 - y0) * (n - x0) / (x1 - x0)

    @classmethod
    def measure(cls, run_pass, sizes: Sequence[int] = (1, 2, 4, 8, 16, 32), repeats: int = 2) -> CostModel:
        """Time ``run_pass(n)`` (one forward pass of n tokens) for each size; the median-free minimum of repeats."""
        run_pass(1)  # warm-up
        times = []
        for n in sizes:
            best = float("inf")
            for _ in range(repeats):
                t0 = time.perf_counter()
                run_pass(n)
                best = min(best, time.perf_counter() - t0)
            times.append(best)
        base = times[0]
        points, top = [], 0.0
        for n, t in zip(sizes, times, strict=True):
            top = max(top, t / base)  # cost never falls with more tokens
            points.append((n, top))
        return cls(tuple(points))


# Prior acceptance probability of one draft token by source, before any evidence (match length 1..4+).
PRIORS: dict[str, tuple[float, ...]] = {
    "prompt": (0.30, 0.45, 0.55, 0.65),
    "suffix": (0.35, 0.50, 0.60, 0.70),
    "workspace": (0.25, 0.40, 0.50, 0.60),
    "jacobi": (0.15, 0.15, 0.15, 0.15),
}
DEFAULT_PRIOR = (0.25, 0.35, 0.45, 0.55)
PRIOR_WEIGHT = 8.0


@dataclass
class AcceptanceModel:
    """Online estimate of a draft token's acceptance probability per (source, match-length bucket)."""

    tried: dict[tuple[str, int], float] = field(default_factory=dict)
    accepted: dict[tuple[str, int], float] = field(default_factory=dict)

    @staticmethod
    def key(draft: Draft) -> tuple[str, int]:
        return draft.source, min(max(draft.match_len, 1), 4)

    def q(self, draft: Draft) -> float:
        source, bucket = self.key(draft)
        prior = PRIORS.get(source, DEFAULT_PRIOR)[bucket - 1]
        tried = self.tried.get((source, bucket), 0.0)
        acc = self.accepted.get((source, bucket), 0.0)
        return (acc + prior * PRIOR_WEIGHT) / (tried + PRIOR_WEIGHT)

    def observe(self, draft: Draft, offered: int, accepted: int) -> None:
        """A draft of which ``offered`` tokens were verified matched its first ``accepted`` tokens."""
        k = self.key(draft)
        self.tried[k] = self.tried.get(k, 0.0) + min(accepted + 1, offered)
        self.accepted[k] = self.accepted.get(k, 0.0) + accepted


@dataclass
class Selection:
    drafts: list[Draft]  # each cut to the length worth verifying
    probs: list[list[float]]  # per draft, per token: the estimated probability that it is accepted
    expected_tokens: float


def node_probabilities(drafts: Sequence[Draft], acceptance: AcceptanceModel) -> dict[tuple[int, ...], float]:
    """The probability that each draft-tree node (a token prefix) is accepted.

    A node's token is accepted with the best per-token probability q of the drafts through it, given its
    parent. Siblings exclude each other (the model picks one token), so the i-th most likely child of a node
    counts only when the ones before it missed: q_i * prod(1 - q_j for j < i). Along a path the conditional
    probabilities multiply, so a node is never likelier than its parent.
    """
    q_of: dict[tuple[int, ...], float] = {}
    for draft in drafts:
        q = acceptance.q(draft)
        for d in range(1, len(draft.tokens) + 1):
            key = draft.tokens[:d]
            q_of[key] = max(q_of.get(key, 0.0), q)
    children: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
    for key in q_of:
        children.setdefault(key[:-1], []).append(key)
    probs: dict[tuple[int, ...], float] = {}
    stack: list[tuple[tuple[int, ...], float]] = [((), 1.0)]
    while stack:
        parent, p_parent = stack.pop()
        miss = 1.0
        for key in sorted(children.get(parent, []), key=lambda k: (-q_of[k], k)):
            probs[key] = p_parent * q_of[key] * miss
            miss *= 1.0 - q_of[key]
            stack.append((key, probs[key]))
    return probs


def select(drafts: Sequence[Draft], acceptance: AcceptanceModel, cost: CostModel, max_tokens: int) -> Selection:
    """Cut and choose drafts so that expected committed tokens per unit of pass cost is highest.

    Tokens are taken in order of probability (a prefix of a draft always before its continuation; equal
    prefixes of different drafts count once); the best prefix of that order wins, possibly none.
    """
    nodes = node_probabilities(drafts, acceptance)
    order = sorted(nodes.items(), key=lambda kv: (-kv[1], len(kv[0])))[:max_tokens]
    best_n, best_rate, expected = 0, 1.0 / cost.cost(1), 1.0
    for n, (_, p) in enumerate(order, start=1):
        expected += p
        rate = expected / cost.cost(n + 1)
        if rate > best_rate:
            best_n, best_rate = n, rate
    chosen = {key for key, _ in order[:best_n]}
    picked: list[Draft] = []
    probs: list[list[float]] = []
    for draft in drafts:
        length = 0
        while length < len(draft.tokens) and draft.tokens[: length + 1] in chosen:
            length += 1
        if length == 0:
            continue
        cut = Draft(draft.tokens[:length], draft.source, draft.match_len, draft.count)
        picked.append(cut)
        probs.append([nodes[draft.tokens[: d + 1]] for d in range(length)])
    return Selection(picked, probs, 1.0 + sum(nodes[k] for k in chosen))
