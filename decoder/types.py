"""decoder: plain data that crosses the decoder's boundary: token ids in, token ids and statistics out.

The decoder knows token ids only. Text, tokenizer and stop rules reach it as callbacks; the workspace
index reaches it through the :class:`decoder.drafts.DraftSource` interface.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

StopFn = Callable[[Sequence[int]], "int | None"]
"""Called after every step with all new tokens so far (accepted drafts included).

Returns ``None`` to go on, or the number of new tokens to keep: decoding then stops and the tokens past
that count are dropped (so drafts accepted past a stop are never returned).
"""

FinishReason = Literal["eos", "length", "stop", "cancelled"]


class CancelToken:
    """A thread-safe flag the decoder checks before every step."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()


class TokenConstraint(Protocol):
    """Restricts which token ids may come next (token healing uses it for the first tokens).

    ``allowed(generated)`` gets the new tokens so far and returns the allowed ids for the next position,
    or ``None`` once the constraint no longer applies. Greedy and lookahead apply it identically.
    """

    def allowed(self, generated: Sequence[int]) -> Sequence[int] | None: ...


@dataclass
class DecodeRequest:
    """One generation: the prompt, the limits and the callbacks."""

    prompt_ids: Sequence[int]
    max_new_tokens: int = 64
    eos_ids: frozenset[int] = frozenset()
    stop: StopFn | None = None
    cancel: CancelToken | None = None
    constraint: TokenConstraint | None = None
    # Extra draft sources (the suffix after the cursor, the workspace index). The decoder always adds its
    # own: n-grams of prompt + generated tokens ("prompt") and the Jacobi pool ("jacobi").
    drafts: Sequence[Any] = ()
    # Which of the decoder's KV caches this prompt continues (decoder.slots: the daemon passes the document's
    # URI); None is a key like any other.
    slot: Hashable | None = None


@dataclass
class DecodeStats:
    """What one generation cost and where its accepted tokens came from."""

    prompt_tokens: int = 0
    prefilled_tokens: int = 0  # prompt tokens actually run through the model (after KV reuse)
    reused_tokens: int = 0  # prompt tokens whose KV entries came from the previous call
    steps: int = 0  # decoding forward passes
    new_tokens: int = 0
    accepted_per_step: list[int] = field(default_factory=list)  # tokens committed by each step
    hits_by_source: Counter[str] = field(default_factory=Counter)  # steps where a source's draft won
    tokens_by_source: Counter[str] = field(default_factory=Counter)  # draft tokens accepted per source
    tokens_in_passes: int = 0  # sum of query tokens over all decoding passes
    prefill_ms: float = 0.0
    decode_ms: float = 0.0
    finish_reason: FinishReason = "length"

    @property
    def tokens_per_s(self) -> float:
        return self.new_tokens / (self.decode_ms / 1000.0) if self.decode_ms > 0 else 0.0

    @property
    def mean_accepted(self) -> float:
        return sum(self.accepted_per_step) / len(self.accepted_per_step) if self.accepted_per_step else 0.0

    def histogram(self) -> dict[int, int]:
        return dict(sorted(Counter(self.accepted_per_step).items()))

    def to_dict(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "prefilled_tokens": self.prefilled_tokens,
            "reused_tokens": self.reused_tokens,
            "steps": self.steps,
            "new_tokens": self.new_tokens,
            "mean_accepted_per_step": round(self.mean_accepted, 3),
            "accepted_histogram": {str(k): v for k, v in self.histogram().items()},
            "hits_by_source": dict(self.hits_by_source),
            "tokens_by_source": dict(self.tokens_by_source),
            "tokens_in_passes": self.tokens_in_passes,
            "prefill_ms": round(self.prefill_ms, 2),
            "decode_ms": round(self.decode_ms, 2),
            "tokens_per_s": round(self.tokens_per_s, 2),
            "finish_reason": self.finish_reason,
        }


@dataclass
class DecodeResult:
    token_ids: list[int]
    stats: DecodeStats


class Decoder(Protocol):
    """What the pipeline needs from any decoder (greedy, lookahead, a remote engine)."""

    def generate(self, request: DecodeRequest) -> DecodeResult: ...
