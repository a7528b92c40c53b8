"""What generates the tokens of a completion: the local decoder or a remote engine, behind one interface.

Everything upstream (context, prompt, stop rules, trimming, scheduling, statistics) is shared; a
:class:`Backend` only turns a :class:`~decoder.types.DecodeRequest` into token ids. Two kinds:

- ``"lookahead"`` / ``"greedy"``: :class:`LocalBackend`, the decoders of this package over a loaded model;
- ``"remote"``: :class:`decoder.remote.RemoteEngine`, an OpenAI-compatible ``/v1/completions`` server.

The factories import torch or the HTTP client only when called.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

from decoder.types import Decoder, DecodeRequest, DecodeResult

if TYPE_CHECKING:
    from decoder.lookahead import LookaheadConfig
    from decoder.remote import RemoteConfig, RemoteEngine

LocalKind = Literal["lookahead", "greedy"]
BackendKind = Literal["lookahead", "greedy", "remote"]


class Backend(Decoder, Protocol):
    """A :class:`~decoder.types.Decoder` with a name, a capability flag and a ``close()``.

    ``supports_constraints``: whether a request's ``TokenConstraint`` (token healing) steers decoding. A
    backend without it (the remote engine) checks the constraint on what the model generated and ends the
    output at the first token that breaks it. Keep token healing on for it all the same: the prompt then
    ends before the half-typed word, which the model usually regenerates whole; a prompt that ends mid-word
    makes it start the word over ("fr" -> "from typing ...", shown as "frfrom typing ...").
    """

    name: str
    supports_constraints: bool

    def close(self) -> None: ...


class LocalBackend:
    """A decoder of this package (lookahead or greedy) over an in-process model."""

    supports_constraints = True

    def __init__(self, decoder: Decoder, name: str) -> None:
        self.decoder = decoder
        self.name = name

    def generate(self, request: DecodeRequest) -> DecodeResult:
        return self.decoder.generate(request)

    def close(self) -> None:
        """Nothing to release: the model belongs to the caller, the KV cache goes with this object."""

    def __repr__(self) -> str:
        return f"LocalBackend({self.name})"


def local_backend(model: Any, kind: LocalKind = "lookahead", config: LookaheadConfig | None = None) -> LocalBackend:
    """The lookahead decoder (default) or plain greedy over a transformers causal LM."""
    if kind == "greedy":
        from decoder.greedy import GreedyDecoder

        return LocalBackend(GreedyDecoder(model), "greedy")
    from decoder.lookahead import LookaheadDecoder

    return LocalBackend(LookaheadDecoder(model, config), "lookahead")


def remote_backend(
    config: RemoteConfig,
    tokenizer: Any,
    *,
    on_outage: Callable[[str], None] | None = None,
    on_recovery: Callable[[], None] | None = None,
) -> RemoteEngine:
    """A remote engine client whose text <-> token ids conversions use ``tokenizer`` (a transformers one)."""
    from decoder.remote import RemoteEngine

    def detokenize(ids: Sequence[int]) -> str:
        return str(tokenizer.decode(list(ids), skip_special_tokens=False))

    def tokenize(text: str) -> list[int]:
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])

    return RemoteEngine(config, detokenize=detokenize, tokenize=tokenize, on_outage=on_outage, on_recovery=on_recovery)
