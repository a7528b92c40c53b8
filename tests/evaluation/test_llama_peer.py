"""The benchmark's peer, llama.cpp's llama-server (evaluation/llama_peer.py): configuration names, the paired
ratios of the summary, and against the real server on the embedded GGUF (skipped with the reason where
``scripts/get-engine.sh`` could not install it): our prompt ids in, its greedy tokens and timings out."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lookahead_lsp.decoder.types import DecodeRequest, DecodeStats
from lookahead_lsp.evaluation.llama_peer import Peer, started_peers
from lookahead_lsp.evaluation.peers import PEERS
from lookahead_lsp.evaluation.speed import BenchResult, Run, parse_decoders, summarize
from lookahead_lsp.evaluation.workloads import Hole
from lookahead_lsp.lsp_server.cli import main

FIM = "<|fim_prefix|>def add(a, b):\n    return <|fim_suffix|>\n<|fim_middle|>"
# A list the model continues by repeating the pattern: what n-gram drafts are for.
REPEAT = (
    "<|fim_prefix|>COLORS = [\n    'red',\n    'green',\n    'blue',\n    'red',\n    'green',\n    'blue',\n"
    "<|fim_suffix|>]\n<|fim_middle|>"
)


def test_bench_knows_the_peer_configurations() -> None:
    configs = parse_decoders("lookahead,llama-server,llama-server-ngram")
    assert [c.name for c in configs] == ["greedy", "lookahead", "llama-server", "llama-server-ngram"]
    assert [c.family for c in configs[2:]] == ["peer", "peer"]
    assert "--spec-type" in PEERS["llama-server-ngram"] and PEERS["llama-server"] == ()
    with pytest.raises(ValueError, match="running llama-server"):
        configs[2].build(None)
    with pytest.raises(ValueError, match="llama-server-ngram"):
        parse_decoders("llama-server-fast")


def test_llama_servers_stands_for_every_peer_configuration() -> None:
    configs = parse_decoders("lookahead,llama-servers")
    assert [c.name for c in configs] == ["greedy", "lookahead", *PEERS]
    assert all(c.family == "peer" for c in configs[2:]) and len(PEERS) >= 4
    spec_types = {args[args.index("--spec-type") + 1] for args in PEERS.values() if args}
    assert spec_types == {"ngram-mod", "ngram-simple", "ngram-map-k"}  # each n-gram type at its best setting


def test_bench_refuses_a_peer_without_the_same_gguf(tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bench", "speed", "--model", str(tiny_model_dir), "--holes", "1", "--decoders", "greedy,llama-server"]
    assert main(argv) == 2
    assert "llama-server needs the same GGUF" in capsys.readouterr().err


def _run(hole: str, config: str, prefill_ms: float, decode_ms: float) -> Run:
    stats = DecodeStats(steps=7, new_tokens=8, prefill_ms=prefill_ms, decode_ms=decode_ms)
    return Run(hole, "fim", config, [], stats, True)


def test_prefill_and_completion_ratios_are_paired_per_hole() -> None:
    result = BenchResult({}, ["greedy", "peer"], [Hole("fim", "single-line", "a.py", "", "x", "")])
    result.runs = [
        _run("h1", "greedy", 100.0, 300.0),
        _run("h2", "greedy", 200.0, 200.0),
        _run("h1", "peer", 400.0, 100.0),  # prefill 0.25x, completion 400/500
        _run("h2", "peer", 50.0, 350.0),  # prefill 4x, completion 400/400
    ]
    peer = {s.config: s for s in summarize(result)}["peer"]
    assert peer.prefill_speedup == pytest.approx(1.0)
    assert peer.completion_ms == pytest.approx(450.0)
    assert peer.completion_speedup == pytest.approx((400 / 500 * 1.0) ** 0.5)
    assert peer.speedup == pytest.approx((3.0 * 200 / 350) ** 0.5)


# ---- against the real llama-server ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def peers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Peer]]:
    from lookahead_lsp.evaluation.remote_bench import engine_unavailable

    reason = engine_unavailable()
    if reason is not None:
        print(f"SKIP llama-server peer tests: {reason}")
        pytest.skip(reason)
    with started_peers(PEERS, 1, tmp_path_factory.mktemp("peers")) as running:
        yield running


@pytest.fixture(scope="module")
def tokenizer(embedded_hf_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(embedded_hf_dir))


def _request(tokenizer: Any, prompt: str, max_new_tokens: int) -> DecodeRequest:
    from lookahead_lsp.decoder.runtime.model import stop_token_ids

    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    return DecodeRequest(ids, max_new_tokens=max_new_tokens, eos_ids=stop_token_ids(tokenizer))


def _server_text(url: str, prompt_ids: list[int], n_predict: int) -> str:
    """What the server itself says it generated for these ids (its ``content``), asked directly."""
    body = {"prompt": prompt_ids, "n_predict": n_predict, "temperature": 0, "top_k": 1, "cache_prompt": False}
    post = urllib.request.Request(f"{url}/completion", json.dumps(body).encode())
    with urllib.request.urlopen(post, timeout=600) as response:
        text: str = json.load(response)["content"]
    return text


def test_peer_returns_the_servers_greedy_tokens_for_our_prompt_ids(peers: dict[str, Peer], tokenizer: Any) -> None:
    plain = peers["llama-server"]
    request = _request(tokenizer, FIM, 12)
    first = plain.decoder.generate(request)
    second = plain.decoder.generate(request)
    text = tokenizer.decode(first.token_ids)
    print(f"llama-server: {text!r} {first.stats.to_dict()}")
    assert text.startswith("a + b"), text
    assert first.token_ids == second.token_ids
    assert text == _server_text(plain.server.url, list(request.prompt_ids), len(first.token_ids))
    for result in (first, second):  # no prompt cache between calls: each prefills the whole prompt
        stats = result.stats
        assert stats.prefilled_tokens == stats.prompt_tokens == len(request.prompt_ids) and stats.reused_tokens == 0
        assert stats.new_tokens == len(result.token_ids) and 0 < stats.new_tokens <= 12
        assert stats.prefill_ms > 0 and stats.decode_ms > 0 and stats.steps == stats.new_tokens - 1


@pytest.mark.parametrize("name", [name for name, args in PEERS.items() if args])
def test_peer_with_ngram_speculation_is_lossless_and_drafts(peers: dict[str, Peer], tokenizer: Any, name: str) -> None:
    request = _request(tokenizer, REPEAT, 24)
    plain = peers["llama-server"].decoder.generate(request)
    ngram = peers[name].decoder.generate(request)
    print(f"plain {plain.stats.to_dict()}\n{name} {ngram.stats.to_dict()}")
    assert ngram.token_ids == plain.token_ids and len(plain.token_ids) > 8
    accepted = ngram.stats.tokens_by_source["llama-ngram"]
    assert accepted > 0 and ngram.stats.steps == ngram.stats.new_tokens - 1 - accepted
    assert ngram.stats.tokens_in_passes > ngram.stats.steps  # its passes verified drafts


def test_peer_servers_stop_when_the_block_ends_badly(peers: dict[str, Peer], tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt), started_peers({"llama-server": ()}, 1, tmp_path) as running:
        process = running["llama-server"].server.process
        assert process is not None and process.poll() is None
        raise KeyboardInterrupt
    assert process is not None and process.poll() is not None


@pytest.mark.real_model
def test_peer_decodes_what_our_greedy_decodes(peers: dict[str, Peer], tokenizer: Any) -> None:
    """Same GGUF, same prompt ids: llama-server's greedy tokens are our greedy decoder's."""
    from lookahead_lsp.decoder.greedy import GreedyDecoder
    from lookahead_lsp.decoder.runtime.model import load_model

    ours = GreedyDecoder(load_model("embedded", device="cpu").model)
    prompt = "<|fim_prefix|>import os\n\n\ndef read(path):\n    <|fim_suffix|>\n<|fim_middle|>"
    for text in (FIM, prompt):
        request = _request(tokenizer, text, 16)
        assert peers["llama-server"].decoder.generate(request).token_ids == ours.generate(request).token_ids


def test_a_server_ends_with_the_process_that_started_it_even_when_killed(
    peers: dict[str, Peer], tmp_path: Path
) -> None:
    """SIGKILL runs no ``finally``: the server still goes (``setpriv --pdeathsig``), no orphan holds the CPU."""
    if shutil.which("setpriv") is None:
        pytest.skip("no setpriv (util-linux) here: a server outlives a killed benchmark")
    code = (
        "import sys, time\nfrom pathlib import Path\n"
        "from lookahead_lsp.evaluation.remote_bench import LlamaServer, embedded_gguf\n"
        f"server = LlamaServer(embedded_gguf(), Path({str(tmp_path / 'server.log')!r}))\n"
        "server.start()\nprint(server.process.pid, flush=True)\ntime.sleep(600)\n"
    )
    starter = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        server = Path(f"/proc/{int(starter.stdout.readline())}")  # type: ignore[union-attr]
        assert "llama-server" in (server / "cmdline").read_text()
    finally:
        starter.kill()
        starter.wait()
    deadline = time.monotonic() + 30
    while server.exists() and (server / "stat").read_text().split()[2] != "Z":
        assert time.monotonic() < deadline, "llama-server outlived the process that started it"
        time.sleep(0.1)


@pytest.mark.real_model
def test_bench_beside_llama_server_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from lookahead_lsp.evaluation.remote_bench import engine_unavailable

    if (reason := engine_unavailable()) is not None:
        pytest.skip(reason)
    out = tmp_path / "bench"
    argv = ["bench", "speed", "--workload", "fim", "--holes", "1", "--max-new-tokens", "8", "--token-budget", "256"]
    argv += ["--decoders", "greedy,llama-server,llama-server-ngram", "--peer-threads", "1", "--out", str(out)]
    assert main(argv) == 0
    assert (
        "| llama-server-ngram |" in capsys.readouterr().out and "completion vs greedy" in (out / "bench.md").read_text()
    )
    data = json.loads((out / "bench.json").read_text())
    assert data["configs"] == ["greedy", "llama-server", "llama-server-ngram"]
    meta = data["meta"]
    print({k: v for k, v in meta.items() if k.startswith(("rss", "llama"))})
    assert meta["llama_server_threads"] == 1 and meta["rss_mb_model_loaded"] > 100
    assert meta["rss_mb_llama-server"] > 100 and meta["rss_mb_llama-server-ngram"] > 100
    # the host's streaming read before and after the run: a memory reads at least a GB a second
    assert meta["stream_read_gb_s_start"] >= 1 and meta["stream_read_gb_s_end"] >= 1
    assert "- stream_read_gb_s_start: " in (out / "bench.md").read_text()
    for row in data["summary"]["fim"]:
        assert row["tokens_per_s"] > 0 and row["prefill_ms"] > 0 and row["prefill_speedup"] > 0
        assert row["completion_ms"] == pytest.approx(row["prefill_ms"] + row["decode_ms"], abs=0.01)
    # our decoders prefilled the whole prompt too (no cache kept from the warm-up or another decoder)
    assert all(run["prefilled_tokens"] == run["prompt_tokens"] for run in data["runs"])
    assert (out / "llama-server" / "llama-server.log").is_file()
