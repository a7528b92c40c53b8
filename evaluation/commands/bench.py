"""`lookahead-lsp bench speed`: decoding speed of every decoder configuration on the same holes cut from real code.

Also holds the options and loading steps that the other evaluation commands share (corpus, workloads, model).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from lookahead_lsp.decoder.cost_table import machine_cost
from lookahead_lsp.decoder.runtime.model import (
    LoadedModel,
    ModelLoadError,
    configure_torch_threads,
    load_model,
    stop_token_ids,
)
from lookahead_lsp.decoder.weights.embedded import EMBEDDED_MODELS, EmbeddedModelError, embedded_parts
from lookahead_lsp.evaluation.llama_peer import PeerError, peer_configs, started_peers
from lookahead_lsp.evaluation.lsp_replay import (
    compare_sessions,
    replay,
    replay_markdown,
    session_holes,
    sessions_markdown,
)
from lookahead_lsp.evaluation.peer_isa import engine_backend
from lookahead_lsp.evaluation.remote_bench import LLAMA_SERVER, embedded_gguf, resident_bytes
from lookahead_lsp.evaluation.report import bench_markdown, machine_description, write_bench
from lookahead_lsp.evaluation.speed import BenchResult, ContextBuilder, DecoderConfig, parse_decoders, run_bench
from lookahead_lsp.evaluation.stream_read import stream_read_rate
from lookahead_lsp.evaluation.workloads import WORKLOADS, Corpus, Hole, make_holes
from lookahead_lsp.lsp_server.cli import UsageError
from lookahead_lsp.lsp_server.model_host import chosen_spec

DEFAULT_DECODERS = "greedy,hf,hf-pld,lookahead,ablations"


def add_workload_arguments(parser: argparse.ArgumentParser, workloads: str, max_new_tokens: int) -> None:
    parser.add_argument("--corpus", default=None, help="directory of code to cut holes from (default: pathspec)")
    parser.add_argument("--workload", default=workloads, help=f"comma-separated workloads (default: {workloads})")
    parser.add_argument("--holes", type=int, default=6, help="holes per workload (default: 6)")
    parser.add_argument("--seed", type=int, default=0, help="seed for choosing the holes (default: 0)")
    parser.add_argument("--max-new-tokens", type=int, default=max_new_tokens, help="tokens to generate per hole")
    parser.add_argument(
        "--model",
        default="embedded",
        help="embedded, embedded-1.5b, auto (as the daemon chooses), a Hugging Face id or directory, a .gguf",
    )
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, mps")
    parser.add_argument("--dtype", default="auto", help="auto, float32, bfloat16, float16")
    parser.add_argument(
        "--prefill-dtype", default="auto", help="auto (bfloat16 for float32 on a CPU with bf16 instructions), same, ..."
    )
    parser.add_argument(
        "--weights",
        default="auto",
        choices=("auto", "gguf", "dense"),
        help="auto (a GGUF's own codes on a CPU), gguf, dense (the model's dtype)",
    )
    parser.add_argument("--token-budget", type=int, default=1024, help="prompt tokens at most (default: 1024)")
    parser.add_argument("--out", default=None, help="write JSON, Markdown and PNG reports to this directory")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_workload_arguments(parser, "fim,repo,none", max_new_tokens=48)
    parser.add_argument(
        "--decoders",
        default=DEFAULT_DECODERS,
        help="comma-separated: greedy, hf, hf-pld, lookahead, lookahead-no-{prompt,suffix,workspace,jacobi}, "
        "ablations (all four), lookahead-W<w>N<n>G<g>, lookahead-risk<stake>+<share> (the risk budget), "
        "llama-server, llama-server-{ngram,simple,map-k}, "
        "llama-servers (all four: llama.cpp on the same GGUF and threads, scripts/get-engine.sh; the report names "
        f"the fastest) (default: {DEFAULT_DECODERS})",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="decode each hole this many rounds, each from what the decoders knew before its first (the round a "
        "user meets); each configuration keeps its fastest (default: 1)",
    )
    parser.add_argument(
        "--peer-threads",
        type=int,
        default=None,
        help="threads of llama-server (default: torch's, as our decoders use)",
    )
    parser.add_argument("--sweep", action="store_true", help="add the (W, N, G) sweep")
    parser.add_argument("--lsp", action="store_true", help="also replay a typing session through the daemon")
    parser.add_argument("--lsp-keystrokes", type=int, default=20, help="characters typed in the replay")
    parser.add_argument(
        "--lsp-file",
        default=None,
        help="with --lsp: also replay typing sessions in this corpus file (default: its largest), with background "
        "prefill and the cache-aware layout on and off, and report keystroke latency p50/p90 per case",
    )
    parser.add_argument("--lsp-holes", type=int, default=3, help="holes typed in the session replay (default: 3)")


def progress(message: str, fraction: float | None = None) -> None:
    print(message if fraction is None else f"[{fraction:4.0%}] {message}", file=sys.stderr, flush=True)


def load_holes(args: argparse.Namespace) -> tuple[Corpus, list[Hole]]:
    try:
        corpus = Corpus.load(args.corpus)
    except (FileNotFoundError, ValueError) as exc:
        raise UsageError(str(exc)) from exc
    holes: list[Hole] = []
    for workload in (w.strip() for w in args.workload.split(",") if w.strip()):
        if workload not in WORKLOADS:
            raise UsageError(f"unknown workload {workload!r}; choose from {', '.join(WORKLOADS)}")
        found = make_holes(corpus, workload, args.holes, args.seed)
        if len(found) < args.holes:
            progress(f"{workload}: only {len(found)} holes in {corpus.name}")
        holes.extend(found)
    if not holes:
        raise UsageError(f"no holes found in {corpus.root}")
    return corpus, holes


def load(args: argparse.Namespace) -> LoadedModel:
    configure_torch_threads()
    try:
        args.model = chosen_spec(args.model, args.device)
        return load_model(
            args.model,
            device=args.device,
            dtype=args.dtype,
            progress=progress,
            prefill_dtype=args.prefill_dtype,
            weights=args.weights,
        )
    except ModelLoadError as exc:
        raise UsageError(str(exc)) from exc


def run_meta(args: argparse.Namespace, corpus: Corpus, loaded: LoadedModel) -> dict[str, Any]:
    return {
        "model": f"{loaded.spec} ({loaded.source}: {loaded.path})",
        "model_spec": loaded.spec,
        "device": f"{loaded.device} {loaded.dtype}, {loaded.weights} weights, prefill {loaded.prefill_dtype}".replace(
            "torch.", ""
        ),
        "corpus": f"{corpus.name} ({corpus.root})",
        "workloads": args.workload,
        "holes_per_workload": args.holes,
        "seed": args.seed,
        "max_new_tokens": args.max_new_tokens,
        "token_budget": args.token_budget,
        **machine_description(),
    }


def run(args: argparse.Namespace) -> int:
    try:
        configs = parse_decoders(args.decoders, args.sweep)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    peers = peer_configs([c.name for c in configs if c.family == "peer"])
    args.model = chosen_spec(args.model, args.device)  # "auto": the model the daemon would load, for every side
    gguf = peer_gguf(args.model) if peers else None
    corpus, holes = load_holes(args)
    read_before = stream_read_rate()  # before the model: its buffer stays below the run's resident peak
    loaded = load(args)
    builder = ContextBuilder(corpus, loaded.tokenizer, args.token_budget)
    meta = {**run_meta(args, corpus, loaded), "repeats": args.repeats, "rss_mb_model_loaded": _mb(resident_bytes())}
    result = bench_beside_peers(args, loaded, builder, holes, configs, meta, peers, gguf)
    meta.update(rss_mb_end=_mb(resident_bytes()), rss_mb_peak=_mb(resident_bytes(field_name="VmHWM")))
    # the host's streaming read before and after (the peers stopped): how far the machine moved during the run
    meta.update(stream_read_gb_s_start=round(read_before, 1), stream_read_gb_s_end=round(stream_read_rate(), 1))
    print(bench_markdown(result))
    written = write_bench(result, Path(args.out)) if args.out else []
    if args.lsp:
        written += replay_through_daemon(args, corpus, holes)
    for path in written:
        progress(f"wrote {path}")
    return 0


def bench_beside_peers(
    args: argparse.Namespace,
    loaded: LoadedModel,
    builder: ContextBuilder,
    holes: list[Hole],
    configs: list[DecoderConfig],
    meta: dict[str, Any],
    peers: dict[str, tuple[str, ...]],
    gguf: Path | None,
) -> BenchResult:
    """``run_bench`` with the peer configurations' llama-servers running (same GGUF; torch's threads unless
    --peer-threads), stopped however it ends; their resident memory goes into ``meta``. The pass-cost table is read,
    or timed where this machine has none, once and before they start: a server loading its model beside timed passes
    slows them unevenly, and the drafting policy would then start from a table that rates wide passes cheap."""
    cost = machine_cost(loaded.model)
    logs = Path(args.out) / "llama-server" if args.out else Path(tempfile.mkdtemp(prefix="lookahead-peer-"))
    threads = args.peer_threads or torch.get_num_threads()
    try:
        with started_peers(peers, threads, logs, gguf) as running:
            if running:
                meta["llama_server_threads"] = threads
                meta["llama_server_cpu_backend"] = engine_backend(LLAMA_SERVER)
                progress(f"llama-server ({', '.join(running)}): {threads} threads, logs in {logs}")
            result = run_bench(
                loaded.model,
                builder,
                holes,
                configs,
                args.max_new_tokens,
                stop_token_ids(loaded.tokenizer),
                meta,
                cost,
                progress,
                args.repeats,
                {name: peer.decoder for name, peer in running.items()},
            )
            meta.update({f"rss_mb_{name}": _mb(peer.server.rss_bytes()) for name, peer in running.items()})
    except PeerError as exc:
        raise UsageError(f"llama-server: {exc}") from exc
    return result


def peer_gguf(model: str) -> Path:
    """The GGUF llama-server loads: the model's own (an embedded model's, assembled once, or a ``.gguf`` file)."""
    parts = embedded_parts(model)
    if parts is not None:
        try:
            return embedded_gguf(parts)
        except EmbeddedModelError as exc:
            raise UsageError(str(exc)) from exc
    if model.endswith(".gguf"):
        return Path(model).expanduser()
    raise UsageError(
        f"llama-server needs the same GGUF: use --model {', '.join(EMBEDDED_MODELS)} or a .gguf file, not {model!r}"
    )


def _mb(size: int) -> int:
    return round(size / 2**20)


def replay_through_daemon(args: argparse.Namespace, corpus: Corpus, holes: list[Hole]) -> list[Path]:
    """Type the first multi-line hole into ``lookahead-lsp serve``; print (and with --out write) the table."""
    hole = next((h for h in holes if "\n" in h.middle), holes[0])
    progress(f"replaying a typing session at {hole.id} through the daemon")
    result = replay(hole, corpus, args.model, args.max_new_tokens, args.lsp_keystrokes)
    table = replay_markdown([result])
    print(table)
    sessions = replay_sessions(args, corpus)
    print(sessions)
    if not args.out:
        return []
    out = Path(args.out)
    (out / "lsp-sessions.md").write_text(sessions + "\n", encoding="utf-8")
    (out / "lsp.md").write_text(table + "\n", encoding="utf-8")
    keystrokes = [k.__dict__ for k in result.keystrokes]
    (out / "lsp.json").write_text(json.dumps({"summary": result.summary(), "keystrokes": keystrokes}, indent=1))
    return [out / "lsp.md", out / "lsp.json", out / "lsp-sessions.md"]


def replay_sessions(args: argparse.Namespace, corpus: Corpus) -> str:
    """Typing sessions in one large file, latency features on and off (``evaluation/lsp_replay.py``)."""
    path = args.lsp_file or max(corpus.files, key=lambda f: f.text.count("\n")).path
    holes = session_holes(corpus, path, args.lsp_holes, args.seed)
    progress(f"typing sessions in {path}: {len(holes)} holes, background prefill on and off")
    keys = compare_sessions(corpus, holes, args.model, args.max_new_tokens)
    return f"## Keystroke latency in {path}\n\n" + sessions_markdown(keys)
