"""The embedded 1.5B model (extra ``model-1.5b``, which ``scripts/setup.sh`` and so ``scripts/test.sh`` install
by default) on real code: it loads on its GGUF's own blocks without a float copy, completes a real file end to end
through the CLI, and lookahead equals greedy on it.

Skipped, with the reason, only where the 1.5B was left out on purpose (``LOOKAHEAD_LSP_NO_1_5B=1``, which
``scripts/setup.sh --no-1.5b`` stands for); missing otherwise, every test fails saying how to install it, and
parts that are installed but damaged fail."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from lookahead_lsp.decoder.greedy import GreedyDecoder
from lookahead_lsp.decoder.lookahead import LookaheadConfig, LookaheadDecoder
from lookahead_lsp.decoder.runtime.model import load_model, stop_token_ids
from lookahead_lsp.decoder.types import DecodeRequest
from lookahead_lsp.decoder.weights.embedded import EMBEDDED_1_5B
from tests.decoder.test_real_model import greedy_and_lookahead, holes


def not_installed() -> list[str]:
    missing = []
    for package in EMBEDDED_1_5B.packages:
        try:
            importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            missing.append(package)
    return missing


def opted_out() -> bool:
    """Whether the 1.5B was left out on purpose (the environment variable ``scripts/setup.sh`` reads)."""
    return os.environ.get("LOOKAHEAD_LSP_NO_1_5B", "") not in ("", "0")


MISSING = not_installed()
pytestmark = [
    pytest.mark.real_model,
    pytest.mark.skipif(
        bool(MISSING) and opted_out(),
        reason=f"the 1.5B was left out (LOOKAHEAD_LSP_NO_1_5B) and is not installed ({', '.join(MISSING[:3])}...)",
    ),
]


@pytest.fixture(autouse=True)
def installed() -> None:
    """The 1.5B is installed by default: missing without the opt-out is a failure, not a skip."""
    assert not MISSING, (
        f"the 1.5B model's extra is not installed ({', '.join(MISSING[:3])}...): run scripts/setup.sh (it installs "
        "it by default) or pip install 'lookahead-lsp[model-1.5b]'; LOOKAHEAD_LSP_NO_1_5B=1 skips these tests"
    )


SOURCE = "".join(
    [
        "def fibonacci(n):\n",
        '    """Return the n-th Fibonacci number."""\n',
        "    if n < 2:\n",
        "        return n\n",
        "    return \n",  # the cursor: line 4, character 11
    ]
)


def test_the_cli_completes_a_real_file_with_the_1_5b(tmp_path: Path) -> None:
    path = tmp_path / "fib.py"
    path.write_text(SOURCE + "\n\nprint(fibonacci(10))\n")
    command = [sys.executable, "-m", "lookahead_lsp.lsp_server.cli", "complete", str(path), "--line", "4"]
    command += ["--character", "11", "--model", "embedded-1.5b", "--device", "cpu", "--no-index", "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)  # stdout holds the JSON and nothing else
    assert "fibonacci(n-1)+fibonacci(n-2)" in result["text"].replace(" ", "")
    assert result["stats"]["new_tokens"] >= 1


@pytest.fixture(scope="module")
def loaded():
    return load_model("embedded-1.5b", device="cpu", dtype="float32")


def test_the_1_5b_loads_on_its_gguf_blocks_and_lookahead_equals_greedy(loaded, tokenizer) -> None:
    assert loaded.weights.startswith("gguf-") and loaded.source.startswith("embedded")
    assert 1.5e9 < loaded.parameters < 2.0e9
    tok = loaded.tokenizer
    # the 0.5B's tokenizer: prompts, healing, stop rules and the workspace index carry over unchanged
    assert tok.get_vocab() == tokenizer.get_vocab() and stop_token_ids(tok) == stop_token_ids(tokenizer)
    assert tok.convert_tokens_to_ids(["<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"]) == [151659, 151661, 151660]
    greedy, lookahead = GreedyDecoder(loaded.model), LookaheadDecoder(loaded.model, LookaheadConfig())
    want, got = greedy_and_lookahead(tok, greedy, lookahead, holes(1)[0], 24)
    assert got.token_ids == want.token_ids
    assert tok.decode(got.token_ids).strip()


def test_the_llama_server_peer_runs_the_same_1_5b_file(loaded, tmp_path: Path) -> None:
    """``bench --model embedded-1.5b``'s peer: llama-server serves the 1.5B's own GGUF and completes as we do."""
    from lookahead_lsp.evaluation.commands.bench import peer_gguf
    from lookahead_lsp.evaluation.llama_peer import started_peers
    from lookahead_lsp.evaluation.remote_bench import engine_unavailable

    if (reason := engine_unavailable()) is not None:
        pytest.skip(reason)
    gguf = peer_gguf("embedded-1.5b")  # assembled from the parts once, size and sha256 checked
    assert gguf.name == EMBEDDED_1_5B.gguf_name and gguf.stat().st_size == EMBEDDED_1_5B.size
    tok = loaded.tokenizer
    ids = tok("<|fim_prefix|>def add(a, b):\n    return <|fim_suffix|>\n<|fim_middle|>")["input_ids"]
    request = DecodeRequest(ids, 12, eos_ids=stop_token_ids(tok))
    with started_peers({"llama-server": ()}, 1, tmp_path, gguf) as peers:
        url = peers["llama-server"].server.url
        with urllib.request.urlopen(f"{url}/props", timeout=60) as response:
            served = json.load(response)["model_path"]
        theirs = peers["llama-server"].decoder.generate(request)
    assert Path(served).name == EMBEDDED_1_5B.gguf_name
    ours = GreedyDecoder(loaded.model).generate(request)
    # the same line; what follows it is a near tie between newline tokens ("\n\n" or "\n\n\n") that the
    # two engines' arithmetic may break either way, and the stop rules end the completion there anyway
    first_line = tok.decode(ours.token_ids).split("\n")[0]
    assert first_line == tok.decode(theirs.token_ids).split("\n")[0] == "a + b"
