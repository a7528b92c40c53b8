"""llama.cpp's ``llama-server`` as benchmark configurations: the peer a CPU user would otherwise install.

:class:`LlamaServerDecoder` is a :class:`~decoder.types.Decoder`: it sends the request's prompt token ids (the
prompt our decoders decode, built by ``context/prompt.py``) to llama-server's own ``/completion`` endpoint,
greedy (``LLAMA_SERVER_GREEDY``), ``n_predict`` = ``max_new_tokens``, ``cache_prompt: false`` (a whole
prefill each time, as the benchmark's first decode of a hole) and ``return_tokens``, and maps the server's
``timings`` into :class:`~decoder.types.DecodeStats`: ``prefill_ms`` = ``prompt_ms``, ``decode_ms`` =
``predicted_ms`` (the server's own clocks: no HTTP round trip in them), and with speculation the passes from
the accepted drafts (``predicted_n - draft_n_accepted``). Its output is cut at the request's EOS ids (the
server stops at its own end-of-generation tokens, which are fewer) and by the stop callback, after the fact.

:data:`PEERS` names the configurations (``llama-server`` plain; ``-ngram``, ``-simple`` and ``-map-k``, each
n-gram speculation type at its best setting of :data:`SPEC_SWEEP`, measured by ``python -m
lookahead_lsp.evaluation.llama_peer --sweep`` and recorded in docs/benchmarks.md); :func:`started_peers` runs
one server per configuration on the same GGUF and threads, and stops them all on the way out, errors and
KeyboardInterrupt included.

Usage: python -m lookahead_lsp.evaluation.llama_peer --sweep [--corpus DIR] [--workload fim] [--holes 3]
       [--max-new-tokens 48] [--threads N]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lookahead_lsp.decoder.types import DecodeRequest, DecodeResult, DecodeStats, FinishReason
from lookahead_lsp.evaluation.peers import PEERS, SPEC_SWEEP
from lookahead_lsp.evaluation.remote_bench import LLAMA_SERVER_GREEDY, LlamaServer, embedded_gguf, engine_unavailable

REQUEST_TIMEOUT_S = 600.0


class PeerError(RuntimeError):
    """llama-server could not be started or did not answer a request; the message says why."""


class LlamaServerDecoder:
    """Greedy generation on a running llama-server through ``/completion``, prompt as token ids."""

    def __init__(self, url: str, timeout_s: float = REQUEST_TIMEOUT_S, cache_prompt: bool = False) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.cache_prompt = cache_prompt  # the sweep's repeats decode again without prefilling again
        self.stop_strings: tuple[str, ...] = ()  # the server ends generation at these (eval infill: a line end)

    def body(self, request: DecodeRequest) -> dict[str, Any]:
        """The JSON body of the ``/completion`` request for ``request``."""
        return {
            **LLAMA_SERVER_GREEDY,
            "prompt": [int(i) for i in request.prompt_ids],
            "n_predict": request.max_new_tokens,
            "temperature": 0,
            "cache_prompt": self.cache_prompt,
            "return_tokens": True,
            "stream": False,
            **({"stop": list(self.stop_strings)} if self.stop_strings else {}),
        }

    def generate(self, request: DecodeRequest) -> DecodeResult:
        if request.constraint is not None:
            raise ValueError("llama-server cannot apply a token constraint (token healing): build prompts without")
        answer = self._post(self.body(request))
        tokens = answer.get("tokens")
        timings = answer.get("timings")
        if not isinstance(tokens, list) or not isinstance(timings, dict):
            raise PeerError(f"llama-server at {self.url} answered without tokens or timings: {str(answer)[:200]}")
        kept, finish = _cut([int(t) for t in tokens], request, answer.get("stop_type"))
        return DecodeResult(kept, stats_from_timings(request, timings, len(kept), finish))

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        data = json.dumps(body).encode()
        post = urllib.request.Request(f"{self.url}/completion", data, {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(post, timeout=self.timeout_s) as response:
                answer = json.load(response)
        except urllib.error.HTTPError as exc:
            raise PeerError(f"llama-server at {self.url}: HTTP {exc.code}: {exc.read()[:300]!r}") from exc
        except (OSError, ValueError) as exc:
            raise PeerError(f"llama-server at {self.url} did not answer: {exc}") from exc
        if not isinstance(answer, dict):
            raise PeerError(f"llama-server at {self.url} answered {str(answer)[:200]}")
        return answer


def _cut(tokens: list[int], request: DecodeRequest, stop_type: Any) -> tuple[list[int], FinishReason]:
    """The server's tokens as our decoders return them: up to the first EOS id (not included), then the
    stop callback; the finish reason."""
    for i, token in enumerate(tokens):
        if token in request.eos_ids:
            return tokens[:i], "eos"
    if request.stop is not None:
        keep = request.stop(tokens)
        if keep is not None:
            return tokens[:keep], "stop"
    return tokens, "eos" if stop_type == "eos" else "length"


def stats_from_timings(
    request: DecodeRequest, timings: dict[str, Any], new_tokens: int, finish: FinishReason
) -> DecodeStats:
    """llama-server's ``timings`` as our statistics. With speculation each decoding pass commits one token
    plus its accepted drafts, so passes = generated - accepted drafts (the first token comes from the prefill)."""
    generated = int(timings.get("predicted_n", new_tokens))
    drafted = int(timings.get("draft_n", 0) or 0)
    accepted = int(timings.get("draft_n_accepted", 0) or 0)
    steps = max(generated - 1 - accepted, 0)
    stats = DecodeStats(
        prompt_tokens=len(request.prompt_ids),
        prefilled_tokens=int(timings.get("prompt_n", len(request.prompt_ids))),
        reused_tokens=int(timings.get("cache_n", 0) or 0),
        steps=steps,
        new_tokens=new_tokens,
        tokens_in_passes=steps + drafted,
        prefill_ms=float(timings.get("prompt_ms", 0.0)),
        decode_ms=float(timings.get("predicted_ms", 0.0)),
        finish_reason=finish,
    )
    if accepted:
        stats.tokens_by_source["llama-ngram"] = accepted
    return stats


# ---- the servers ------------------------------------------------------------------------------------------


@dataclass
class Peer:
    """One started configuration: its server and the decoder that talks to it."""

    name: str
    server: LlamaServer
    decoder: LlamaServerDecoder


@contextlib.contextmanager
def started_peers(
    configs: Mapping[str, Sequence[str]], threads: int, log_dir: Path, gguf: Path | None = None
) -> Iterator[dict[str, Peer]]:
    """One llama-server per configuration (name -> extra arguments) on ``gguf`` (the embedded model's by
    default) with ``threads`` threads; all stopped when the block ends, however it ends. PeerError when the
    engine is not installed or a server does not start."""
    if not configs:
        yield {}
        return
    reason = engine_unavailable()
    if reason is not None:
        raise PeerError(reason)
    model = gguf if gguf is not None else embedded_gguf()
    log_dir.mkdir(parents=True, exist_ok=True)
    peers: dict[str, Peer] = {}
    try:
        for name, args in configs.items():
            server = LlamaServer(model, log_dir / f"{name}.log", threads=threads, extra_args=args)
            peers[name] = Peer(name, server, LlamaServerDecoder(server.url))
            try:
                server.start()
            except RuntimeError as exc:
                raise PeerError(f"{name}: {exc}") from exc
        yield peers
    finally:
        for peer in peers.values():
            peer.server.stop()


def peer_configs(names: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """The :data:`PEERS` among ``names``, in their order."""
    return {name: PEERS[name] for name in names if name in PEERS}


# ---- the sweep -------------------------------------------------------------------------------------------


def sweep(args: argparse.Namespace) -> str:
    """Every :data:`SPEC_SWEEP` setting and plain llama-server on the same holes; a Markdown table.

    All servers run at once and decode each hole in turn, ``--repeats`` rounds with the prompt cached after
    the first (a repeat only decodes); each keeps its fastest decode per hole, as ``bench --repeats`` does:
    on a shared machine the fastest of a few is the least disturbed."""
    from lookahead_lsp.decoder.runtime.model import stop_token_ids
    from lookahead_lsp.evaluation.speed import ContextBuilder
    from lookahead_lsp.evaluation.workloads import Corpus, make_holes
    from lookahead_lsp.lsp_server.completion import Limits, decode_request

    corpus = Corpus.load(args.corpus)
    tokenizer = _tokenizer()
    builder = ContextBuilder(corpus, tokenizer, args.token_budget)
    holes = [h for w in args.workload.split(",") for h in make_holes(corpus, w.strip(), args.holes, args.seed)]
    limits = Limits(args.max_new_tokens, stop_token_ids(tokenizer))
    requests = [decode_request(builder.prompt(h), limits, []) for h in holes]
    settings: dict[str, tuple[str, ...]] = {"plain": (), **SPEC_SWEEP}
    best: dict[str, list[DecodeResult]] = {name: [] for name in settings}
    with started_peers(settings, args.threads, Path(args.out)) as peers:
        decoders = {name: LlamaServerDecoder(peer.server.url, cache_prompt=True) for name, peer in peers.items()}
        for request in requests:
            rounds = {name: [d.generate(request) for _ in range(args.repeats)] for name, d in decoders.items()}
            for name, outs in rounds.items():
                best[name].append(min(outs[1:] or outs, key=lambda out: out.stats.decode_ms))
            print(f"hole {len(best['plain'])}/{len(requests)}", file=sys.stderr, flush=True)
    rows = [
        "| setting | llama-server arguments | tokens/s | passes/token | drafted | accepted | identical to plain |",
        "|---|---|---|---|---|---|---|",
    ]
    reference = [r.token_ids for r in best["plain"]]
    for name, results in best.items():
        tokens = sum(r.stats.new_tokens for r in results)
        decode_s = sum(r.stats.decode_ms for r in results) / 1000.0
        steps = sum(r.stats.steps for r in results)
        drafted = sum(r.stats.tokens_in_passes - r.stats.steps for r in results)
        accepted = sum(r.stats.tokens_by_source["llama-ngram"] for r in results)
        same = sum(r.token_ids == ref for r, ref in zip(results, reference, strict=True))
        rows.append(
            f"| {name} | `{' '.join(settings[name]) or '(none)'}` | {tokens / decode_s:.1f} "
            f"| {steps / max(tokens, 1):.2f} | {drafted} | {accepted} | {same}/{len(results)} |"
        )
    header = f"{corpus.name}: {len(holes)} holes ({args.workload}), {args.max_new_tokens} new tokens, "
    return header + f"{args.threads} threads, fastest of {args.repeats - 1 or 1} cached decodes\n\n" + "\n".join(rows)


def _tokenizer() -> Any:
    from lookahead_lsp.decoder.runtime.tokenizer import converted_tokenizer
    from lookahead_lsp.decoder.weights.embedded import ensure_converted

    return converted_tokenizer(ensure_converted())


def main(argv: Sequence[str] | None = None) -> int:
    from lookahead_lsp.decoder.runtime.model import physical_cores

    parser = argparse.ArgumentParser(
        prog="python -m lookahead_lsp.evaluation.llama_peer", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--sweep", action="store_true", help="sweep llama-server's n-gram speculation settings")
    parser.add_argument("--corpus", default=None, help="directory of code to cut holes from (default: pathspec)")
    parser.add_argument("--workload", default="fim", help="comma-separated workloads (default: fim)")
    parser.add_argument("--holes", type=int, default=3, help="holes per workload (default: 3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--token-budget", type=int, default=1024)
    parser.add_argument("--threads", type=int, default=physical_cores(), help="server threads (default: cores)")
    parser.add_argument("--repeats", type=int, default=4, help="decodes per hole and setting (default: 4)")
    parser.add_argument("--out", default=".artifacts/llama-peer", help="server logs go here")
    args = parser.parse_args(argv)
    if not args.sweep:
        parser.error("nothing to do: pass --sweep")
    started = time.perf_counter()
    print(sweep(args))
    print(f"({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
