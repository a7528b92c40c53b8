"""Resident memory of a daemon over rounds of documents opened, typed into and closed (issues 21, 43).

``lookahead-lsp bench memory --model DIR`` starts ``lookahead-lsp serve``, then in each round opens
``--docs`` documents, types ``--keys`` characters into each (a completion request after every key) and closes
them all, and prints the daemon's resident memory (VmRSS) after each round. A flat curve means closed
documents give back what they held. When ready and after the last round it prints where the resident
megabytes go, as the daemon measures them itself (``lookahead.memory``: lsp_server/memory_report.py). Then,
with the daemon still running, llama.cpp's ``llama-server`` on the same GGUF (the embedded model's, or the
``.gguf`` given) answers the same number of short completions, and both resident sets are printed side by
side (:func:`peer_memory`). A bounded benchmark, not a test (it asserts nothing).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from lookahead_lsp.evaluation.lsp_client import LspClient

SOURCE = "import os\n\n\ndef helper_{n}(path):\n    return os.path.join(path, 'x')\n\n\ndef main_{n}():\n    "
TYPED = "value = helper_"
PEER_REQUESTS = 8  # short completions the peer answers before its resident set is read
PART_NAMES = {
    "runtime": "Python runtime, pygls, this package (before torch)",
    "imports": "torch, transformers and the decoder's imports",
    "codes": "weight codes and scales (decoder layers)",
    "head": "output head",
    "embedding": "input embedding",
    "float": "float copies of matrices",
    "small": "norms, biases, rotary tables",
    "kvCache": "KV cache (buffer capacity)",
    "index": "workspace n-gram index",
    "mappedFiles": "mapped data files' resident pages",
    "other": "other (tokenizer, objects, libraries' pages, kernel caches, allocator slack)",
}


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith(f"{field}:"))) / 1024


def one_round(client: LspClient, round_no: int, docs: int, keys: int, complete_every: int) -> None:
    uris = [f"file:///tmp/memory-rounds/r{round_no}/doc{d}.py" for d in range(docs)]
    for d, uri in enumerate(uris):
        client.open(uri, SOURCE.format(n=d))
    for k in range(keys):
        char = TYPED[k % len(TYPED)]
        for d, uri in enumerate(uris):
            line, column = 8, 4 + k
            change = {
                "range": {"start": {"line": line, "character": column}, "end": {"line": line, "character": column}},
                "text": char,
            }
            client.change(uri, k + 2, [change])
            if d % complete_every == 0:
                client.inline(uri, line, column + 1)
    for uri in uris:
        client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})


def format_breakdown(report: dict[str, Any]) -> list[str]:
    """The lines of a ``lookahead.memory`` answer: the resident set, then each part in MB."""
    lines = [
        f"  resident {report['rssMb']:.0f} MB (peak {report['peakMb']:.0f}; anonymous {report['anonymousMb']:.0f},"
        f" mapped files {report['fileMb']:.0f} of which shared libraries {report['librariesMb']:.0f})"
    ]
    for name, size in report["partsMb"].items():
        lines.append(f"  {size:8.1f} MB  {PART_NAMES.get(name, name)}")
    for path, size in report.get("mappedFiles", {}).items():
        if size >= 1:
            lines.append(f"             mapped: {size:.0f} MB of {path}")
    if "allocatorFreeMb" in report:
        lines.append(f"             glibc's freed heap, resident or given back: {report['allocatorFreeMb']:.0f} MB")
    if report.get("mappedTensorsMb"):
        lines.append(
            f"             of tensors read from mapped files, resident as read: {report['mappedTensorsMb']:.0f} MB"
        )
    return lines


def print_breakdown(client: LspClient, when: str) -> None:
    report = client.command("lookahead.memory")
    print(f"where the resident memory goes ({when}):", flush=True)
    for line in format_breakdown(report):
        print(line, flush=True)


def peer_gguf(model: str) -> Path | None:
    """The GGUF llama-server runs for a model setting: the embedded model's own, a ``.gguf`` file; else None."""
    from lookahead_lsp.decoder.weights.embedded import embedded_parts

    parts = embedded_parts(model)
    if parts is not None:
        from lookahead_lsp.evaluation.remote_bench import embedded_gguf

        return embedded_gguf(parts)
    path = Path(model).expanduser()
    return path if path.suffix == ".gguf" and path.is_file() else None


def peer_memory(gguf: Path, log_dir: Path, requests: int = PEER_REQUESTS) -> tuple[float, float, float] | str:
    """llama-server's resident MB on ``gguf``: once loaded, after ``requests`` short completions, and its peak;
    or why it could not run."""
    from lookahead_lsp.evaluation.remote_bench import LlamaServer, engine_unavailable

    why = engine_unavailable()
    if why is not None:
        return why
    with LlamaServer(gguf, log_dir / "llama-server.log") as server:
        assert server.process is not None
        loaded = rss_mb(server.process.pid)
        for n in range(requests):
            body = {"prompt": SOURCE.format(n=n) + TYPED, "n_predict": 8, "temperature": 0, "cache_prompt": True}
            post = urllib.request.Request(
                f"{server.url}/completion", json.dumps(body).encode(), {"Content-Type": "application/json"}
            )
            with urllib.request.urlopen(post, timeout=300) as answer:
                answer.read()
        return loaded, rss_mb(server.process.pid), rss_mb(server.process.pid, "VmHWM")


def run_rounds(model: str, rounds: int, docs: int, keys: int, complete_every: int, peer: bool = True) -> int:
    """Print the daemon's resident memory when ready and after each round, its breakdown, and llama-server's
    beside it; 1 if the model never got ready."""
    with tempfile.TemporaryDirectory() as tmp:
        client = LspClient(stderr_path=Path(tmp) / "server.log")
        try:
            client.initialize(None, {"model": model, "maxNewTokens": 8, "indexEnabled": False})
            state = client.wait_model()
            if state["state"] != "ready":
                print(f"model not ready: {state}", file=sys.stderr)
                return 1
            readings = [rss_mb(client.process.pid)]
            print(f"round 0 (ready): {readings[0]:.0f} MB", flush=True)
            print_breakdown(client, "ready")
            for r in range(1, rounds + 1):
                one_round(client, r, docs, keys, complete_every)
                time.sleep(3)  # closing settles (index updates, memory given back)
                client.command("lookahead.stats")  # everything before it has been handled
                readings.append(rss_mb(client.process.pid))
                print(f"round {r}: {readings[-1]:.0f} MB", flush=True)
            print_breakdown(client, f"after round {rounds}")
            ours = f"{max(readings):.0f} MB at most over the rounds (peak {rss_mb(client.process.pid, 'VmHWM'):.0f})"
            gguf = peer_gguf(model) if peer else None
            if gguf is None:
                print(f"lookahead-lsp: {ours}; no llama-server beside it (no GGUF for {model!r} or --no-peer)")
                return 0
            found = peer_memory(gguf, Path(tmp))
            print(f"lookahead-lsp: {ours}")
            if isinstance(found, str):
                print(f"llama-server: not run: {found}")
            else:
                loaded, after, peak = found
                print(
                    f"llama-server (same GGUF, context 4096): {loaded:.0f} MB loaded, {after:.0f} MB after"
                    f" {PEER_REQUESTS} completions (peak {peak:.0f})",
                    flush=True,
                )
        finally:
            client.close()
    return 0
