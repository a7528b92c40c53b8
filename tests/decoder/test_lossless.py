"""Lookahead output equals greedy output token for token (tiny random Qwen2 in float64: no ties)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
import torch

from lookahead_lsp.decoder.drafts import Draft, TokenIndex
from lookahead_lsp.decoder.greedy import GreedyDecoder
from lookahead_lsp.decoder.lookahead import PROBE_EVERY, LookaheadConfig, LookaheadDecoder
from lookahead_lsp.decoder.policy import CPU_COST, GPU_COST, PACKED_CPU_COST, CostModel
from lookahead_lsp.decoder.types import CancelToken, DecodeRequest
from tests.tiny_model import make_tiny_qwen2

VOCAB = 512
CONFIGS = [(1, 8, 8), (1, 8, 1), (1, 8, 4), (8, 8, 8), (2, 4, 2), (0, 3, 3), (1, 2, 1)]
# fixed tables (no live correction from this machine's timings):
GPU = CostModel(GPU_COST, adaptive=False)  # every draft token is worth verifying: exercises big trees on the CPU
CPU = CostModel(CPU_COST, adaptive=False)


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    return make_tiny_qwen2(vocab_size=VOCAB, seed=1)


def prompts(n: int, seed: int = 0) -> list[list[int]]:
    """Seeded prompts with repeated stretches, so that prompt lookup finds matches."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        base = [rng.randrange(VOCAB) for _ in range(rng.randrange(8, 40))]
        out.append(base + base[: rng.randrange(2, 8)] + [rng.randrange(VOCAB) for _ in range(rng.randrange(0, 6))])
    return out


def greedy(model: torch.nn.Module, request: DecodeRequest) -> list[int]:
    return GreedyDecoder(model).generate(request).token_ids


class Perturbed:
    """A draft source that knows the right answer and returns it whole, cut, corrupted, or replaced."""

    name = "workspace"

    def __init__(self, prompt: Sequence[int], answer: Sequence[int], mode: str, seed: int = 0) -> None:
        self.full = list(prompt) + list(answer)
        self.prompt_len = len(prompt)
        self.mode = mode
        self.rng = random.Random(seed)

    def lookup(self, context: Sequence[int], max_len: int, max_count: int) -> list[Draft]:
        pos = len(context)
        truth = tuple(self.full[pos : pos + max_len]) if self.full[:pos] == list(context) else ()
        noise = tuple(self.rng.randrange(VOCAB) for _ in range(max_len))
        if self.mode == "right" and truth:
            return [Draft(truth, self.name, 4)]
        if self.mode == "partial" and truth:
            cut = self.rng.randrange(len(truth))
            return [Draft(truth[:cut] + noise[: max_len - cut], self.name, 3), Draft(noise, self.name, 1)][:max_count]
        if self.mode == "alternatives" and truth:  # the right continuation first, then wrong ones of the same match
            wrong = [tuple(self.rng.randrange(VOCAB) for _ in range(max_len)) for _ in range(max_count - 1)]
            return [Draft(t, self.name, 4) for t in (truth, *wrong)]
        return [Draft(noise, self.name, 4)]


@pytest.mark.parametrize("mode", ["none", "right", "partial", "wrong"])
@pytest.mark.parametrize("w,n,g", CONFIGS)
def test_lookahead_equals_greedy(model, mode, w, n, g):
    for i, prompt in enumerate(prompts(4, seed=w * 100 + n * 10 + g)):
        want = greedy(model, DecodeRequest(prompt, max_new_tokens=40))
        drafts = [] if mode == "none" else [Perturbed(prompt, want, mode, seed=i)]
        cfg = LookaheadConfig(window=w, ngram=n, verify=g, prompt_drafts=mode != "none", jacobi=mode != "none")
        for cost in (GPU, CPU):
            got = LookaheadDecoder(model, cfg, cost).generate(DecodeRequest(prompt, 40, drafts=drafts))
            assert got.token_ids == want, (mode, w, n, g, i)
            assert got.stats.new_tokens == len(want)


@pytest.mark.parametrize("mode", ["right", "partial", "wrong"])
def test_lookahead_equals_greedy_in_float32_on_onednn_linears(mode):
    """The daemon's CPU model: float32 with oneDNN's linear kernels, whose one-row and many-row products round
    differently; a multi-token pass must still pick the tokens one-token passes pick."""
    fp32 = make_tiny_qwen2(vocab_size=VOCAB, seed=9, dtype=torch.float32)
    assert any(type(m).__name__ == "OneDnnLinear" for m in fp32.modules())
    for i, prompt in enumerate(prompts(6, seed=21)):
        want = greedy(fp32, DecodeRequest(prompt, max_new_tokens=40))
        got = LookaheadDecoder(fp32, LookaheadConfig(), GPU).generate(
            DecodeRequest(prompt, 40, drafts=[Perturbed(prompt, want, mode, seed=i)])
        )
        assert got.token_ids == want, (mode, i)


def test_right_drafts_take_fewer_passes(model):
    prompt = prompts(1, seed=7)[0]
    want = greedy(model, DecodeRequest(prompt, max_new_tokens=48))
    got = LookaheadDecoder(model, LookaheadConfig(), GPU).generate(
        DecodeRequest(prompt, 48, drafts=[Perturbed(prompt, want, "right")])
    )
    assert got.token_ids == want
    assert got.stats.steps <= len(want) // 4
    assert got.stats.hits_by_source["workspace"] > 0
    assert got.stats.mean_accepted > 4


def test_nothing_matching_is_plain_greedy_on_cpu(model):
    """With the CPU cost model, hopeless drafts are not verified: every pass is one token."""
    prompt = prompts(1, seed=8)[0]
    cfg = LookaheadConfig(prompt_drafts=False)
    got = LookaheadDecoder(model, cfg, CPU).generate(DecodeRequest(prompt, 24))
    assert got.stats.tokens_in_passes == got.stats.steps


@pytest.mark.parametrize("mode", ["right", "partial"])
def test_eos_inside_an_accepted_draft(model, mode):
    for i, prompt in enumerate(prompts(5, seed=11)):
        full = greedy(model, DecodeRequest(prompt, max_new_tokens=30))
        eos = frozenset({full[len(full) // 2]})
        want = greedy(model, DecodeRequest(prompt, 30, eos_ids=eos))
        assert len(want) < len(full)
        req = DecodeRequest(prompt, 30, eos_ids=eos, drafts=[Perturbed(prompt, full, mode, seed=i)])
        got = LookaheadDecoder(model, LookaheadConfig(), GPU).generate(req)
        assert got.token_ids == want
        assert got.stats.finish_reason == "eos"


@pytest.mark.parametrize("limit", [1, 2, 3, 7, 8, 9])
def test_max_new_tokens_inside_a_draft(model, limit):
    prompt = prompts(1, seed=12)[0]
    full = greedy(model, DecodeRequest(prompt, max_new_tokens=30))
    got = LookaheadDecoder(model, LookaheadConfig(), GPU).generate(
        DecodeRequest(prompt, limit, drafts=[Perturbed(prompt, full, "right")])
    )
    assert got.token_ids == full[:limit]
    assert got.stats.finish_reason == "length"


def test_stop_callback_drops_drafts_past_the_stop(model):
    for i, prompt in enumerate(prompts(4, seed=13)):
        full = greedy(model, DecodeRequest(prompt, max_new_tokens=30))
        marker = full[len(full) // 3]

        def stop(tokens: Sequence[int], marker: int = marker) -> int | None:
            return tokens.index(marker) + 1 if marker in tokens else None

        want = greedy(model, DecodeRequest(prompt, 30, stop=stop))
        assert want == full[: full.index(marker) + 1]
        req = DecodeRequest(prompt, 30, stop=stop, drafts=[Perturbed(prompt, full, "right", seed=i)])
        got = LookaheadDecoder(model, LookaheadConfig(), GPU).generate(req)
        assert got.token_ids == want
        assert got.stats.finish_reason == "stop"


class FirstTokenIn:
    """A constraint: the first new token must be one of ``ids``."""

    def __init__(self, ids: Sequence[int]) -> None:
        self.ids = list(ids)

    def allowed(self, generated: Sequence[int]) -> Sequence[int] | None:
        return self.ids if not generated else None


def test_constraint_applies_identically(model):
    for i, prompt in enumerate(prompts(4, seed=14)):
        free = greedy(model, DecodeRequest(prompt, max_new_tokens=20))
        constraint = FirstTokenIn([t for t in range(VOCAB) if t % 7 == 3 and t != free[0]])
        want = greedy(model, DecodeRequest(prompt, 20, constraint=constraint))
        assert want[0] in constraint.ids
        req = DecodeRequest(prompt, 20, constraint=constraint, drafts=[Perturbed(prompt, free, "right", seed=i)])
        got = LookaheadDecoder(model, LookaheadConfig(), GPU).generate(req)
        assert got.token_ids == want


def test_prefix_reuse_gives_the_same_output(model):
    base = prompts(1, seed=15)[0]
    follow_ups = [base + [5, 6, 7], base[:-3], base + [5, 6, 7, 8, 9], base]
    for decoder_cls in (GreedyDecoder, lambda m: LookaheadDecoder(m, LookaheadConfig(), GPU)):
        warm = decoder_cls(model)
        warm.generate(DecodeRequest(base, 16))
        for prompt in follow_ups:
            got = warm.generate(DecodeRequest(prompt, 16))
            assert got.token_ids == greedy(model, DecodeRequest(prompt, 16))
            assert got.stats.reused_tokens >= min(len(prompt), len(base) - 3) - 1
            assert got.stats.prefilled_tokens == len(prompt) - got.stats.reused_tokens


def test_workspace_index_drafts(model):
    """An in-memory index holding the continuation elsewhere: drafts come from it and output stays greedy."""
    prompt = prompts(1, seed=16)[0]
    want = greedy(model, DecodeRequest(prompt, max_new_tokens=32))
    index = TokenIndex([[1, 2, 3] + prompt[-6:] + want + [4, 5]])
    got = LookaheadDecoder(model, LookaheadConfig(), GPU).generate(DecodeRequest(prompt, 32, drafts=[index]))
    assert got.token_ids == want
    assert got.stats.tokens_by_source["workspace"] > 0


def test_cancellation_stops_between_steps(model):
    cancel = CancelToken()
    prompt = prompts(1, seed=17)[0]
    calls = []

    def stop(tokens: Sequence[int]) -> int | None:
        calls.append(len(tokens))
        if len(tokens) >= 5:
            cancel.cancel()
        return None

    got = LookaheadDecoder(model, LookaheadConfig(), CPU).generate(DecodeRequest(prompt, 40, stop=stop, cancel=cancel))
    assert got.stats.finish_reason == "cancelled"
    assert 5 <= len(got.token_ids) < 40
    cancel2 = CancelToken()
    cancel2.cancel()
    early = GreedyDecoder(model).generate(DecodeRequest(prompt, 40, cancel=cancel2))
    assert early.token_ids == [] and early.stats.finish_reason == "cancelled"


def test_warm_prefills_ahead_and_changes_nothing(model):
    prompt = prompts(1, seed=18)[0]
    want = greedy(model, DecodeRequest(prompt, max_new_tokens=16))
    for decoder in (GreedyDecoder(model), LookaheadDecoder(model, LookaheadConfig(), GPU)):
        assert decoder.warm(prompt[:-2]) == len(prompt) - 3
        got = decoder.generate(DecodeRequest(prompt, 16))
        assert got.token_ids == want
        assert got.stats.prefilled_tokens == 3  # the two new tokens and the one warm leaves for the logits
    cancel = CancelToken()
    cancel.cancel()
    assert GreedyDecoder(model).warm(prompt, cancel) == 0


def test_a_source_out_of_favour_is_verified_again_once_it_proves_right(model):
    """A source with a poor long-run record is not worth a pass at first; its drafts are followed anyway
    (settled by the committed tokens), so once they keep proving right they are verified again."""
    prompt = prompts(1, seed=11)[0]
    want = greedy(model, DecodeRequest(prompt, max_new_tokens=48))
    decoder = LookaheadDecoder(model, LookaheadConfig(prompt_drafts=False, jacobi=False, verify=1), CPU)
    record = Draft((0,), "workspace", 4)
    for _ in range(40):  # a long run of misses: the estimate starts far below a CPU pass's worth
        decoder.acceptance.observe(record, offered=4, accepted=0)
    got = decoder.generate(DecodeRequest(prompt, 48, drafts=[Perturbed(prompt, want, "right")]))
    assert got.token_ids == want
    assert got.stats.accepted_per_step[0] == 1  # not trusted at first
    assert got.stats.hits_by_source["workspace"] > 0
    assert got.stats.steps < len(want) // 2


def test_a_sources_alternatives_are_counted_apart_from_its_best_draft(model):
    """Several drafts of one source a step (G = 4): the decoder marks all but the first of the source's answer as
    alternatives, so their misses leave the estimate of the source's best draft, right every time, where its own
    record puts it."""
    prompt = prompts(1, seed=13)[0]
    want = greedy(model, DecodeRequest(prompt, max_new_tokens=32))
    decoder = LookaheadDecoder(model, LookaheadConfig(prompt_drafts=False, jacobi=False, verify=4), GPU)
    got = decoder.generate(DecodeRequest(prompt, 32, drafts=[Perturbed(prompt, want, "alternatives")]))
    assert got.token_ids == want
    tallies = decoder.acceptance.long
    best, alternative = tallies[("workspace", 4, False)], tallies[("workspace", 4, True)]
    assert best.first_tried > 0 and best.first_right == best.first_tried
    assert alternative.first_tried >= 2 * best.first_tried and alternative.first_right == 0
    right, wrong = Draft((1,), "workspace", 4), Draft((1,), "workspace", 4, rank=1)
    assert decoder.acceptance.first(right) > 0.8 > decoder.acceptance.first(wrong)


def test_relearning_starts_a_generation_from_what_the_decoder_knew_before(model):
    """What one generation teaches (a source proving right) makes the next one faster; :meth:`relearn` takes
    the decoder back to before it, so a benchmark's repeated round is the first round again, step for step."""
    prompt = prompts(1, seed=11)[0]
    want = greedy(model, DecodeRequest(prompt, max_new_tokens=48))
    decoder = LookaheadDecoder(model, LookaheadConfig(prompt_drafts=False, jacobi=False, verify=1), CPU)
    record = Draft((0,), "workspace", 4)
    for _ in range(40):
        decoder.acceptance.observe(record, offered=4, accepted=0)
    before = decoder.learned()

    def run() -> list[int]:
        got = decoder.generate(DecodeRequest(prompt, 48, drafts=[Perturbed(prompt, want, "right")]))
        assert got.token_ids == want
        return got.stats.accepted_per_step

    first = run()
    taught = run()  # the source's record now says it is right: trusted from the first step
    assert first[0] == 1 and taught[0] > 1 and len(taught) < len(first)
    decoder.relearn(before)
    assert run() == first
    decoder.relearn(before)
    assert run() == first  # relearn keeps its own copy: the run after it did not change what it goes back to


class Counting(Perturbed):
    """A Perturbed source that counts how often it is asked."""

    def __init__(self, prompt: Sequence[int], answer: Sequence[int], mode: str) -> None:
        super().__init__(prompt, answer, mode)
        self.calls = 0

    def lookup(self, context: Sequence[int], max_len: int, max_count: int) -> list[Draft]:
        self.calls += 1
        return super().lookup(context, max_len, max_count)


def test_a_source_that_cannot_pay_is_asked_only_every_few_steps(model):
    """Where a second row costs 0.18 of a pass (the native kernel's table with each extra row twice as dear), a
    source whose drafts keep missing falls below the floor at which any of its drafts could pay within a few
    steps; from then on it is asked only every PROBE_EVERY-th
    step (its drafts, followed as shadows, are how it could come back), and the output is greedy's. A source
    that is right is asked at every step."""
    prompt = prompts(1, seed=13)[0]
    want = greedy(model, DecodeRequest(prompt, max_new_tokens=48))
    cfg = LookaheadConfig(prompt_drafts=False, jacobi=False, verify=1)
    dear = CostModel(tuple((n, 1 + 2 * (c - 1)) for n, c in PACKED_CPU_COST), adaptive=False)
    assert dear.break_even(15) > 0.15
    wrong = Counting(prompt, want, "wrong")
    got = LookaheadDecoder(model, cfg, dear).generate(DecodeRequest(prompt, 48, drafts=[wrong]))
    assert got.token_ids == want
    assert got.stats.steps // PROBE_EVERY <= wrong.calls < got.stats.steps // 2
    right = Counting(prompt, want, "right")
    got = LookaheadDecoder(model, cfg, dear).generate(DecodeRequest(prompt, 48, drafts=[right]))
    assert got.token_ids == want
    assert right.calls == got.stats.steps and got.stats.steps < len(want) // 2


def test_drafts_longer_than_the_ngram(model):
    """Prompt, suffix and workspace drafts are not bound to the Jacobi n-gram size: one pass can accept more."""
    prompt = prompts(1, seed=12)[0]
    want = greedy(model, DecodeRequest(prompt, max_new_tokens=40))
    for length, most in ((4, 4), (15, 15)):
        cfg = LookaheadConfig(ngram=5, draft_len=length, verify=1, prompt_drafts=False, jacobi=False)
        got = LookaheadDecoder(model, cfg, GPU).generate(
            DecodeRequest(prompt, 40, drafts=[Perturbed(prompt, want, "right")])
        )
        assert got.token_ids == want
        assert max(got.stats.accepted_per_step) == most + 1  # the draft and the model's next token


class CancelAfter(CancelToken):
    """A cancel token that turns cancelled after it has been asked ``reads`` times (mid-pass, between layers)."""

    def __init__(self, reads: int) -> None:
        super().__init__()
        self.reads = reads

    @property
    def cancelled(self) -> bool:
        self.reads -= 1
        if self.reads < 0:
            self.cancel()
        return super().cancelled


@pytest.mark.parametrize("reads", [1, 2])  # the tiny model's layer 0 or layer 1 (one read before the chunk)
def test_a_cancel_stops_a_pass_between_layers_and_keeps_the_cache_whole(model, reads):
    """Cancelled inside a prefill chunk or a decoding pass: the pass stops at the next layer, no entry of it
    stays, and the next request on the same cache decodes exactly as greedy."""
    from lookahead_lsp.decoder.forward import prefill
    from lookahead_lsp.decoder.kv import PrefixKV

    prompt = prompts(1, seed=19)[0]
    want = greedy(model, DecodeRequest(prompt, max_new_tokens=16))
    kv = PrefixKV()
    prefill(model, kv, prompt[:4])
    assert prefill(model, kv, prompt[4:], CancelAfter(reads)) is None
    assert len(kv) == 4 and kv.cache.get_seq_length() == 4
    assert {layer.keys.shape[-2] for layer in kv.cache.layers} == {4}
    for decoder in (GreedyDecoder(model), LookaheadDecoder(model, LookaheadConfig(), GPU)):
        # prefill: 4 reads (chunk, 2 layers, after); each step: 1 before, then one per layer
        stopped = decoder.generate(DecodeRequest(prompt, 16, cancel=CancelAfter(4 + 3 * 2 + reads)))
        assert stopped.stats.finish_reason == "cancelled" and len(stopped.token_ids) < 16
        assert {layer.keys.shape[-2] for layer in decoder.kv.cache.layers} == {len(decoder.kv)}
        assert decoder.generate(DecodeRequest(prompt, 16)).token_ids == want


def test_a_cheaper_prefill_model_keeps_lookahead_equal_to_greedy():
    """Prompts prefilled by a float32 copy of the float64 model (as bfloat16 prefills for float32 on a CPU):
    the copy does the prefill, the cache is handed back in the decoding precision, and greedy and lookahead
    decoding after that shared prefill still agree token for token."""
    from lookahead_lsp.decoder.runtime.prefill import use_prefill_model

    model = make_tiny_qwen2(vocab_size=VOCAB, seed=5)
    fast = make_tiny_qwen2(vocab_size=VOCAB, seed=5, dtype=torch.float32)
    runs = []
    fast.model.layers[0].register_forward_pre_hook(lambda *_: runs.append(1))
    use_prefill_model(model, fast)
    try:
        for i, prompt in enumerate(prompts(3, seed=21)):
            want = GreedyDecoder(model).generate(DecodeRequest(prompt, 24))
            got = LookaheadDecoder(model, LookaheadConfig(), GPU).generate(
                DecodeRequest(prompt, 24, drafts=[Perturbed(prompt, want.token_ids, "partial", seed=i)])
            )
            assert got.token_ids == want.token_ids
        assert len(runs) == 6  # every prefill ran on the copy (one chunk each), no decoding pass did
        decoder = GreedyDecoder(model)
        decoder.generate(DecodeRequest(prompts(1, seed=22)[0], 4))
        assert {layer.keys.dtype for layer in decoder.kv.cache.layers} == {torch.float64}
    finally:
        use_prefill_model(model, None)
