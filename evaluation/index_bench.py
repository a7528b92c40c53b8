"""Benchmark of the workspace n-gram index at workspace scale (``lookahead-lsp bench index``).

Workload: real Python files from this interpreter's site-packages, tokenized with the real tokenizer (that
step gives the tokenization throughput), then copied with perturbation up to ``--tokens`` (default 10M): each
copy replaces ``--mutate`` (3%) of its tokens with tokens drawn from the corpus itself, so the copies are
near-duplicates as in real repositories (vendored code, similar modules), not identical. Figures, each
measured on its own: bytes per indexed token (nbytes of every array held / tokens), build throughput
(``NgramIndex.build`` alone, no tokenization), lookup latency p50/p99 (wall and thread CPU time; contexts of
32 tokens cut from indexed files and from held-out files not in the index), per-file update and removal
latency (a file of about 2k tokens into the overlay), and the time to merge the overlay.
"""

from __future__ import annotations

import argparse
import site
import time
from pathlib import Path
from typing import Any

import numpy as np

from lookahead_lsp.context.ngram_index import NgramIndex
from lookahead_lsp.lsp_server.commands.index import load_tokenizer


def corpus_files(limit_chars: int) -> list[str]:
    """Texts of .py files under site-packages, in a stable order, up to about ``limit_chars``."""
    texts: list[str] = []
    total = 0
    for base in sorted(set(site.getsitepackages())):
        for path in sorted(Path(base).rglob("*.py")):
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            if 200 < len(text) < 200_000:
                texts.append(text)
                total += len(text)
                if total >= limit_chars:
                    return texts
    return texts


def tokenize_corpus(tokenizer: Any, texts: list[str]) -> tuple[list[np.ndarray], float]:
    """Token arrays and the tokens/s of batch tokenization."""
    started = time.perf_counter()
    out: list[np.ndarray] = []
    for i in range(0, len(texts), 64):
        ids = tokenizer(texts[i : i + 64], add_special_tokens=False)["input_ids"]
        out += [np.asarray(x, dtype=np.int32) for x in ids]
    seconds = time.perf_counter() - started
    return out, sum(len(x) for x in out) / seconds


def synthesize(files: list[np.ndarray], target: int, mutate: float, seed: int) -> list[tuple[str, np.ndarray]]:
    """Copies of ``files`` with a fraction of tokens replaced, up to ``target`` tokens."""
    rng = np.random.default_rng(seed)
    pool = np.concatenate(files)
    out: list[tuple[str, np.ndarray]] = []
    total, copy = 0, 0
    while total < target:
        for i, tokens in enumerate(files):
            version = tokens.copy()
            if copy:
                where = rng.random(len(version)) < mutate
                version[where] = pool[rng.integers(0, len(pool), int(where.sum()))]
            out.append((f"copy{copy}/file{i}.py", version))
            total += len(version)
            if total >= target:
                break
        copy += 1
    return out


def contexts(files: list[np.ndarray], count: int, seed: int, length: int = 32) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    usable = [f for f in files if len(f) > length + 1]
    picks = rng.integers(0, len(usable), count)
    out = []
    for f in picks:
        tokens = usable[f]
        end = int(rng.integers(length, len(tokens)))
        out.append(tokens[end - length : end].tolist())
    return out


def percentiles(samples_s: list[float]) -> dict[str, float]:
    ms = np.asarray(samples_s) * 1000.0
    return {"p50_ms": round(float(np.percentile(ms, 50)), 3), "p99_ms": round(float(np.percentile(ms, 99)), 3)}


def time_lookups(index: NgramIndex, queries: list[list[int]], max_len: int, max_count: int) -> dict[str, Any]:
    wall: list[float] = []
    cpu: list[float] = []
    hits = 0
    for ctx in queries:
        w0, c0 = time.perf_counter(), time.thread_time()
        drafts = index.lookup(ctx, max_len, max_count)
        cpu.append(time.thread_time() - c0)
        wall.append(time.perf_counter() - w0)
        hits += bool(drafts)
    return {"wall": percentiles(wall), "thread_cpu": percentiles(cpu), "with_drafts": hits / len(queries)}


def time_updates(index: NgramIndex, files: list[np.ndarray], rounds: int) -> dict[str, Any]:
    sized = [f for f in files if 1500 <= len(f) <= 3000] or files[:1]
    update: list[float] = []
    remove: list[float] = []
    for i in range(rounds):
        path = f"edited/{i % 7}.py"
        t0 = time.perf_counter()
        index.set_file(path, sized[i % len(sized)])
        update.append(time.perf_counter() - t0)
    for i in range(7):
        t0 = time.perf_counter()
        index.remove_file(f"edited/{i}.py")
        remove.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    index.merge()
    return {
        "update": percentiles(update),
        "remove": percentiles(remove),
        "update_file_tokens": int(np.median([len(s) for s in sized])),
        "merge_s": round(time.perf_counter() - t0, 2),
    }


def run_index_bench(args: argparse.Namespace) -> dict[str, Any]:
    """Every figure of the module docstring (``lookahead-lsp bench index``: evaluation/commands/index.py)."""
    tokenizer = load_tokenizer(args.model)
    texts = corpus_files(args.corpus_chars)
    held_out_count = max(1, len(texts) // 10)
    held_out, _ = tokenize_corpus(tokenizer, texts[:held_out_count])
    real, tok_per_s = tokenize_corpus(tokenizer, texts[held_out_count:])
    files = synthesize(real, args.tokens, args.mutate, args.seed)
    index = NgramIndex()
    t0, c0 = time.perf_counter(), time.thread_time()
    index.build(files)
    build_s, build_cpu_s = time.perf_counter() - t0, time.thread_time() - c0
    tokens = index.num_tokens
    inside = contexts([t for _, t in files], args.queries // 2, args.seed + 1)
    outside = contexts(held_out, args.queries - len(inside), args.seed + 2)
    time_lookups(index, inside[:50], args.max_len, args.max_count)  # warm up
    return {
        "workload": f"{len(real)} site-packages .py files ({sum(len(r) for r in real)} tokens) copied with "
        f"{args.mutate:.0%} token mutation to {len(files)} files",
        "tokens": tokens,
        "bytes_per_token": round(index.bytes_per_token, 2),
        "build_s": round(build_s, 2),
        "build_tokens_per_s": round(tokens / build_s),
        "build_thread_cpu_s": round(build_cpu_s, 2),
        "build_tokens_per_cpu_s": round(tokens / build_cpu_s),
        "tokenize_tokens_per_s": round(tok_per_s),
        "lookup_indexed_contexts": time_lookups(index, inside, args.max_len, args.max_count),
        "lookup_held_out_contexts": time_lookups(index, outside, args.max_len, args.max_count),
        "incremental": time_updates(index, real, args.update_rounds),
    }
