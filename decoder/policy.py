"""decoder: cost-aware drafting: which draft tokens one lookahead step verifies.

A pass over n tokens costs ``CostModel.cost(n)`` (relative to a one-token pass, measured at start-up); the
token at depth d of a candidate is accepted with probability first * rest**(d-1), both estimated online per
(source, match length) (``AcceptanceModel``). The step verifies the prefix of draft tokens, taken in order of
probability, that maximises expected committed tokens per unit of cost, padded to the cheapest pass size that
holds it. On a CPU (a second row costs about 0.4 of a one-token pass) only likely drafts pass; on a GPU nearly
all do; where nothing is likely to match, the step is plain greedy, and drafts that cannot pay are not ranked."""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from lookahead_lsp.decoder.drafts import Draft

# Relative pass cost by number of tokens: the default where nothing was measured. CPU: this 2-core AVX-512 machine,
# the embedded 0.5B model in fp32 on oneDNN's linear kernels (decoder/cpu_linear.py), 800 tokens in the cache,
# best of 7 (`lookahead-lsp bench passes`, docs/benchmarks.md); 32 from a separate run.
CPU_COST: tuple[tuple[int, float], ...] = (
    (1, 1.0),
    (2, 1.33),
    (3, 1.40),
    (4, 1.42),
    (6, 1.51),
    (8, 1.62),
    (12, 1.77),
    (16, 1.87),
    (32, 2.7),
)
# The same model on its GGUF's codes through the native pass (decoder/native_pass.py and its kernels): the mean of
# its avx512 (VNNI) and avx2 (maddubs/madd) levels on a 2-core AMD EPYC Zen 4, best of 9 after an 800-token
# context (`lookahead-lsp bench passes --only daemon --repeats 9`, docs/runs/2026-11-25-passes-zen4; 8 tokens
# 1.79x at avx512, 2.20x at avx2). A one-token pass reads the weights at the memory's speed; the kernel decodes each
# tile of weights once per 8 rows of the pass, so each further row costs its integer dot products and its attention
# (and 9 rows decode the weights twice). The start-up timing (CostModel.blended) and the live passes correct it
# per machine; 32 extrapolated.
PACKED_CPU_COST: tuple[tuple[int, float], ...] = (
    (1, 1.0),
    (2, 1.09),
    (3, 1.18),
    (4, 1.32),
    (6, 1.64),
    (8, 2.0),
    (12, 3.1),
    (16, 3.9),
    (32, 7.8),
)
# A GPU at batch 1 is memory-bound: a pass of 64 tokens costs about as much as one of 1.
GPU_COST: tuple[tuple[int, float], ...] = ((1, 1.0), (64, 1.08), (256, 1.6))
PRIOR_SHARE = 0.5  # weight of the device's table against the start-up timing (CostModel.blended)
PERSIST_EVERY = 64  # live passes between two writes of a stored table (CostModel.persist)
# One live pass moves the table by at most the share its timing would at this many times the expected time
# (or 1 / this): a pass stalled by other work (a compiler, a test run: 40x its time was seen on a shared 2-core
# machine) nudges the table as a pass 1.5x slow would, so that only a lasting change of cost moves it far.
OBSERVED_RATIO_CAP = 1.5
# A timed size whose level no live pass has corrected for IDLE_PASSES passes moves RELAX of the way back to its
# timing with each further pass (CostModel.observe). Without it the live table rose where it was not used: a level
# that noise raised made the policy pad or cut its passes around that size, so no pass of it ran to bring it down,
# and the table was stored so (an Intel Xeon's after a few hours: the 1.5B's 8 tokens 1.89 against 1.55-1.58 timed
# again; docs/benchmarks.md, "A live pass-cost table that rose where no pass ran"). A size in use keeps what its
# passes show; one no pass shows is back within a tenth of its timing some 260 passes after its last.
IDLE_PASSES = 32
RELAX = 0.01


@dataclass
class CostModel:
    """Pass cost (relative to a one-token pass) by number of tokens, from timed sizes.

    Between timed sizes the cost is interpolated. A pass may always be padded with more draft tokens, so the
    cost of verifying n tokens is that of the cheapest pass of at least n (:meth:`pass_size`): where timing
    shows a pass of 8 no dearer than one of 3, three wanted tokens are verified in a pass of 8.
    """

    points: tuple[tuple[int, float], ...] = CPU_COST
    levels: list[float] = field(default_factory=list)  # live correction per timed size: observed / table
    one_token_seconds: float | None = None  # running mean of observed one-token passes
    adaptive: bool = True  # False: :meth:`observe` changes nothing (a fixed table, as tests want)
    # called with this table by the first :meth:`flush` after every PERSIST_EVERY live passes (decoder/cost_table.py
    # writes it back to its file): at the end of a generation, not inside one of its timed steps
    persist: Callable[[CostModel], None] | None = field(default=None, repr=False, compare=False)
    _unsaved: int = field(default=0, repr=False, compare=False)  # live passes since the last persist
    _changes: int = field(default=0, repr=False, compare=False)  # counts the changes of levels (keys the memos)
    _costs: tuple[tuple[int, int], list[float]] | None = field(default=None, repr=False, compare=False)
    _break_even: tuple[tuple[int, int], float] | None = field(default=None, repr=False, compare=False)
    _idle: list[int] = field(default_factory=list, repr=False, compare=False)  # passes since each level was corrected

    def __post_init__(self) -> None:
        if len(self.levels) != len(self.points):
            self.levels = [1.0] * len(self.points)
        self._idle = [0] * len(self.points)

    @classmethod
    def for_device(cls, device_type: str, packed: bool = False) -> CostModel:
        """The default table of a device (``packed``: a CPU model on int4 planes)."""
        if device_type not in ("cpu", "mps"):
            return cls(GPU_COST)
        return cls(PACKED_CPU_COST if packed else CPU_COST)

    def observe(self, n: int, seconds: float, weight: float = 0.1) -> None:
        """A pass of ``n`` tokens took ``seconds``: correct the table at the sizes around ``n``.

        The start-up timing is one pass per size after a short context, on a machine whose load changes; real
        prompts hold hundreds of tokens. A pass of one token updates the base time; a wider pass moves the
        levels of the timed sizes on either side of ``n`` (by their share of the interpolation) towards its
        observed ratio to the base (exponential running means, clamped to a sane range; one pass counts at most
        as one ``OBSERVED_RATIO_CAP`` times off), so that a size timed badly at start-up is put right by the
        passes of that size, the shape the others show is kept, and a pass stalled by other work moves little. A level
        that no pass has corrected for ``IDLE_PASSES`` passes moves ``RELAX`` of the way back to its timing with each
        further pass: a level no pass shows does not stay where noise left it."""
        if not self.adaptive:
            return
        self._unsaved += 1
        if n <= 1:
            base = self.one_token_seconds
            self.one_token_seconds = seconds if not base else base + weight * (_capped(seconds / base) - 1) * base
            self._relax(())
            return
        if not self.one_token_seconds:
            return
        ratio = _capped(seconds / self.one_token_seconds / self.interpolated(n))
        bracket = self._bracket(n)
        for i, share in bracket:
            moved = self.levels[i] * (1.0 + weight * share * (ratio - 1.0))
            self.levels[i] = min(3.0, max(0.33, moved))
        self._relax([i for i, _ in bracket])
        self._changes += 1  # the one-token base is not in the table: only the levels change what the memos hold

    def _relax(self, corrected: Sequence[int]) -> None:
        """The ``corrected`` levels' count of idle passes back to 0; every other level's up by one, and a level idle
        for more than ``IDLE_PASSES`` moved ``RELAX`` of the way back to its timing (1.0: the table as timed)."""
        moved = False
        for i, level in enumerate(self.levels):
            self._idle[i] = 0 if i in corrected else self._idle[i] + 1
            if self._idle[i] > IDLE_PASSES and level != 1.0:
                self.levels[i] = 1.0 if abs(level - 1.0) < 1e-4 else level + RELAX * (1.0 - level)
                moved = True
        if moved:
            self._changes += 1

    def flush(self) -> None:
        """Hand the table to ``persist`` if PERSIST_EVERY live passes have run since it last did."""
        if self.persist is not None and self._unsaved >= PERSIST_EVERY:
            self._unsaved = 0
            self.persist(self)

    def current(self) -> tuple[tuple[int, float], ...]:
        """The timed sizes with their live corrections folded in: the table as the passes have shown it."""
        return tuple((n, self.interpolated(n)) for n, _ in self.points)

    def interpolated(self, n: int) -> float:
        """Relative cost of a pass of exactly ``n`` tokens (the table with its live levels)."""
        return self._at(n, self.levels)

    def _at(self, n: int, levels: Sequence[float]) -> float:
        if n <= 1:
            return 1.0
        return sum(share * self.points[i][1] * levels[i] for i, share in self._bracket(n)) + self._beyond(n, levels)

    def _bracket(self, n: int) -> list[tuple[int, float]]:
        """The timed sizes whose values make up the cost of ``n`` tokens, with their interpolation shares."""
        xs = [p[0] for p in self.points]
        i = bisect.bisect_left(xs, n)
        if i < len(xs) and xs[i] == n:
            return [(i, 1.0)]
        if i == 0:
            return [(0, 1.0)]
        if i == len(xs):
            return [(len(xs) - 1, 1.0)]
        x0, x1 = xs[i - 1], xs[i]
        share = (n - x0) / (x1 - x0)
        return [(i - 1, 1.0 - share), (i, share)]

    def _beyond(self, n: int, levels: Sequence[float]) -> float:
        """Past the largest timed size: the last segment's slope (never negative) times the extra tokens."""
        if len(self.points) < 2 or n <= self.points[-1][0]:
            return 0.0
        (x0, y0), (x1, y1) = self.points[-2], self.points[-1]
        y0, y1 = y0 * levels[-2], y1 * levels[-1]
        return max(0.0, (y1 - y0) / (x1 - x0)) * (n - x1)

    def pass_size(self, n: int) -> int:
        """How many tokens a pass that must verify ``n`` should hold: ``n``, or a timed larger size no dearer."""
        best, best_cost = n, self.interpolated(n)
        for x, _ in self.points:
            if x > n and self.interpolated(x) < best_cost:
                best, best_cost = x, self.interpolated(x)
        return best

    def cost(self, n: int) -> float:
        return self.interpolated(self.pass_size(n))

    def charged(self, n: int, took: float, outside: float) -> float:
        """What a step whose pass held ``n`` tokens and took ``took`` seconds costs a generation's
        :class:`RiskBudget`, in one-token passes: the pass at the table's cost (with its live levels, which the
        passes' own times move), and beyond it only what the pass took over ``OBSERVED_RATIO_CAP`` times that (a
        table that rates the pass far too cheap, or live levels that fell; at most as much again: a stall); plus
        the step's time outside its pass (``outside``: drafting and bookkeeping; greedy's step is the pass alone)
        over the one-token time, at most ``OBSERVED_RATIO_CAP`` - 1 passes. A pass's time within the cap is not
        charged: its noise is the host's, which greedy's passes meet alike, and charged where it ran slow but never
        where it ran fast (as the budget once was) it spent a generation's stake on the noise of its plain steps,
        so that the same hole drafted in one round and never in the next (docs/benchmarks.md, "The risk budget
        charges a pass its table, not its noise")."""
        table = self.interpolated(n)
        if not self.one_token_seconds:
            return table
        spare = OBSERVED_RATIO_CAP - 1.0
        over = min(max(took / self.one_token_seconds - OBSERVED_RATIO_CAP * table, 0.0), spare * table)
        return table + over + min(max(outside, 0.0) / self.one_token_seconds, spare)

    def dearest(self, allowance: float | None) -> float:
        """The dearest pass a risk budget's ``allowance`` (:meth:`RiskBudget.allowance`: beyond a one-token
        pass) pays for; no bound without one."""
        return float("inf") if allowance is None else self.interpolated(1) + allowance

    def costs(self, n_max: int) -> list[float]:
        """``[cost(n) for n in 0 .. n_max]`` (0 for n = 0) in one sweep: what one step's selection asks of a
        table that the live passes change after every step (kept until the next change)."""
        key = (self._changes, n_max)
        if self._costs is None or self._costs[0] != key:
            self._costs = (key, self._sweep(n_max))
        return self._costs[1]

    def _sweep(self, n_max: int) -> list[float]:
        timed = [(x, self.interpolated(x)) for x, _ in self.points]
        out = [0.0] * (n_max + 1)
        cheapest_above, i = float("inf"), len(timed) - 1
        for n in range(n_max, 0, -1):
            while i >= 0 and timed[i][0] > n:
                cheapest_above = min(cheapest_above, timed[i][1])
                i -= 1
            out[n] = min(self.interpolated(n), cheapest_above)
        return out

    def break_even(self, n_max: int) -> float:
        """The acceptance probability at or below which no draft tokens, up to ``n_max`` of them, pay their pass.

        No node of a draft tree is likelier than the best per-token probability q among its drafts, so a pass
        of n + 1 tokens commits at most 1 + n q of them; it beats a one-token pass only where
        q > (cost(n + 1) - 1) / n for some n. Drafts all at or below this floor need not be ranked (and a
        source whose drafts cannot rise above it need not be asked)."""
        key = (self._changes, n_max)
        if self._break_even is None or self._break_even[0] != key:
            costs = self.costs(n_max + 1)
            one = self.interpolated(1)
            self._break_even = (key, max(0.0, min((costs[n + 1] - one) / n for n in range(1, n_max + 1))))
        return self._break_even[1]

    def blended(self, prior: CostModel, share: float | None = None) -> CostModel:
        """This table (a start-up timing) pulled towards ``prior`` (the device's default table) by ``share``.

        One timed pass per size is a noisy sample on a busy machine: on this project's 2-core CPU, where an
        8-token pass costs about 1.6 one-token passes, single timings ranged from 1.1x to 1.9x, and one run
        timed 3 and 4 tokens cheaper than 1. A weighted geometric mean with the device's table keeps what the
        timing says about this machine (a GPU stays near 1.0, a dip stays a dip) at half the noise; the live
        passes (:meth:`observe`) then correct each size."""
        w = PRIOR_SHARE if share is None else share
        points = tuple((n, prior.interpolated(n) ** w * c ** (1.0 - w)) for n, c in self.points)
        return CostModel(points, one_token_seconds=self.one_token_seconds)

    @classmethod
    def measure(cls, run_pass, sizes: Sequence[int], repeats: int = 1, warm_each: bool = False) -> CostModel:
        """Time ``run_pass(n)`` (one forward pass of n tokens) for each size in ``repeats`` interleaved rounds,
        each size's fastest (the round least disturbed by other work; every size meets the same load);
        ``warm_each``: each size runs once untimed first (an accelerator's first pass of a new shape picks and
        loads its kernels: on an H100 that made passes of 2 to 8 tokens look 5x dearer than one).

        The one-token time seeds the live base (:meth:`observe`): a decoder whose start-up table makes small
        passes look nearly free verifies something at every step and never runs a one-token pass, and without a
        base its wider passes could never correct that table."""
        run_pass(1)  # warm-up
        if warm_each:
            for n in sizes:
                run_pass(n)
        best = [float("inf")] * len(sizes)
        for _ in range(max(repeats, 1)):
            for i, n in enumerate(sizes):
                t0 = time.perf_counter()
                run_pass(n)
                best[i] = min(best[i], time.perf_counter() - t0)
        base = best[0]
        return cls(tuple((n, t / base) for n, t in zip(sizes, best, strict=True)), one_token_seconds=base)


def _capped(ratio: float) -> float:
    """An observed over expected time, kept within ``OBSERVED_RATIO_CAP`` of 1 either way."""
    return min(OBSERVED_RATIO_CAP, max(1.0 / OBSERVED_RATIO_CAP, ratio))


# Prior acceptance probability of one draft token by source, before any evidence (match length 1..4+).
PRIORS: dict[str, tuple[float, ...]] = {
    "prompt": (0.30, 0.45, 0.55, 0.65),
    "suffix": (0.35, 0.50, 0.60, 0.70),
    "workspace": (0.25, 0.40, 0.50, 0.60),
    "jacobi": (0.15, 0.15, 0.15, 0.15),
}
PRIORS["previous"] = PRIORS["suffix"]  # the document's last completion (lsp_server/previous.py): as near as the suffix
DEFAULT_PRIOR = (0.25, 0.35, 0.45, 0.55)
MATCH_BUCKETS = len(DEFAULT_PRIOR)  # match lengths 1, 2, 3 and 4 or more

# The verification set size G where the lookahead configuration leaves it open. Measured on this 2-core CPU
# (docs/benchmarks.md): G=1 (one chain a step, no tree) 2.18x greedy overall, G=2 2.20x, G=8 2.08x on oneDNN
# kernels (1.73x / 1.73x / 1.47x before them); where a wide pass costs little (a GPU) the tree's breadth is
# nearly free.
G_WHERE_WIDTH_IS_DEAR = 1
G_WHERE_WIDTH_IS_CHEAP = 8
WIDTH_IS_CHEAP = 1.25  # a wide pass (8 tokens; N for the Jacobi branch) at most this many one-token passes: a GPU


def default_jacobi(cost: CostModel, ngram: int) -> bool:
    """Whether the Jacobi branch runs by default: only where a pass that carries its N-1 guesses costs at most a
    quarter more than a one-token pass (a GPU). Its guesses evolve only while they are all in the pass, so the
    selection cannot cut them as it cuts other drafts; on CPUs the branch never paid for its rows: the ablations
    without it decoded as fast or faster on float32 passes (2.32x against 2.18x, docs/benchmarks.md) and on int4
    planes (click fim: 1.42x against 0.98x; 1.82 tokens a step with and without it)."""
    return cost.cost(ngram) <= WIDTH_IS_CHEAP


def default_verify(cost: CostModel) -> int:
    """G for a device: wide trees only where a pass of 8 tokens costs at most a quarter more than one token
    (a GPU: about 1.0-1.1). CPUs measure 1.4-1.9 here, and a start-up timing can land anywhere in that range,
    so the line sits well clear of it: G must not flip with the machine's load."""
    return G_WHERE_WIDTH_IS_CHEAP if cost.cost(8) <= WIDTH_IS_CHEAP else G_WHERE_WIDTH_IS_DEAR


PRIOR_WEIGHT = 8.0  # pseudo-observations of a prior behind the long-run estimates


LOCAL_WEIGHT = 2.0  # pseudo-observations of the long-run estimate behind this generation's own evidence
# Each new observation of a source keeps this share of the weight of its earlier ones in this generation: drafts
# come right in runs (a block being copied) and then stop coming right, so what the last few drafts did says
# more about the next one than a run of hits some steps ago.
LOCAL_DECAY = 0.8
Q_MAX = 0.98


@dataclass
class _Tally:
    """Evidence about drafts: how many were checked and how many had their first token right (``first``), and
    how many tokens after a right first token were checked and right (``rest``)."""

    first_tried: float = 0.0
    first_right: float = 0.0
    rest_tried: float = 0.0
    rest_right: float = 0.0

    def add(self, offered: int, accepted: int, keep: float = 1.0) -> None:
        """One draft of which ``offered`` tokens were checked matched its first ``accepted``; earlier evidence
        keeps the share ``keep`` of its weight."""
        self.first_tried = self.first_tried * keep + 1.0
        self.first_right = self.first_right * keep + (1.0 if accepted > 0 else 0.0)
        self.rest_tried *= keep
        self.rest_right *= keep
        if accepted > 0:
            self.rest_tried += min(accepted + 1, offered) - 1
            self.rest_right += accepted - 1


def _shrunk(right: float, tried: float, prior: float, weight: float) -> float:
    return (right + prior * weight) / (tried + weight)


@dataclass
class AcceptanceModel:
    """Online estimates, per (source, match-length bucket), of the probability that a draft's first token is
    accepted and that each later token is, given the ones before it were.

    Drafts from copying come right in runs: the first token is the gate (a draft is the right text or not),
    and once it is passed the following tokens mostly are too. One probability for every token taught
    the old model the wrong thing from a run: ten tokens right counted as ten hits against one miss per
    wrong draft, so after a run it expected 10.8 tokens of 11-token drafts that then missed at the first
    token, pass after wide pass. Here each draft is one observation of its first token, and only the tokens
    after a right first token inform the rest.

    The long-run estimates (all generations) start from the source's prior (``PRIORS``; the rest from its
    longest-match prior: a token after a right one extends the match) and are pulled towards this
    generation's recent evidence for the source (decaying by ``LOCAL_DECAY`` per observation, weighed against
    ``LOCAL_WEIGHT`` pseudo-observations of the long-run value): code the workspace resembles accepts far
    more than code nothing resembles, and a few misses in a row make the next steps plain greedy ones.
    :meth:`begin` starts a generation.

    A source's best draft and its alternatives (``Draft.rank`` above 0: other continuations of the same match,
    where a step verifies several drafts, G > 1) keep apart estimates: of k drafts that begin differently at
    most one is right, so counted together the alternatives' misses would pull down what the best draft is
    worth, and a wider verification set would draft less than one draft a step. An alternative starts from the
    source's prior for a match of one token (the weakest evidence a source gives)."""

    long: dict[tuple[str, int, bool], _Tally] = field(default_factory=dict)  # (source, match bucket, alternative)
    local: dict[tuple[str, bool], _Tally] = field(default_factory=dict)  # this generation's, recent first

    def begin(self) -> None:
        self.local.clear()

    @staticmethod
    def key(draft: Draft) -> tuple[str, int, bool]:
        """(source, match-length bucket, whether the draft is an alternative to its source's best)."""
        return draft.source, min(max(draft.match_len, 1), MATCH_BUCKETS), draft.rank > 0

    def first(self, draft: Draft) -> float:
        """The probability that the draft's first token is accepted."""
        return self._first(*self.key(draft))

    def rest(self, draft: Draft) -> float:
        """The probability that a later token of the draft is accepted, given the ones before it were."""
        source, bucket, alternative = key = self.key(draft)
        t = self.long.get(key, _Tally())
        long_run = _shrunk(t.rest_right, t.rest_tried, PRIORS.get(source, DEFAULT_PRIOR)[-1], PRIOR_WEIGHT)
        mine = self.local.get((source, alternative), _Tally())
        return min(Q_MAX, _shrunk(mine.rest_right, mine.rest_tried, long_run, LOCAL_WEIGHT))

    def _first(self, source: str, bucket: int, alternative: bool = False) -> float:
        t = self.long.get((source, bucket, alternative), _Tally())
        prior = PRIORS.get(source, DEFAULT_PRIOR)[0 if alternative else bucket - 1]
        long_run = _shrunk(t.first_right, t.first_tried, prior, PRIOR_WEIGHT)
        mine = self.local.get((source, alternative), _Tally())
        return min(Q_MAX, _shrunk(mine.first_right, mine.first_tried, long_run, LOCAL_WEIGHT))

    def ceiling(self, source: str) -> float:
        """The highest probability any draft of ``source`` would now get for its first token (its best draft at
        the best match)."""
        return max(self._first(source, bucket) for bucket in range(1, MATCH_BUCKETS + 1))

    def observe(self, draft: Draft, offered: int, accepted: int) -> None:
        """A draft of which ``offered`` tokens were verified matched its first ``accepted`` tokens."""
        if offered <= 0:
            return
        source, _, alternative = key = self.key(draft)
        self.long.setdefault(key, _Tally()).add(offered, accepted)
        self.local.setdefault((source, alternative), _Tally()).add(offered, accepted, LOCAL_DECAY)


@dataclass
class Selection:
    drafts: list[Draft]  # each cut to the length worth verifying
    probs: list[list[float]]  # per draft, per token: the estimated probability that it is accepted
    expected_tokens: float


def node_probabilities(drafts: Sequence[Draft], acceptance: AcceptanceModel) -> dict[tuple[int, ...], float]:
    """The probability that each draft-tree node (a token prefix) is accepted.

    A node's token is accepted with the best probability q of the drafts through it, given its parent: a
    draft's first-token probability at depth 1, its later-token probability deeper. Siblings exclude each
    other (the model picks one token), so the i-th most likely child of a node counts only when the ones
    before it missed: q_i * prod(1 - q_j for j < i). Along a path the conditional probabilities multiply, so
    a node is never likelier than its parent.
    """
    q_of: dict[tuple[int, ...], float] = {}
    for draft in drafts:
        first, rest = acceptance.first(draft), acceptance.rest(draft)
        for d in range(1, len(draft.tokens) + 1):
            key = draft.tokens[:d]
            q_of[key] = max(q_of.get(key, 0.0), first if d == 1 else rest)
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


# How far a generation may fall behind plain greedy decoding, in one-token passes (RiskBudget): a fixed stake
# for the first drafts plus a share of the tokens committed so far. Drafts are guesses and the estimates of
# their acceptance are too: where they keep missing, lookahead stops drafting once the passes it paid for beyond
# greedy's reach this bound, so its decode time stays within about (1 + LOSS_SHARE) greedy's plus the stake
# (48 tokens: 0.97x at worst), while a source that hits earns its generation a lead to spend on further drafts.
# The stake is what a completion of a few tokens can lose (0.75 of a pass: 3 tokens 0.8x at worst); with
# none, the first drafts wait until the tokens have paid for a wider pass, which cost the mean 5-18% (both
# models, two repositories: docs/benchmarks.md, "A risk budget without a stake"), and a stake for only the passes
# likely to commit a draft token cost it 3-20% (docs/benchmarks.md, "A stake for the likely drafts only").
RISK_STAKE = 0.75
LOSS_SHARE = 0.015


@dataclass
class RiskBudget:
    """What one generation's drafting has cost beyond greedy decoding: ``behind`` is the cost of its passes
    (one-token passes) less the tokens they committed; negative where drafts have paid. :meth:`allowance` is
    how much more the next pass may cost than a one-token pass, so that even if none of its drafts is right
    the generation stays within ``stake`` plus ``share`` of the tokens committed before the pass."""

    stake: float = RISK_STAKE
    share: float = LOSS_SHARE
    behind: float = 0.0
    committed: int = 0

    def spent(self, pass_cost: float, tokens: int) -> None:
        self.behind += pass_cost - tokens
        self.committed += tokens

    def allowance(self) -> float:
        return self.stake + self.share * self.committed - self.behind


def select(
    drafts: Sequence[Draft],
    acceptance: AcceptanceModel,
    cost: CostModel,
    max_tokens: int,
    max_drafts: int | None = None,
    allowance: float | None = None,
) -> Selection:
    """Cut and choose drafts so that expected committed tokens per unit of pass cost is highest.

    With ``max_drafts`` (G) only the G drafts of highest expected accepted length take part. With
    ``allowance`` (:meth:`RiskBudget.allowance`) no pass costs more than that beyond a one-token pass.

    Tokens are taken in order of probability (a prefix of a draft always before its continuation; equal
    prefixes of different drafts count once); the best prefix of that order wins, possibly none. A pass that
    verifies anything is then filled with the next most likely tokens up to the size the cost model says
    is no dearer (padding is free there).
    """
    if not drafts or max(acceptance.first(d) for d in drafts) <= cost.break_even(max(max_tokens, 1)):
        return Selection([], [], 1.0)  # nothing could pay: a plain greedy step, without ranking anything
    if max_drafts is not None and len(drafts) > max_drafts:
        nodes = node_probabilities(drafts, acceptance)
        worth = [sum(nodes[d.tokens[: i + 1]] for i in range(len(d.tokens))) for d in drafts]
        # Equal worth (the same tokens from two sources): the source more likely right stands for them.
        ranked = sorted(range(len(drafts)), key=lambda i: (-worth[i], -acceptance.first(drafts[i])))
        drafts = [drafts[i] for i in sorted(ranked[: max(max_drafts, 1)])]
    nodes = node_probabilities(drafts, acceptance)
    order = sorted(nodes.items(), key=lambda kv: (-kv[1], len(kv[0])))[:max_tokens]
    costs = cost.costs(len(order) + 1)
    dearest = cost.dearest(allowance)
    best_n, best_rate, expected = 0, 1.0 / cost.interpolated(1), 1.0
    for n, (_, p) in enumerate(order, start=1):
        expected += p
        rate = expected / costs[n + 1]
        if rate > best_rate and costs[n + 1] <= dearest:
            best_n, best_rate = n, rate
    if best_n:
        best_n = max(best_n, cost.pass_size(best_n + 1) - 1)
    chosen = {key for key, _ in order[:best_n]}
    picked: list[Draft] = []
    probs: list[list[float]] = []
    for draft in drafts:
        length = 0
        while length < len(draft.tokens) and draft.tokens[: length + 1] in chosen:
            length += 1
        if length == 0:
            continue
        cut = replace(draft, tokens=draft.tokens[:length])
        picked.append(cut)
        probs.append([nodes[draft.tokens[: d + 1]] for d in range(length)])
    return Selection(picked, probs, 1.0 + sum(nodes[k] for k in chosen))
