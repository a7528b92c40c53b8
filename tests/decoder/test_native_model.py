"""The native pass's own module tree (decoder/runtime/native_model.py): its rotary table is transformers', a packed
tiny model built on it decodes bit for bit as one built on transformers' Qwen2, a model the native pass cannot
serve is built as transformers', and loading the embedded model imports no transformers modeling code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from transformers import Qwen2Config
from transformers.models.qwen2.modeling_qwen2 import Qwen2RotaryEmbedding

from lookahead_lsp.decoder.forward import forward
from lookahead_lsp.decoder.greedy import GreedyDecoder
from lookahead_lsp.decoder.kernels.woq_native import WoqKernel, built_kernel
from lookahead_lsp.decoder.kv import PrefixKV
from lookahead_lsp.decoder.runtime.model import prepare_for_inference
from lookahead_lsp.decoder.runtime.native_model import NativeQwen2, Rotary, light_config
from lookahead_lsp.decoder.runtime.packed_model import fill_from_checkpoint, pack_gguf, packed_skeleton
from lookahead_lsp.decoder.types import DecodeRequest
from tests.decoder.test_packed import save_checkpoint, write_tiny_gguf
from tests.tiny_model import make_tiny_qwen2

BASE = {"hidden_size": 128, "num_attention_heads": 4, "rope_parameters": {"rope_theta": 1e6, "rope_type": "default"}}


@pytest.fixture(scope="module")
def kernel() -> WoqKernel:
    built = built_kernel()
    assert built is not None  # the machines this project is tested on have g++
    return built


@pytest.fixture(autouse=True)
def native_forward(monkeypatch: pytest.MonkeyPatch, kernel: WoqKernel) -> None:
    """``forward`` takes the native pass here even where $LOOKAHEAD_LSP_NATIVE=0 turns the decoders' use off."""
    monkeypatch.setattr("lookahead_lsp.decoder.forward.native_kernel", lambda: kernel)


def built(tmp: Path, kernel: WoqKernel, *, light: bool, native: bool = True) -> torch.nn.Module:
    """The tiny model packed from its GGUF as the loader builds it: skeleton, packed modules, small tensors."""
    source = make_tiny_qwen2(vocab_size=512, seed=1, dtype=torch.float32)
    gguf, checkpoint = tmp / "tiny.gguf", tmp / "model.safetensors"
    if not gguf.exists():
        write_tiny_gguf(source, gguf)
        save_checkpoint(source, checkpoint)
    model, _ = packed_skeleton(
        source.config, pack_gguf(gguf), "sdpa", native=native, kernel=kernel if native else None, light=light
    )
    with safe_open(str(checkpoint), framework="pt") as opened:
        fill_from_checkpoint(model, opened)
    prepare_for_inference(model, torch.device("cpu"))
    return model


def test_the_rotary_table_is_transformers_bit_for_bit() -> None:
    ours, theirs = Rotary(1e6, 32), Qwen2RotaryEmbedding(Qwen2Config(**BASE))
    positions = torch.tensor([[0, 1, 2, 7, 500, 4095, 32767]])
    x = torch.zeros(1, 7, 128)
    for got, want in zip(ours(x, positions), theirs(x, positions), strict=True):
        assert torch.equal(got, want)


def test_which_configs_the_light_tree_stands_for() -> None:
    base = BASE
    linear = {"rope_theta": 1e6, "rope_type": "linear", "factor": 2.0}
    assert light_config(Qwen2Config(**base))
    assert not light_config(Qwen2Config(**{**base, "rope_parameters": linear}))
    assert not light_config(Qwen2Config(**{**base, "use_sliding_window": True, "sliding_window": 64}))
    assert not light_config(Qwen2Config(**{**base, "hidden_act": "gelu"}))
    assert not light_config(Qwen2Config(**{**base, "hidden_size": 72, "num_attention_heads": 3}))  # heads 24 wide


def test_the_light_tree_decodes_bit_for_bit_as_transformers_model(kernel: WoqKernel, tmp_path: Path) -> None:
    light, heavy = built(tmp_path, kernel, light=True), built(tmp_path, kernel, light=False)
    assert isinstance(light, NativeQwen2) and not isinstance(heavy, NativeQwen2)
    prompt = [5, 17, 300, 42, 42, 9, 77, 3]
    logits = []
    for model in (light, heavy):
        kv = PrefixKV()
        first = forward(model, kv, prompt)
        kv.append(prompt)
        wide = forward(model, kv, [8, 9, 10], [8, 9, 9], torch.tensor([[1, 0, 0], [1, 1, 0], [1, 0, 1]]).bool())
        logits.append((first, wide))
    assert torch.equal(logits[0][0], logits[1][0]) and torch.equal(logits[0][1], logits[1][1])
    request = DecodeRequest(prompt_ids=prompt, max_new_tokens=24)
    assert GreedyDecoder(light).generate(request).token_ids == GreedyDecoder(heavy).generate(request).token_ids
    with pytest.raises(RuntimeError, match="native pass only"):
        light(input_ids=torch.tensor([prompt]))


def test_a_model_off_the_native_kernel_is_built_as_transformers(kernel: WoqKernel, tmp_path: Path) -> None:
    model = built(tmp_path, kernel, light=True, native=False)  # ATen's int4 planes: transformers' forward runs it
    assert not isinstance(model, NativeQwen2)
    assert forward(model, PrefixKV(), [5, 17, 300]).shape == (3, 512)


@pytest.mark.real_model
def test_loading_the_embedded_model_imports_no_transformers_modeling_code() -> None:
    script = (
        "import json, sys\n"
        "from lookahead_lsp.decoder.runtime.model import load_model\n"
        "loaded = load_model('embedded', device='cpu')\n"
        "heavy = ('torch._dynamo', 'transformers.modeling_utils', 'transformers.masking_utils', 'sympy')\n"
        "print(json.dumps({'tree': type(loaded.model).__name__, 'weights': loaded.weights,\n"
        "                  'prefill': str(loaded.prefill_dtype),\n"
        "                  'imported': [name for name in heavy if name in sys.modules]}))\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    if report["weights"] != "gguf-native" or report["prefill"] != "torch.float32":
        assert report["tree"] == "Qwen2ForCausalLM"  # no native kernel: transformers' tree, rightly
        return
    assert report == {"tree": "NativeQwen2", "weights": "gguf-native", "prefill": "torch.float32", "imported": []}
