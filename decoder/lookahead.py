"""decoder: lossless lookahead decoding: several tokens per forward pass, output identical to greedy decoding.

One step is ONE forward pass over the current token, the lookahead branch (W Jacobi chains of N-1 guesses)
and the verification branch (up to G candidate n-grams from the draft sources), merged into a token tree
with a 4-D attention mask and explicit position ids. Greedy verification keeps the longest path whose tokens
are the model's own argmax choices, plus the model's next token; the KV entries of that path are kept and
the rest dropped. A cost model decides per step which draft tokens are worth their share of the pass, so
where nothing is likely to match a step is a plain greedy step.
"""

from __future__ import annotations

import copy
import logging
import time
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field, replace

import torch

from lookahead_lsp.decoder.drafts import Draft, DraftSource, JacobiPool, PromptNgrams
from lookahead_lsp.decoder.forward import forward
from lookahead_lsp.decoder.ids import common_prefix_len
from lookahead_lsp.decoder.kv import PrefixKV
from lookahead_lsp.decoder.policy import (
    LOSS_SHARE,
    RISK_STAKE,
    AcceptanceModel,
    CostModel,
    RiskBudget,
    default_jacobi,
    default_verify,
    select,
)
from lookahead_lsp.decoder.runtime.packed_model import is_packed
from lookahead_lsp.decoder.slots import DEFAULT_SLOTS
from lookahead_lsp.decoder.steps import Generation, SlotDecoder, allowed_index, argmax, drive, pick, plain_step
from lookahead_lsp.decoder.tree import TokenTree, build_tree, verify
from lookahead_lsp.decoder.types import DecodeRequest, DecodeResult

log = logging.getLogger(__name__)

PROBE_EVERY = 4  # a source that cannot pay now is still asked every this many steps


@dataclass
class LookaheadConfig:
    """W window (Jacobi chains), N n-gram size, G verification set size, and which sources draft."""

    window: int = 1
    ngram: int = 8
    verify: int | None = None  # None: by the device's cost (decoder.policy.default_verify)
    draft_len: int = 15  # longest draft from the prompt, suffix and workspace (Jacobi n-grams hold N-1)
    max_match: int = 4  # longest context tail matched by the prompt n-gram lookup
    prompt_drafts: bool = True
    jacobi: bool | None = None  # None: by the device's cost (decoder.policy.default_jacobi)
    disabled_sources: frozenset[str] = field(default_factory=frozenset)
    risk_stake: float = RISK_STAKE  # the risk budget (decoder.policy.RiskBudget): passes it may lose at once
    loss_share: float = LOSS_SHARE  # and a share of each token committed

    def __post_init__(self) -> None:
        if self.window < 0 or self.ngram < 2 or (self.verify or 0) < 0 or self.max_match < 1 or self.draft_len < 1:
            raise ValueError(
                f"invalid lookahead parameters W={self.window} N={self.ngram} G={self.verify} "
                f"draft length {self.draft_len}"
            )
        if self.risk_stake < 0 or self.loss_share < 0:
            raise ValueError(f"invalid risk budget: stake {self.risk_stake}, share {self.loss_share}")

    @property
    def longest_draft(self) -> int:
        return max(self.draft_len, self.ngram - 1)


class LookaheadDecoder(SlotDecoder):
    """Lookahead decoding over a transformers causal LM; keeps its KV prefix and acceptance estimates."""

    def __init__(
        self,
        model: torch.nn.Module,
        config: LookaheadConfig | None = None,
        cost: CostModel | None = None,
        slots: int = DEFAULT_SLOTS,
    ):
        super().__init__(model, slots)
        device = next(model.parameters()).device
        self.cost = cost or CostModel.for_device(device.type, is_packed(model))
        self.config = config or LookaheadConfig()
        if self.config.verify is None:
            self.config = replace(self.config, verify=default_verify(self.cost))
        if self.config.jacobi is None:
            self.config = replace(self.config, jacobi=default_jacobi(self.cost, self.config.ngram))
        self.acceptance = AcceptanceModel()
        # each cache slot's prompt drafts, as its last generation left them (re-aimed at the next prompt)
        self._prompt_ngrams: OrderedDict[Hashable | None, PromptNgrams] = OrderedDict()

    def prompt_ngrams(self, slot: Hashable | None, prompt: Sequence[int]) -> PromptNgrams:
        """The prompt-lookup table of a generation in ``slot``: its last one's, re-aimed at ``prompt`` (one table
        per cache slot, the least recently used let go beyond the slots and their spare)."""
        table = self._prompt_ngrams.pop(slot, None) or PromptNgrams("prompt", self.config.max_match)
        table.follow(prompt)
        self._prompt_ngrams[slot] = table
        while len(self._prompt_ngrams) > self.slots.capacity + 1:
            self._prompt_ngrams.popitem(last=False)
        return table

    def generate(self, request: DecodeRequest) -> DecodeResult:
        kv = self.slots.for_prompt(request.slot, request.prompt_ids)
        try:
            return drive(self.model, kv, request, lambda gen: _Run(self, request, gen, kv))
        finally:
            self.cost.flush()  # the corrected table to its file, outside the timed steps

    def learned(self) -> object:
        """Copies of the acceptance estimates and the pass-cost model, the two things generations teach it."""
        return copy.deepcopy(_Learned(self.acceptance, self.cost))

    def relearn(self, learned: object) -> None:
        if not isinstance(learned, _Learned):
            raise TypeError(f"not what LookaheadDecoder.learned returned: {type(learned).__name__}")
        self.acceptance = copy.deepcopy(learned.acceptance)
        self.cost = copy.deepcopy(learned.cost)


@dataclass(frozen=True)
class _Learned:
    acceptance: AcceptanceModel
    cost: CostModel


class _Run:
    """The state of one generation: its draft sources, Jacobi chains, and the step itself."""

    def __init__(self, decoder: LookaheadDecoder, request: DecodeRequest, gen: Generation, kv: PrefixKV) -> None:
        self.d = decoder
        self.kv = kv
        self.cfg = decoder.config
        self.gen = gen
        self.g = decoder.config.verify or 0  # set by the decoder when the configuration left it open
        decoder.acceptance.begin()
        self.context: list[int] = list(request.prompt_ids)
        self.prompt = decoder.prompt_ngrams(request.slot, self.context)
        self.pool = JacobiPool()
        self.sources: list[DraftSource] = []
        if self.cfg.prompt_drafts:
            self.sources.append(self.prompt)
        self.sources.extend(s for s in request.drafts if s.name not in self.cfg.disabled_sources)
        if self.cfg.jacobi and self.cfg.window > 0:
            self.sources.append(self.pool)
        self.chains: list[list[int]] = [[] for _ in range(self.cfg.window if self.cfg.jacobi else 0)]
        self.shadows: list[tuple[Draft, int]] = []  # drafts not verified, each with where it would have started
        self.max_tokens = max(self.g, 1) * self.cfg.longest_draft  # draft tokens one pass may verify
        # what drafting has cost this generation beyond greedy decoding
        self.risk = RiskBudget(self.cfg.risk_stake, self.cfg.loss_share)

    def extend(self, tokens: Sequence[int]) -> None:
        self.context.extend(tokens)
        self.prompt.write(tokens)
        self._settle_shadows()

    # --- evidence from drafts that were not verified --------------------------------------------------------
    def _shadow(self, found: Sequence[Draft], verified: Sequence[Draft]) -> None:
        """Follow one unverified draft per source until the committed tokens confirm or refute it.

        Without this, a source whose estimate fell below the cost of a wider pass is never verified again in
        this generation, however right its drafts turn out to be; the committed text settles them for free."""
        checked = {(d.source, d.tokens[:1]) for d in verified}
        followed = {d.source for d, _ in self.shadows}
        for draft in found:
            if draft.source not in followed and (draft.source, draft.tokens[:1]) not in checked:
                self.shadows.append((draft, len(self.context)))
                followed.add(draft.source)

    def _settle_shadows(self) -> None:
        waiting = []
        for draft, start in self.shadows:
            seen = self.context[start : start + len(draft.tokens)]
            matched = common_prefix_len(draft.tokens, seen)
            if matched < len(seen) or len(seen) == len(draft.tokens):
                self.d.acceptance.observe(draft, len(draft.tokens), matched)
            else:
                waiting.append((draft, start))
        self.shadows = waiting

    # --- drafting -------------------------------------------------------------------------------------
    def drafts(self, allowance: float) -> list[Draft]:
        """This step's drafts from every source that could pay for its tokens now (and, every PROBE_EVERY-th
        step, from the others too: their drafts, followed as shadows, are how a source comes back). Where the
        risk budget's ``allowance`` cannot pay for one draft token, only a probing step looks drafts up: the
        others are the greedy decoder's steps, with none of the lookups' cost."""
        found: list[Draft] = []
        cost = self.d.cost
        floor = cost.break_even(self.max_tokens)
        probe = self.gen.stats.steps % PROBE_EVERY == 0
        affordable = cost.cost(2) <= cost.dearest(allowance)  # one draft token, as select() bounds a pass
        for source in self.sources:
            if not probe and (not affordable or self.d.acceptance.ceiling(source.name) <= floor):
                continue  # a lookup costs about a tenth of a millisecond, a few where the CPU's caches are cold
            try:
                answer = source.lookup(self.context, self.cfg.longest_draft, self.g)
                found.extend(replace(d, rank=i) if i else d for i, d in enumerate(answer))
            except Exception:  # a broken source must never break decoding: drafts are only guesses
                log.exception("draft source %s failed", getattr(source, "name", source))
        for i, chain in enumerate(self.chains):
            self.chains[i] = chain = self._fill(chain, found)
            found.append(Draft(tuple(chain), "jacobi", 1))
        return self._constrained(found)

    def _fill(self, chain: list[int], found: Sequence[Draft]) -> list[int]:
        """Pad a Jacobi chain to N-1 guesses: from another draft where the chain is empty, else its last token."""
        n = self.cfg.ngram - 1
        if not chain:
            chain = list(found[0].tokens) if found else list(self.context[-n:])
        tail = chain[-1] if chain else self.context[-1]
        return (chain + [tail] * n)[:n]

    def _constrained(self, drafts: list[Draft]) -> list[Draft]:
        """Cut drafts at the first token the constraint forbids (they could never be accepted)."""
        if self.gen.request.constraint is None:
            return drafts
        out = []
        for draft in drafts:
            keep = 0
            for i, token in enumerate(draft.tokens):
                allowed = self.gen.allowed(draft.tokens[:i])
                if allowed is not None and token not in allowed_index(allowed)[0]:
                    break
                keep = i + 1
            if keep:
                out.append(replace(draft, tokens=draft.tokens[:keep]))
        return out

    # --- one step -------------------------------------------------------------------------------------
    def step(self) -> list[int]:
        """One forward pass; returns the new tokens it produced (accepted drafts plus the model's next token).

        The pass's own time corrects the cost table (what a pass of its size costs); the risk budget is charged
        the pass at the table's cost and the step's time outside it, drafting and bookkeeping, against a
        one-token pass: the greedy decoder's step is that pass alone, so time spent looking for drafts that were
        not worth a wider pass counts as lost to it (CostModel.charged)."""
        gen, kv = self.gen, self.kv
        current = gen.tokens[-1]
        g = self.g
        started = time.perf_counter()
        allowance = self.risk.allowance()
        found = self.drafts(allowance)
        cost = self.d.cost
        selection = select(found, self.d.acceptance, cost, self.max_tokens, g, allowance)
        if not selection.drafts and not self.chains:  # nothing worth verifying: the greedy decoder's step
            passing = time.perf_counter()
            token = plain_step(self.d.model, kv, gen)
            took = time.perf_counter() - passing
            cost.observe(1, took)
            self._shadow(found, [])
            self.risk.spent(cost.charged(1, took, time.perf_counter() - started - took), 1)
            return [token]
        ranked = sorted(zip(selection.drafts, selection.probs, strict=True), key=lambda dp: -sum(dp[1]))
        tree = build_tree(current, [(d.tokens, d.source, p) for d, p in ranked])
        start = kv.cache.get_seq_length()
        passing = time.perf_counter()
        if len(tree) == 1:
            logits = forward(self.d.model, kv, [current], between_layers=gen.between_layers)
        else:
            positions = [start + depth for depth in tree.depths]
            mask = None if tree.is_chain() else tree.attention()
            logits = forward(self.d.model, kv, tree.tokens, positions, mask, between_layers=gen.between_layers)
        path, bonus = verify(tree, logits, lambda lg, toks: pick(lg, gen.allowed(toks)))
        accepted = [tree.tokens[i] for i in path]
        kv.keep_selected(start, [0, *path], [current, *accepted])
        took = time.perf_counter() - passing  # verify waited for the device
        cost.observe(len(tree), took)
        self._record(tree, [d for d, _ in ranked], accepted)
        self._shadow(found, selection.drafts)
        self._advance_chains(tree, logits, len(accepted))
        self.risk.spent(cost.charged(len(tree), took, time.perf_counter() - started - took), len(accepted) + 1)
        return [*accepted, bonus]

    def _record(self, tree: TokenTree, drafts: Sequence[Draft], accepted: Sequence[int]) -> None:
        stats = self.gen.stats
        stats.steps += 1
        stats.tokens_in_passes += len(tree)
        stats.accepted_per_step.append(len(accepted) + 1)
        best_source, best = "", 0
        for draft in drafts:
            matched = common_prefix_len(draft.tokens, accepted)
            self.d.acceptance.observe(draft, len(draft.tokens), matched)
            if matched > best:
                best_source, best = draft.source, matched
        if best:
            stats.hits_by_source[best_source] += 1
            stats.tokens_by_source[best_source] += best

    def _advance_chains(self, tree: TokenTree, logits: torch.Tensor, m: int) -> None:
        """Jacobi update: each chain's next guesses are the model's outputs at its own positions, shifted by
        the tokens just accepted; the n-grams seen on the way go to the pool."""
        kids = tree.children()
        for i, chain in enumerate(self.chains):
            nodes, node = [0], 0
            for token in chain:
                node = kids[node].get(token, -1)
                if node < 0:
                    break
                nodes.append(node)
            outputs = [argmax(logits[n]) for n in nodes]
            for k in range(len(nodes) - 1):
                self.pool.add(tree.tokens[nodes[k]], outputs[k:])
            # outputs[k] guesses position start+k+1; the next step's chain starts at start+m+2.
            fresh = outputs[m + 1 :]
            stale = chain[len(nodes) :] if len(nodes) > m + 1 else chain[m + 1 :]
            self.chains[i] = fresh + stale if m < len(chain) else []
