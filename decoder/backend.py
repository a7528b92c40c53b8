"""decoder: what generates the tokens of a completion: the local decoder or a remote engine, behind one interface.

Everything upstream (context, prompt, stop rules, trimming, scheduling, statistics) is shared; a
:class:`Backend` only turns a :class:`~decoder.types.DecodeRequest` into token ids. Two kinds:

- ``"lookahead"`` / ``"greedy"``: :class:`LocalBackend`, the decoders of this package over a loaded model;
- ``"remote"``: :class:`decoder.remote.RemoteEngine`, an OpenAI-compatible ``/v1/completions`` server.

The factories (:func:`local_backend`, :func:`remote_backend`: the one place a backend is made) import torch
or the HTTP client only when called, so that the daemon answers ``initialize`` before torch has loaded.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

from lookahead_lsp.decoder.types import CancelToken, Decoder, DecodeRequest, DecodeResult

if TYPE_CHECKING:
    from lookahead_lsp.decoder.lookahead import LookaheadConfig
    from lookahead_lsp.decoder.policy import CostModel
    from lookahead_lsp.decoder.remote import RemoteConfig, RemoteEngine

LocalKind = Literal["lookahead", "greedy"]


class Backend(Decoder, Protocol):
    """A :class:`~decoder.types.Decoder` with a name, idle-time prefill, a description and a ``close()``.

    Token healing: a local decoder applies a request's ``TokenConstraint`` while decoding; the remote engine
    cannot, so it checks the constraint on what the model generated and ends the output at the first token
    that breaks it. Keep token healing on for it all the same: the prompt then ends before the half-typed
    word, which the model usually regenerates whole; a prompt that ends mid-word makes it start the word over
    ("fr" -> "from typing ...", shown as "frfrom typing ...").
    """

    name: str

    def warm(
        self, prompt_ids: Sequence[int], cancel: CancelToken | None = None, slot: Hashable | None = None
    ) -> int | None:
        """Prefill ``prompt_ids`` into the cache of ``slot`` (a request's :attr:`DecodeRequest.slot`) in idle
        time: the tokens prefilled, or None where there is no cache of ours to warm (a remote engine keeps its
        own). Stopped half-way, it leaves what the slot's cache held (``decoder/slots.py``: the spare)."""
        ...

    def holds(self, prompt_ids: Sequence[int], slot: Hashable | None = None) -> bool:
        """Whether ``slot``'s cache holds the prompt, all but its last token at least (True where the cache is
        not ours to know: a remote engine)."""
        ...

    def describe(self) -> dict[str, Any] | None:
        """Settings and state for ``lookahead.stats`` beyond the daemon's own (None: nothing more)."""
        ...

    def close(self) -> None: ...


class LocalDecoder(Decoder, Protocol):
    """A decoder of this package: greedy or lookahead over an in-process model, with a KV cache to warm."""

    def warm(
        self, prompt_ids: Sequence[int], cancel: CancelToken | None = None, slot: Hashable | None = None
    ) -> int: ...

    def holds(self, prompt_ids: Sequence[int], slot: Hashable | None = None) -> bool: ...

    def reset(self) -> None: ...

    def learned(self) -> object: ...

    def relearn(self, learned: object) -> None: ...


class LocalBackend:
    """A decoder of this package (lookahead or greedy) over an in-process model."""

    def __init__(self, decoder: LocalDecoder, name: str) -> None:
        self.decoder = decoder
        self.name = name

    def generate(self, request: DecodeRequest) -> DecodeResult:
        return self.decoder.generate(request)

    def warm(self, prompt_ids: Sequence[int], cancel: CancelToken | None = None, slot: Hashable | None = None) -> int:
        return self.decoder.warm(prompt_ids, cancel, slot)

    def holds(self, prompt_ids: Sequence[int], slot: Hashable | None = None) -> bool:
        return self.decoder.holds(prompt_ids, slot)

    def reset(self) -> None:
        """Forget the KV caches: the next prompt is prefilled whole (the benchmarks' cold runs)."""
        self.decoder.reset()

    def learned(self) -> object:
        """What the decoder has learned from its generations (:meth:`decoder.steps.SlotDecoder.learned`)."""
        return self.decoder.learned()

    def relearn(self, learned: object) -> None:
        self.decoder.relearn(learned)

    def describe(self) -> None:
        """Nothing beyond the daemon's own description of the model."""

    def close(self) -> None:
        """Nothing to release: the model belongs to the caller, the KV cache goes with this object."""

    def __repr__(self) -> str:
        return f"LocalBackend({self.name})"


def local_backend(
    model: Any,
    kind: LocalKind = "lookahead",
    config: LookaheadConfig | None = None,
    cost: CostModel | None = None,
    slots: int | None = None,
) -> LocalBackend:
    """The lookahead decoder (default; ``config`` and the measured ``cost``, else their defaults) or plain
    greedy over a transformers causal LM, with ``slots`` KV caches (:mod:`decoder.slots`; None: its default)."""
    from lookahead_lsp.decoder.slots import DEFAULT_SLOTS

    held = DEFAULT_SLOTS if slots is None else slots
    if kind == "greedy":
        from lookahead_lsp.decoder.greedy import GreedyDecoder  # deferred: torch (see the module docstring)

        return LocalBackend(GreedyDecoder(model, held), "greedy")
    from lookahead_lsp.decoder.lookahead import LookaheadDecoder  # deferred: torch

    return LocalBackend(LookaheadDecoder(model, config, cost, held), "lookahead")


def remote_backend(
    config: RemoteConfig,
    tokenizer: Any,
    *,
    on_outage: Callable[[str], None] | None = None,
    on_recovery: Callable[[], None] | None = None,
) -> RemoteEngine:
    """A remote engine client whose text <-> token ids conversions use ``tokenizer`` (a transformers one)."""
    from lookahead_lsp.decoder.remote import RemoteEngine  # deferred: only a remote decoder needs the HTTP client

    def detokenize(ids: Sequence[int]) -> str:
        return str(tokenizer.decode(list(ids), skip_special_tokens=False))

    def tokenize(text: str) -> list[int]:
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])

    return RemoteEngine(config, detokenize=detokenize, tokenize=tokenize, on_outage=on_outage, on_recovery=on_recovery)
