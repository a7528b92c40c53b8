"""decoder/model.py: specs, devices and dtypes, the 4-D mask contract, stop tokens, threads, the real model."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from lookahead_lsp.decoder.forward import cache_argument
from lookahead_lsp.decoder.greedy import GreedyDecoder
from lookahead_lsp.decoder.runtime.model import (
    LoadedModel,
    ModelLoadError,
    configure_torch_threads,
    float32_fits,
    load_model,
    parameter_count,
    physical_cores,
    resolve_device,
    resolve_dtype,
    stop_token_ids,
)
from lookahead_lsp.decoder.types import DecodeRequest
from lookahead_lsp.decoder.weights.embedded import EMBEDDED, assemble


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("/nonexistent/model.gguf", "no such file"),
        ("./not-here", "no such file"),
        ("lookahead-lsp-tests/no-such-model-xyz", "not in the local HF cache"),
        ("bad id with spaces!", "not a local path"),
    ],
)
def test_bad_specs_fail_fast_with_one_line(spec: str, fragment: str) -> None:
    started = time.perf_counter()
    with pytest.raises(ModelLoadError) as info:
        load_model(spec, device="cpu")
    assert time.perf_counter() - started < 10
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_a_directory_without_config_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="without config.json"):
        load_model(str(tmp_path), device="cpu")


@pytest.mark.parametrize("device", ["tpu", "cuda:99", "not a device", "meta"])
def test_bad_devices(device: str) -> None:
    with pytest.raises(ModelLoadError):
        load_model("/nonexistent/model.gguf", device=device)  # the device is checked before the spec


@pytest.mark.parametrize("dtype", ["float13", "int8", ""])
def test_bad_dtypes(dtype: str) -> None:
    with pytest.raises(ModelLoadError, match="bad dtype"):
        load_model("/nonexistent/model.gguf", device="cpu", dtype=dtype)


def test_device_and_dtype_resolution() -> None:
    cpu = torch.device("cpu")
    assert resolve_device("cpu") == cpu
    expected = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    assert resolve_dtype("auto", cpu) == torch.float32
    assert resolve_dtype("auto", torch.device("cuda")) == torch.bfloat16
    assert resolve_dtype("auto", torch.device("cuda"), lambda: True) == torch.float32
    assert resolve_dtype("auto", torch.device("cuda"), lambda: False) == torch.bfloat16

    def not_asked() -> bool:
        raise AssertionError("the model's size is asked only where the choice depends on it")

    assert resolve_dtype("auto", cpu, not_asked) == torch.float32
    assert resolve_dtype("bf16", torch.device("cuda"), not_asked) == torch.bfloat16
    assert resolve_dtype("BF16", cpu) == torch.bfloat16
    assert resolve_dtype("torch.float64", cpu) == torch.float64
    assert resolve_dtype(torch.float16, cpu) == torch.float16


def test_float32_where_it_fits_an_accelerator(tiny_model_dir: Path, tmp_path: Path) -> None:
    """float32 on CUDA where its weights take at most a quarter of the device's memory, counted from the config
    without loading weights; nothing known (no config) keeps bfloat16."""
    from transformers import AutoModelForCausalLM

    counted = parameter_count(str(tiny_model_dir))
    loaded = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert counted == sum(p.numel() for p in loaded.parameters())
    assert parameter_count(str(tmp_path)) is None
    gib = 1 << 30
    assert float32_fits(630_167_424, 80 * gib)  # the 0.5B as loaded (its own output head) on an H100
    assert float32_fits(630_167_424, 12 * gib)  # ... and on a 12 GB card (2.5 GB of float32)
    assert not float32_fits(630_167_424, 8 * gib)  # ... not on an 8 GB laptop GPU: bfloat16
    assert float32_fits(1_777_088_000, 80 * gib)  # the 1.5B as loaded (7.1 GB) on an H100
    assert not float32_fits(1_777_088_000, 24 * gib)  # ... not on a 24 GB card: bfloat16
    assert not float32_fits(7_600_000_000, 80 * gib)  # a 7B on an H100: bfloat16
    assert not float32_fits(None, 80 * gib)
    assert not float32_fits(494_000_000, None)


def test_prefill_dtype_resolution() -> None:
    from lookahead_lsp.decoder.runtime.model import resolve_prefill_dtype

    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert resolve_prefill_dtype("auto", cpu, torch.float32, native_bf16=True) == torch.bfloat16
    assert resolve_prefill_dtype("auto", cpu, torch.float32, native_bf16=False) is None  # emulated bf16 is slow
    assert resolve_prefill_dtype("auto", cuda, torch.bfloat16, native_bf16=True) is None
    assert resolve_prefill_dtype("auto", cpu, torch.bfloat16, native_bf16=True) is None  # already bf16
    assert resolve_prefill_dtype("same", cpu, torch.float32, native_bf16=True) is None
    # a model on the GGUF's codes prefills on the native kernel, bfloat16 instructions or not (AMX included)
    native = {"native_bf16": True, "native_codes": True}
    assert resolve_prefill_dtype("auto", cpu, torch.float32, **native) is None
    assert resolve_prefill_dtype("bfloat16", cpu, torch.float32, **native) == torch.bfloat16
    assert resolve_prefill_dtype("float16", cpu, torch.float32) == torch.float16
    assert resolve_prefill_dtype("float32", cpu, torch.float32) is None


def test_configure_torch_threads() -> None:
    before = torch.get_num_threads()
    try:
        assert configure_torch_threads(1) == 1 and torch.get_num_threads() == 1
        assert configure_torch_threads() == physical_cores() == torch.get_num_threads()
        with pytest.raises(ValueError):
            configure_torch_threads(0)
    finally:
        torch.set_num_threads(before)


def _word_tokenizer(words: list[str], eos: str):  # type: ignore[no-untyped-def]
    """A real fast tokenizer over a tiny word-level vocabulary."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    vocab = {word: i for i, word in enumerate(words)}
    return PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token=words[0])), eos_token=eos
    )


def test_stop_tokens_only_from_the_vocabulary() -> None:
    tokenizer = _word_tokenizer(["a", "b", "<|endoftext|>", "<|file_sep|>", "<|my_eos|>"], "<|my_eos|>")
    assert stop_token_ids(tokenizer) == frozenset({2, 3, 4})


@pytest.mark.real_model
def test_stop_tokens_of_the_embedded_tokenizer(tokenizer) -> None:  # type: ignore[no-untyped-def]
    ids = stop_token_ids(tokenizer)
    for token in ("<|endoftext|>", "<|file_sep|>", "<|im_end|>", "<|fim_middle|>"):
        assert tokenizer.convert_tokens_to_ids(token) in ids
    assert tokenizer.eos_token_id in ids
    assert tokenizer.convert_tokens_to_ids("def") not in ids


def _tree_mask(prefix: int, allowed: list[list[int]], dtype: torch.dtype) -> torch.Tensor:
    """A (1, 1, q, prefix + q) float mask: every query sees the prefix and the new positions listed."""
    q = len(allowed)
    mask = torch.full((q, prefix + q), torch.finfo(dtype).min, dtype=dtype)
    mask[:, :prefix] = 0
    for row, cols in enumerate(allowed):
        mask[row, [prefix + c for c in cols]] = 0
    return mask[None, None]


def test_hf_dir_spec_accepts_a_tree_mask_over_a_kv_cache(tmp_path: Path) -> None:
    """The loaded model's attention takes a 4-D float mask with a KV cache like sequential decoding."""
    from transformers import DynamicCache

    from tests.tiny_model import random_qwen2

    random_qwen2(vocab_size=128).save_pretrained(tmp_path)
    _word_tokenizer([f"w{i}" for i in range(128)], "w0").save_pretrained(tmp_path)
    loaded = load_model(str(tmp_path), device="cpu", dtype="float64")
    assert loaded.source == "hf-dir" and loaded.dtype == torch.float64
    model = loaded.model
    assert not model.training and model.config._attn_implementation == "lookahead_sdpa"
    prompt = torch.tensor([[11, 22, 33, 44, 55]])
    prefix = prompt.shape[1]

    def after_prompt(tokens: list[int]) -> torch.Tensor:
        cache = DynamicCache(config=model.config)
        with torch.inference_mode():
            model(input_ids=prompt, **{cache_argument(type(model)): cache})
            return model(input_ids=torch.tensor([tokens]), **{cache_argument(type(model)): cache}).logits[0]

    branch_a, branch_b = after_prompt([70, 71]), after_prompt([70, 72])
    cache = DynamicCache(config=model.config)
    with torch.inference_mode():
        model(input_ids=prompt, **{cache_argument(type(model)): cache})
        tree = model(  # 70, then 71 and 72 as siblings after it
            input_ids=torch.tensor([[70, 71, 72]]),
            position_ids=torch.tensor([[prefix, prefix + 1, prefix + 1]]),
            attention_mask=_tree_mask(prefix, [[0], [0, 1], [0, 2]], torch.float64),
            **{cache_argument(type(model)): cache},
        ).logits[0]
    torch.testing.assert_close(tree[:2], branch_a)
    torch.testing.assert_close(tree[2], branch_b[1])


@pytest.fixture(scope="module")
def embedded() -> Iterator[LoadedModel]:
    loaded = load_model("embedded", device="cpu")
    yield loaded
    del loaded
    gc.collect()


def _greedy_next(loaded: LoadedModel, text: str) -> str:
    ids = loaded.tokenizer(text).input_ids
    token = GreedyDecoder(loaded.model).generate(DecodeRequest(ids, max_new_tokens=1)).token_ids
    return str(loaded.tokenizer.decode(token))


@pytest.mark.real_model
def test_embedded_model_loads_and_predicts_sanely(embedded: LoadedModel) -> None:
    assert embedded.source in {"embedded-cache", "embedded-converted"}
    assert embedded.device == torch.device("cpu") and embedded.dtype == torch.float32
    assert next(embedded.model.parameters()).dtype == torch.float32
    assert 400_000_000 < embedded.parameters < 700_000_000
    assert _greedy_next(embedded, "def add(a, b):\n    return a") == " +"


@pytest.mark.real_model
def test_gguf_spec_uses_the_content_addressed_cache(tmp_path: Path, embedded: LoadedModel) -> None:
    gguf = tmp_path / "copy.gguf"
    assemble(EMBEDDED, gguf)  # the same bytes as the embedded model: the same cache entry
    loaded = load_model(str(gguf), device="cpu")
    try:
        assert loaded.source == "gguf-cache"
        assert loaded.path == embedded.path
        assert _greedy_next(loaded, "import numpy as") == " np"
    finally:
        del loaded
        gc.collect()
