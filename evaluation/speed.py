"""The speed benchmark: every decoder configuration on the same holes, each paired with plain greedy.

For each hole the prompt is built once (``context/prompt.py``), the suffix after the cursor becomes the
``suffix`` draft source and a fresh workspace index (``context/ngram_index.py``) is built from the corpus
with the hole's file as the user has it (``prefix + suffix``). Then every configuration decodes it in turn
(interleaved per hole, so that load on a shared machine hits all of them alike).

The requests are the daemon's (``lsp_server/completion.py: decode_request``), its prompts and snippets too
(:class:`ContextBuilder`). Lossless check: all decoders run with stop rules off and compare their raw token ids over
``max_new_tokens`` (or up to EOS) with ``decoder/greedy.py``'s; transformers' ``generate`` has no stop
callback, so this is the one comparison that holds for every decoder.

Times: ``decode_ms`` runs from the end of the prefill to the last token. The speedup of a configuration
is the geometric mean over holes of ``greedy decode ms / its decode ms`` (paired per hole); prefill is
reported apart (our decoders reuse the KV prefix of their previous call, transformers' does not), and so is the
time to the whole completion (prefill + decode), each with its ratio against greedy's.

The peer, llama.cpp's ``llama-server`` on the same GGUF (``llama-server``, ``llama-server-ngram``:
``evaluation/llama_peer.py``), decodes the same prompt token ids; its servers are started by the caller and
passed in as ready decoders.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import re
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Literal

from lookahead_lsp.context.definitions import CursorContext, SymbolTable, cursor_context
from lookahead_lsp.context.ngram_index import NgramIndex
from lookahead_lsp.context.prompt import BuiltPrompt, PromptInput, PromptLayout, layout_builder
from lookahead_lsp.context.snippets import Snippet, SnippetIndex
from lookahead_lsp.decoder.backend import LocalBackend, local_backend
from lookahead_lsp.decoder.cost_table import describe, table_path
from lookahead_lsp.decoder.drafts import DraftSource
from lookahead_lsp.decoder.lookahead import LookaheadConfig
from lookahead_lsp.decoder.policy import CostModel
from lookahead_lsp.decoder.runtime.model import stop_token_ids
from lookahead_lsp.decoder.types import Decoder, DecodeRequest, DecodeResult, DecodeStats
from lookahead_lsp.evaluation.hf_baselines import HF_PROMPT_LOOKUP_TOKENS, HFGenerateDecoder
from lookahead_lsp.evaluation.peers import ALL_PEERS, PEERS
from lookahead_lsp.evaluation.workloads import Corpus, Hole
from lookahead_lsp.lsp_server.completion import Limits, decode_request
from lookahead_lsp.lsp_server.config import Config

Progress = Callable[[str, "float | None"], None]

LOOKAHEAD_SOURCES = ("prompt", "suffix", "workspace", "jacobi")
REFERENCE = "greedy"
# (W, N, G): W=1 with several G (the CPU's sweet spot), and the lookahead paper's (8, 8, 8).
SWEEP: tuple[tuple[int, int, int], ...] = ((1, 8, 1), (1, 8, 2), (1, 8, 4), (1, 8, 8), (2, 6, 4), (8, 8, 8))
_WNG = re.compile(r"lookahead-W(\d+)N(\d+)G(\d+)$")
_RISK = re.compile(r"lookahead-risk(\d+(?:\.\d+)?)\+(\d+(?:\.\d+)?)$")  # a risk budget: stake + share a token


# --- decoder configurations ----------------------------------------------------------------------------


@dataclass(frozen=True)
class DecoderConfig:
    """One named way to decode: ours (greedy, lookahead with options) or transformers' ``generate``."""

    name: str
    family: Literal["greedy", "hf", "lookahead", "peer"]
    prompt_lookup: int | None = None  # hf: prompt_lookup_num_tokens
    wng: tuple[int, int, int] | None = None  # lookahead (W, N, G); None: the decoder's defaults
    sources_off: frozenset[str] = frozenset()  # lookahead draft sources switched off
    jacobi: bool | None = None  # lookahead: the Jacobi branch on/off; None: where width is cheap (the default)
    risk: tuple[float, float] | None = None  # lookahead's risk budget (stake, share); None: the decoder's default

    def build(self, model: Any, cost: CostModel | None = None) -> Decoder:
        """The decoder; lookahead uses ``cost`` (measured, as the daemon does) or the device's default."""
        if self.family == "hf":
            return HFGenerateDecoder(model, self.prompt_lookup)
        if self.family == "peer":
            raise ValueError(f"{self.name} is a running llama-server: start it with evaluation/llama_peer.py")
        if self.family == "greedy":
            return local_backend(model, "greedy")
        shape = {} if self.wng is None else dict(zip(("window", "ngram", "verify"), self.wng, strict=True))
        config = LookaheadConfig(
            **shape,
            prompt_drafts="prompt" not in self.sources_off,
            jacobi=False if "jacobi" in self.sources_off else self.jacobi,
            disabled_sources=self.sources_off - {"prompt", "jacobi"},
        )
        if self.risk is not None:
            config = dataclasses.replace(config, risk_stake=self.risk[0], loss_share=self.risk[1])
        return local_backend(model, "lookahead", config, cost)


def parse_decoders(spec: str, sweep: bool = False) -> list[DecoderConfig]:
    """Configurations from ``greedy,hf,hf-pld,lookahead,lookahead-no-<source>,ablations,lookahead-WxNyGz``.

    ``ablations`` stands for lookahead with each draft source off in turn, and with the Jacobi branch forced on
    (``lookahead-jacobi``: by default it runs only where a wide pass is cheap); ``llama-servers`` for every
    configuration of llama.cpp's peer; ``sweep`` adds the SWEEP grid.
    Plain greedy is always first: it is the reference for speedups and for the lossless check.
    """
    names: list[str] = [REFERENCE]
    for item in (part.strip() for part in spec.split(",")):
        if item == "ablations":
            names.extend(f"lookahead-no-{source}" for source in LOOKAHEAD_SOURCES)
            names.append("lookahead-jacobi")
        elif item == ALL_PEERS:
            names.extend(PEERS)
        elif item:
            names.append(item)
    if sweep:
        names.extend(f"lookahead-W{w}N{n}G{g}" for w, n, g in SWEEP)
    return [_config(name) for name in dict.fromkeys(names)]


def _config(name: str) -> DecoderConfig:
    if name == "greedy":
        return DecoderConfig(name, "greedy")
    if name == "hf":
        return DecoderConfig(name, "hf")
    if name == "hf-pld":
        return DecoderConfig(name, "hf", prompt_lookup=HF_PROMPT_LOOKUP_TOKENS)
    if name == "lookahead":
        return DecoderConfig(name, "lookahead")
    if name == "lookahead-jacobi":
        return DecoderConfig(name, "lookahead", jacobi=True)

    if name in PEERS:
        return DecoderConfig(name, "peer")
    if name.startswith("lookahead-no-") and name.removeprefix("lookahead-no-") in LOOKAHEAD_SOURCES:
        return DecoderConfig(name, "lookahead", sources_off=frozenset({name.removeprefix("lookahead-no-")}))
    match = _WNG.match(name)
    if match:
        w, n, g = (int(x) for x in match.groups())
        return DecoderConfig(name, "lookahead", wng=(w, n, g))
    risk = _RISK.match(name)
    if risk:
        return DecoderConfig(name, "lookahead", risk=(float(risk.group(1)), float(risk.group(2))))
    known = "greedy, hf, hf-pld, lookahead, lookahead-jacobi, ablations, "
    known += "lookahead-no-<" + "|".join(LOOKAHEAD_SOURCES) + ">, "
    known += ", ".join(PEERS)
    raise ValueError(f"unknown decoder {name!r}; known: {known}, lookahead-W<w>N<n>G<g>, lookahead-risk<stake>+<share>")


# --- per-hole inputs -----------------------------------------------------------------------------------


@dataclass
class HoleInputs:
    """What every decoder gets for one hole: the prompt (``context/prompt.py``'s) and the workspace index."""

    hole: Hole
    built: BuiltPrompt
    workspace: DraftSource | None

    @property
    def prompt_ids(self) -> list[int]:
        return list(self.built.token_ids)

    @property
    def extra_drafts(self) -> list[DraftSource]:
        """The draft sources besides the suffix (which :func:`~lsp_server.completion.decode_request` adds)."""
        return [self.workspace] if self.workspace is not None else []


class ContextBuilder:
    """Prompts, snippets and workspace indexes for the holes of one corpus, as the daemon builds them.

    Each corpus file is tokenized once; the snippet index holds every file (the daemon's state with every file
    open) and a hole's own file is excluded from its query (the prompt holds that file's prefix and suffix
    anyway). The prompt builder and the snippet query window are the daemon's (``context/prompt.py:
    layout_builder``, ``context/snippets.py: query_window``). ``heal``: token healing in the prompt (off for
    the speed benchmark, where transformers' baselines cannot constrain).
    """

    def __init__(
        self,
        corpus: Corpus,
        tokenizer: Any,
        token_budget: int = 1024,
        heal: bool = False,
        layout: PromptLayout = "psm",
        anchored: bool = False,
        definitions: bool = True,
    ) -> None:
        self.corpus = corpus
        self.tokenizer = tokenizer
        self.prompt_builder = layout_builder(tokenizer, layout, token_budget, heal, anchored)
        self.snippet_index = SnippetIndex()
        self.symbols = SymbolTable() if definitions else None  # None: BM25 windows only (the context before #76)
        for f in corpus.files:
            self.snippet_index.add_document(f.path, f.text)
            if self.symbols is not None:
                self.symbols.update(f.path, f.text)
        self._ids: dict[str, list[int]] = {}

    @property
    def repo_name(self) -> str:
        return self.corpus.name.split()[0]

    def token_ids(self, path: str) -> list[int]:
        if path not in self._ids:
            self._ids[path] = self._encode(self.corpus.file(path).text)
        return self._ids[path]

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def workspace_index(self, hole: Hole) -> DraftSource:
        """The workspace n-gram index as the daemon would have it at the hole (its file without the middle)."""
        index = NgramIndex()
        files = [(f.path, self.token_ids(f.path)) for f in self.corpus.files if f.path != hole.path]
        files.append((hole.path, self._encode(hole.text_before_typing)))
        index.build(files)
        index.set_preferences(hole.path)
        return index

    def context(self, hole: Hole) -> CursorContext:
        """The context for the hole's cursor as the daemon picks it (``context/definitions.py``: the definitions
        of the names it uses from the symbol table, then the BM25 windows ranked against the daemon's query
        window) and its file's import statements."""
        return cursor_context(self.snippet_index, self.symbols, hole.path, hole.text_before_typing, len(hole.prefix))

    def snippets(self, hole: Hole) -> list[Snippet]:
        """The context sections for the hole's cursor (:meth:`context`)."""
        return list(self.context(hole).snippets)

    def prompt(self, hole: Hole, workspace: bool = True, snippets: Sequence[Snippet] | None = None) -> BuiltPrompt:
        """``context/prompt.py``'s prompt for the hole; ``workspace``: with the context from the other files
        (``snippets``: these sections instead of the hole's own)."""
        context = self.context(hole) if workspace else CursorContext()
        prompt_input = PromptInput(
            path=hole.path,
            text=hole.text_before_typing,
            offset=len(hole.prefix),
            repo_name=self.repo_name,
            snippets=context.snippets if snippets is None else snippets,
            imports=context.imports,
        )
        return self.prompt_builder.build(prompt_input)

    def inputs(self, hole: Hole, workspace: bool = True) -> HoleInputs:
        """The prompt and, with ``workspace``, snippets in it and the workspace index as a draft source."""
        return HoleInputs(hole, self.prompt(hole, workspace), self.workspace_index(hole) if workspace else None)


# --- running -------------------------------------------------------------------------------------------


@dataclass
class Run:
    """One configuration on one hole."""

    hole_id: str
    workload: str
    config: str
    token_ids: list[int]
    stats: DecodeStats  # the fastest round's decoding (the first round's prefill)
    identical: bool  # the raw token ids equal plain greedy's
    # every round's decode time, in order: the first is what a user meets (a peer's later rounds may draft from
    # its own earlier output of the same hole: llama.cpp's ngram-mod keeps its table from request to request)
    rounds_ms: tuple[float, ...] = ()

    @property
    def first_ms(self) -> float:
        """The first round's decode time (the fastest's where the rounds were not kept)."""
        return self.rounds_ms[0] if self.rounds_ms else self.stats.decode_ms

    def paired_over(self, base: Run) -> float:
        """``base``'s time over this run's, round by round, the median of the rounds.

        Each round runs the configurations back to back on the hole, so a pair meets the same minute of the host,
        whose memory rate moves by the minute (plain greedy against itself across the rounds of a hole fell
        outside 0.97-1.03 on 17-41 of 60 pairs: docs/benchmarks.md), and starts from what the decoder knew
        before the hole: each pair is a first round as a user meets it, and one disturbed round does not move
        their median."""
        mine = self.rounds_ms or (self.stats.decode_ms,)
        theirs = base.rounds_ms or (base.stats.decode_ms,)
        return statistics.median(b / max(m, 1e-9) for b, m in zip(theirs, mine, strict=False))

    def to_dict(self) -> dict[str, Any]:
        return {
            "hole": self.hole_id,
            "workload": self.workload,
            "config": self.config,
            "identical_to_greedy": self.identical,
            "token_ids": self.token_ids,
            **self.stats.to_dict(),
            "rounds_decode_ms": [round(ms, 2) for ms in self.rounds_ms],
        }


@dataclass
class BenchResult:
    """Everything one ``bench`` run measured, with what is needed to reproduce it."""

    meta: dict[str, Any]
    configs: list[str]
    holes: list[Hole]
    runs: list[Run] = field(default_factory=list)

    def runs_of(self, config: str, workload: str | None = None) -> list[Run]:
        return [r for r in self.runs if r.config == config and workload in (None, r.workload)]

    @property
    def workloads(self) -> list[str]:
        return list(dict.fromkeys(h.workload for h in self.holes))


def warm_up(decoders: dict[str, Decoder], prompt_ids: Sequence[int], eos_ids: frozenset[int]) -> None:
    """One short generation each, so that first-call costs (allocation, kernel selection) are not timed.

    The warm-up prompt is the prompt's tail, no prefix of any prompt: nothing of it is reused later."""
    for decoder in decoders.values():
        decoder.generate(DecodeRequest(list(prompt_ids[-32:]), max_new_tokens=4, eos_ids=eos_ids))


def run_bench(
    model: Any,
    builder: ContextBuilder,
    holes: Sequence[Hole],
    configs: Sequence[DecoderConfig],
    max_new_tokens: int,
    eos_ids: frozenset[int],
    meta: dict[str, Any],
    cost: CostModel,
    progress: Progress | None = None,
    repeats: int = 1,
    peers: Mapping[str, Decoder] | None = None,
) -> BenchResult:
    """Decode every hole with every configuration (greedy first); stop rules off.

    ``cost``: this machine's pass-cost table, as the daemon has it (``decoder/cost_table.py``:
    :func:`~lookahead_lsp.decoder.cost_table.machine_cost`, stored beside the kernel, measured where there is
    none yet), recorded in the meta.
    With ``repeats`` > 1 each hole is decoded that many rounds (every configuration once per round, in turn)
    and each configuration keeps its fastest decode: on a shared machine the fastest of a few runs is the one
    least disturbed by other work, and every configuration gets the same chance. Each configuration's first
    round starts from an empty cache (the prompt prefilled whole); later rounds start from the same entries and
    the logits that prefill ended with (:meth:`decoder.kv.PrefixKV.reuse_for`), so every round decodes from
    bit-identical state and only the first pays for the prefill, whose time the report keeps. Every later round
    also starts from what the decoder had learned before the first (lookahead's acceptance estimates and pass
    costs: :meth:`decoder.steps.SlotDecoder.relearn`), not from what the hole's own earlier rounds taught it:
    each round is the first one a user meets, and the fastest of them measures it with less of the host's noise.
    Every round must give the same tokens, else the run counts as not identical to greedy. Each round's decode
    time is kept too (:attr:`Run.rounds_ms`): the report sets the first rounds beside the fastest, since a peer is
    not held to what it knew before the hole (llama.cpp's ngram-mod drafts its later rounds from its own first).
    ``peers``: the decoders of the ``peer`` configurations (running llama-servers, which prefill the whole prompt
    on every call); with them, ours too start every decode from an empty cache, so that prefill and completion
    times compare like with like."""
    if not configs or configs[0].name != REFERENCE:
        raise ValueError("the first configuration must be plain greedy, the reference")
    meta["cost_model"] = describe(cost)
    meta["cost_table"] = str(table_path(model))
    # each configuration corrects its own copy from its passes (a shared one would carry one's into the next)
    missing = [c.name for c in configs if c.family == "peer" and c.name not in (peers or {})]
    if missing:
        raise ValueError(f"no running server for {', '.join(missing)}")
    decoders = {
        c.name: (peers or {})[c.name] if c.family == "peer" else c.build(model, copy.deepcopy(cost)) for c in configs
    }
    result = BenchResult(meta, [c.name for c in configs], list(holes))
    if not holes:
        return result
    whole_prefill = repeats > 1 or bool(peers)  # a peer prefills the whole prompt: so do ours, like with like
    started = time.perf_counter()
    for i, hole in enumerate(holes):
        inputs = builder.inputs(hole)
        if i == 0:
            warm_up(decoders, inputs.prompt_ids, eos_ids)
        rounds: dict[str, list[DecodeResult]] = {config.name: [] for config in configs}
        # what each decoder knew before this hole's first round (read by the later rounds only)
        knew = {name: _learned(decoder) for name, decoder in decoders.items()} if repeats > 1 else {}
        for round_ in range(max(repeats, 1)):
            for config in configs:
                request = decode_request(inputs.built, Limits(max_new_tokens, eos_ids), inputs.extra_drafts)
                if whole_prefill and (round_ == 0 or peers):
                    _forget_cache(decoders[config.name])
                if round_ > 0:
                    _relearn(decoders[config.name], knew[config.name])
                rounds[config.name].append(decoders[config.name].generate(request))
        reference = rounds[REFERENCE][0].token_ids
        for config in configs:
            outs = rounds[config.name]
            fastest = min(outs, key=lambda out: out.stats.decode_ms)
            identical = all(out.token_ids == reference for out in outs)
            stats = with_prefill_of(fastest.stats, outs[0].stats)
            rounds_ms = tuple(out.stats.decode_ms for out in outs)
            result.runs.append(Run(hole.id, hole.workload, config.name, fastest.token_ids, stats, identical, rounds_ms))
        if progress is not None:
            elapsed = time.perf_counter() - started
            progress(f"hole {i + 1}/{len(holes)} {hole.id} ({elapsed:.0f} s)", (i + 1) / len(holes))
    return result


def with_prefill_of(decode: DecodeStats, first: DecodeStats) -> DecodeStats:
    """The fastest round's decoding figures with the prefill figures of the first round (the one that
    prefilled; later rounds start from its cache)."""
    return dataclasses.replace(
        decode,
        prefill_ms=first.prefill_ms,
        prefilled_tokens=first.prefilled_tokens,
        reused_tokens=first.reused_tokens,
    )


def _forget_cache(decoder: Decoder) -> None:
    """Make ``decoder`` prefill its next prompt whole (ours keep a cache; transformers' ``generate`` does not)."""
    if isinstance(decoder, LocalBackend):
        decoder.reset()


def _learned(decoder: Decoder) -> object:
    """What ``decoder`` has learned from earlier generations (ours; a peer: nothing we can hold)."""
    return decoder.learned() if isinstance(decoder, LocalBackend) else None


def _relearn(decoder: Decoder, learned: object) -> None:
    """``decoder`` back to what it knew (:func:`_learned`) before the hole's first round."""
    if isinstance(decoder, LocalBackend):
        decoder.relearn(learned)


# --- summaries -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Summary:
    """One configuration over a set of holes."""

    config: str
    holes: int
    tokens_per_s: float  # all new tokens / all decode time
    speedup: float  # geometric mean over holes of greedy decode time / this decode time
    passes_per_token: float  # decoding forward passes per new token
    mean_accepted: float  # tokens committed per decoding step
    prefill_ms: float  # mean per hole
    decode_ms: float  # mean per hole
    identical: int  # holes whose raw tokens equal greedy's
    prefill_speedup: float = 0.0  # geometric mean over holes of greedy prefill time / this prefill time
    completion_ms: float = 0.0  # mean per hole: prefill + decode, the time to the whole completion
    completion_speedup: float = 0.0  # geometric mean over holes of greedy completion time / this one
    new_tokens: int = 0  # over all holes: 0 marks a configuration that produced nothing (no speedup to show)
    first_tokens_per_s: float = 0.0  # all new tokens / all first rounds' decode time (what a user meets)

    def to_dict(self) -> dict[str, Any]:
        return {k: round(v, 3) if isinstance(v, float) else v for k, v in self.__dict__.items()}


def summarize(result: BenchResult, workload: str | None = None) -> list[Summary]:
    """One :class:`Summary` per configuration, over one workload's holes or all of them."""
    greedy = {r.hole_id: r.stats for r in result.runs_of(REFERENCE, workload)}
    summaries = []
    for config in result.configs:
        runs = result.runs_of(config, workload)
        if not runs:
            continue
        tokens = sum(r.stats.new_tokens for r in runs)
        decode_s = sum(r.stats.decode_ms for r in runs) / 1000.0
        first_s = sum(r.first_ms for r in runs) / 1000.0
        steps = [n for r in runs for n in r.stats.accepted_per_step]
        passes = sum(r.stats.steps for r in runs)
        summaries.append(
            Summary(
                config=config,
                holes=len(runs),
                tokens_per_s=tokens / decode_s if decode_s > 0 else 0.0,
                speedup=_paired_speedup(runs, greedy, attrgetter("decode_ms")),
                passes_per_token=passes / tokens if tokens else 0.0,
                # a peer reports no per-step counts: its tokens after the first over its passes
                mean_accepted=sum(steps) / len(steps) if steps else (tokens - len(runs)) / passes if passes else 0.0,
                prefill_ms=sum(r.stats.prefill_ms for r in runs) / len(runs),
                decode_ms=sum(r.stats.decode_ms for r in runs) / len(runs),
                identical=sum(r.identical for r in runs),
                prefill_speedup=_paired_speedup(runs, greedy, attrgetter("prefill_ms")),
                completion_ms=sum(_completion_ms(r.stats) for r in runs) / len(runs),
                completion_speedup=_paired_speedup(runs, greedy, _completion_ms),
                new_tokens=tokens,
                first_tokens_per_s=tokens / first_s if first_s > 0 else 0.0,
            )
        )
    return summaries


def _completion_ms(stats: DecodeStats) -> float:
    return stats.prefill_ms + stats.decode_ms


def _paired_speedup(
    runs: Sequence[Run], greedy: Mapping[str, DecodeStats], time_of: Callable[[DecodeStats], float]
) -> float:
    """Geometric mean over the holes of greedy's time / this configuration's time (``time_of`` picks which)."""
    return _geometric_mean([time_of(greedy[r.hole_id]) / time_of(r.stats) for r in runs if time_of(r.stats) > 0])


def _geometric_mean(values: Sequence[float]) -> float:
    positive = [v for v in values if v > 0]
    return math.exp(sum(math.log(v) for v in positive) / len(positive)) if positive else 0.0


def model_limits(loaded: Any, max_new_tokens: int) -> Limits:
    """The limits the daemon's completions with ``loaded`` run under (its end-of-text ids; where its blocks end,
    ``Config.block_end_for``), without the keystroke deadlines: what the in-process benchmarks decode with."""
    return Limits(max_new_tokens, stop_token_ids(loaded.tokenizer), block_end=Config().block_end_for(loaded.spec))
