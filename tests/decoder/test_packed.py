"""GGUF weights on their codes: the block readers, the packed layers, a packed tiny model on the native kernel and on
ATen's int4 planes, lossless decoding on it."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter
from gguf.quants import dequantize, quantize

from lookahead_lsp.decoder.greedy import GreedyDecoder
from lookahead_lsp.decoder.kernels.woq_native import built_kernel, native_enabled, native_kernel
from lookahead_lsp.decoder.lookahead import LookaheadConfig, LookaheadDecoder
from lookahead_lsp.decoder.policy import GPU_COST, CostModel
from lookahead_lsp.decoder.runtime.model import ModelLoadError, prepare_for_inference, use_gguf_weights
from lookahead_lsp.decoder.runtime.packed_linear import PackedEmbedding, PackedLinear, int4_kernel_works, requantize
from lookahead_lsp.decoder.runtime.packed_model import (
    DequantizingLinear,
    cache_path,
    cached_packed_state,
    fill_from_checkpoint,
    gguf_linear,
    layer_weights,
    pack_gguf,
    packed_skeleton,
    prefill_twin,
    use_packed,
)
from lookahead_lsp.decoder.runtime.woq_layer import WoqLinear
from lookahead_lsp.decoder.types import DecodeRequest
from lookahead_lsp.decoder.weights.gguf_blocks import SixBitGroups, read_affine, read_blocks, supported
from lookahead_lsp.decoder.weights.gguf_names import module_name
from tests.tiny_model import make_tiny_qwen2

pytestmark = pytest.mark.skipif(not int4_kernel_works(), reason="this PyTorch has no working CPU int4 kernel")

BLOCK_BYTES = {"Q4_0": (18, 32), "Q4_1": (20, 32), "Q5_0": (22, 32), "Q5_1": (24, 32), "Q8_0": (34, 32),
               "Q4_K": (144, 256), "Q5_K": (176, 256), "Q6_K": (210, 256)}  # fmt: skip
FP16_OFFSETS = {"Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q5_1": (0, 2), "Q8_0": (0,), "Q4_K": (0, 2),
                "Q5_K": (0, 2), "Q6_K": (208,)}  # fmt: skip


def random_blocks(type_name: str, rows: int, cols: int, seed: int = 0) -> np.ndarray:
    """Random raw blocks of a GGUF type, with finite fp16 scales: every such block is a valid tensor."""
    rng = np.random.default_rng(seed)
    block_bytes, block_weights = BLOCK_BYTES[type_name]
    blocks = rng.integers(0, 256, size=(rows * cols // block_weights, block_bytes), dtype=np.uint8)
    for offset in FP16_OFFSETS[type_name]:
        scales = rng.uniform(-0.05, 0.05, size=blocks.shape[0]).astype(np.float16)
        blocks[:, offset : offset + 2] = scales.view(np.uint8).reshape(-1, 2)
    return blocks.reshape(rows, -1)


@pytest.mark.parametrize("type_name", ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K"])
def test_codes_and_scales_reproduce_the_gguf_dequantization_exactly(type_name: str) -> None:
    rows, cols = 32, 512
    raw = random_blocks(type_name, rows, cols, seed=len(type_name))
    groups = read_affine(raw, type_name, rows, cols)
    assert groups is not None
    want = dequantize(raw, GGMLQuantizationType[type_name]).reshape(rows, cols)
    np.testing.assert_array_equal(groups.dequantize(), want)
    assert int(groups.codes.max()) < 2**groups.bits


def test_q6_k_is_read_as_its_own_groups_and_float_formats_not_at_all() -> None:
    assert supported("Q6_K") and supported("Q5_K") and not supported("F16")
    raw = random_blocks("Q6_K", 16, 256)
    assert read_affine(raw, "Q6_K", 16, 256) is None  # a scale per 16 weights: no groups of 32
    assert isinstance(read_blocks(raw, "Q6_K", 16, 256), SixBitGroups)  # tests/decoder/test_q6_k.py
    assert read_blocks(np.zeros((16, 512), np.uint8), "F16", 16, 256) is None


@pytest.mark.parametrize("type_name", ["Q4_K", "Q5_0", "Q8_0"])
def test_a_packed_layer_multiplies_by_the_gguf_weight_up_to_bfloat16_rounding(type_name: str) -> None:
    rows, cols = 64, 256
    groups = read_affine(random_blocks(type_name, rows, cols, seed=3), type_name, rows, cols)
    assert groups is not None
    layer = PackedLinear.from_groups(groups, None)
    assert len(layer.planes) == (1 if groups.bits <= 4 else 2)
    weight = torch.from_numpy(groups.dequantize()).double()
    x = torch.randn(5, cols, generator=torch.Generator().manual_seed(0))
    want = x.bfloat16().double() @ weight.t()
    got = layer(x).double()
    assert (got - want).abs().max() <= 2**-6 * want.abs().max()  # bfloat16 products: 8 significant bits
    # each row is computed on its own: one row at a time gives the same bits (lossless lookahead relies on it)
    assert torch.equal(torch.cat([layer(x[i : i + 1]) for i in range(5)]), layer(x))


def test_the_planes_hold_each_weight_not_just_the_products() -> None:
    rows, cols = 32, 64
    groups = read_affine(random_blocks("Q8_0", rows, cols, seed=5), "Q8_0", rows, cols)
    assert groups is not None
    layer = PackedLinear.from_groups(groups, None)
    columns = layer(torch.eye(cols)).t().double()  # one-hot inputs read the weight back, column by column
    weight = torch.from_numpy(groups.dequantize()).double()
    assert (columns - weight).abs().max() <= 2**-7 * weight.abs().max()


def test_requantize_fits_8_bit_codes_within_half_a_step() -> None:
    weight = torch.randn(32, 64, generator=torch.Generator().manual_seed(2))
    groups = requantize(weight)
    step = groups.scale.repeat(32, axis=1)
    assert groups.bits == 8 and np.all(np.abs(groups.dequantize() - weight.numpy()) <= step / 2 + 1e-6)
    assert np.all(groups.codes >= 1)  # symmetric: codes 1..255 around 128


def test_a_packed_embedding_looks_up_the_exact_float_rows() -> None:
    rows, cols = 48, 64
    groups = read_affine(random_blocks("Q5_0", rows, cols, seed=7), "Q5_0", rows, cols)
    assert groups is not None
    ids = torch.tensor([[0, 47, 3, 3]])
    got = PackedEmbedding.from_groups(groups)(ids)
    assert torch.equal(got[0], torch.from_numpy(groups.dequantize()[[0, 47, 3, 3]]))


# --- a tiny model written as a GGUF, packed, decoded --------------------------------------------------------

QUANT_TYPES = {"attn_q": "Q5_0", "attn_k": "Q5_0", "attn_v": "Q8_0", "attn_output": "Q4_0", "ffn_gate": "Q5_0",
               "ffn_up": "Q8_0", "ffn_down": "Q4_1"}  # fmt: skip


def write_tiny_gguf(model: torch.nn.Module, path: Path) -> None:
    """The tiny model's matrices quantized into a GGUF with llama.cpp's qwen2 tensor names (tied embedding:
    no ``output.weight``)."""
    writer = GGUFWriter(str(path), "qwen2")
    state = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}

    def add(name: str, weight: np.ndarray, type_name: str) -> None:
        qtype = GGMLQuantizationType[type_name]
        blocks = quantize(weight, qtype)
        writer.add_tensor(name, blocks, raw_shape=blocks.shape, raw_dtype=qtype)

    add("token_embd.weight", state["model.embed_tokens.weight"], "Q8_0")
    for layer in range(2):
        for short, type_name in QUANT_TYPES.items():
            name = f"blk.{layer}.{short}.weight"
            add(name, state[f"{module_name(name)}.weight"], type_name)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def dequantized_copy(model: torch.nn.Module, gguf: Path) -> torch.nn.Module:
    """The same tiny model with every matrix replaced by the GGUF's dequantized float32 values."""
    twin = make_tiny_qwen2(vocab_size=512, seed=1, dtype=torch.float32)
    params = dict(twin.named_parameters())
    for tensor in GGUFReader(str(gguf)).tensors:
        cols, rows = (int(n) for n in tensor.shape[:2])
        values = dequantize(tensor.data, tensor.tensor_type).reshape(rows, cols)
        params[f"{module_name(tensor.name)}.weight"].data.copy_(torch.from_numpy(values))
    return twin


KERNELS = ["native", "int4"]
"""the native kernel (decoder/woq_kernel.cpp, built here: this machine has a compiler) and ATen's int4 planes"""


def test_the_native_kernel_is_built_here_and_used_unless_turned_off() -> None:
    assert built_kernel() is not None  # the machines this project is tested on have g++
    assert (native_kernel() is not None) == native_enabled()  # the default path, unless $LOOKAHEAD_LSP_NATIVE=0


def expected_counts(kernel: str) -> dict[str, int]:
    counts = {"native": 0, "int4": 0, "bf16": 0, "embedding": 1}
    counts[kernel] = 15  # 7 matrices x 2 layers + the tied head
    return counts


@pytest.fixture(scope="module", params=KERNELS)
def packed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple:
    gguf = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    source = make_tiny_qwen2(vocab_size=512, seed=1, dtype=torch.float32)
    write_tiny_gguf(source, gguf)
    model = make_tiny_qwen2(vocab_size=512, seed=1, dtype=torch.float32)
    native = request.param == "native"  # the built kernel even where $LOOKAHEAD_LSP_NATIVE=0 turns the default off
    counts = use_packed(model, pack_gguf(gguf), native=native, kernel=built_kernel() if native else None)
    assert counts == expected_counts(request.param)
    return model, dequantized_copy(source, gguf), gguf, request.param


def test_the_packed_model_computes_what_its_dequantized_float_twin_computes(packed: tuple) -> None:
    model, dense = packed[0], packed[1]
    ids = torch.tensor([[5, 17, 300, 42, 42, 9]])
    with torch.inference_mode():
        got, want = model(input_ids=ids).logits[0], dense(input_ids=ids).logits[0]
    assert (got - want).abs().max() <= 0.05 * want.abs().max()
    assert torch.equal(got.argmax(-1), want.argmax(-1))


def test_lookahead_on_the_packed_model_equals_greedy_on_it_token_for_token(packed: tuple) -> None:
    model = packed[0]
    rng = random.Random(4)
    lookahead = LookaheadDecoder(
        model, LookaheadConfig(window=1, ngram=8, verify=8), cost=CostModel(GPU_COST, adaptive=False)
    )
    for _ in range(6):
        base = [rng.randrange(512) for _ in range(rng.randrange(8, 30))]
        prompt = base + base[:5]
        request = DecodeRequest(prompt_ids=prompt, max_new_tokens=40)
        want = GreedyDecoder(model).generate(request).token_ids
        assert lookahead.generate(DecodeRequest(prompt_ids=prompt, max_new_tokens=40)).token_ids == want


def test_the_bfloat16_prefill_twin_shares_everything_but_the_layer_weights(packed: tuple) -> None:
    model, kind = packed[0], type(packed[0].lm_head)
    dense = {n: torch.zeros(m.out_features, m.in_features, dtype=torch.bfloat16)
             for n, m in model.named_modules() if isinstance(m, kind) and ".layers." in f".{n}"}  # fmt: skip
    twin = prefill_twin(model, dense)
    assert twin.model.embed_tokens.codes is model.model.embed_tokens.codes
    head = (lambda m: m.tiles) if kind is WoqLinear else (lambda m: m.planes[0].packed)
    assert head(twin.lm_head) is head(model.lm_head)
    assert twin.model.norm.weight is model.model.norm.weight
    assert twin.model.layers[0].mlp.up_proj.weight is dense["model.layers.0.mlp.up_proj"]
    assert isinstance(model.model.layers[0].mlp.up_proj, kind)  # the model itself is unchanged


def test_on_the_native_kernel_the_twin_dequantizes_its_layers_instead_of_holding_them(packed: tuple) -> None:
    model, dense, _, kernel = packed
    if kernel != "native":
        assert layer_weights(model, torch.bfloat16, None) == {}  # ATen's planes: the twin reads the checkpoint
        return
    twin = prefill_twin(model, layer_weights(model, torch.bfloat16, None))
    up = twin.model.layers[0].mlp.up_proj
    assert isinstance(up, DequantizingLinear) and up.source.tiles is model.model.layers[0].mlp.up_proj.tiles  # shared
    weight = dense.model.layers[0].mlp.up_proj.weight
    assert torch.equal(up.source.dense(), weight.bfloat16())  # the GGUF's values, rounded once to bfloat16
    ids = torch.tensor([[5, 17, 300, 42, 42, 9]])
    with torch.inference_mode():
        got, want = twin(input_ids=ids).logits[0], dense(input_ids=ids).logits[0]
    assert (got - want).abs().max() <= 0.05 * want.abs().max()


def save_checkpoint(model: torch.nn.Module, path: Path, drop: str = "") -> Path:
    """The model's state dict as a safetensors checkpoint (as the converted directory holds it)."""
    from safetensors.torch import save_file

    save_file({k: v.detach().clone() for k, v in model.state_dict().items() if k != drop}, str(path))
    return path


def test_a_packed_model_built_on_the_meta_device_equals_one_packed_after_loading(packed: tuple, tmp_path: Path) -> None:
    from safetensors import safe_open

    model, _, gguf, kernel = packed
    source = make_tiny_qwen2(vocab_size=512, seed=1, dtype=torch.float32)
    checkpoint = save_checkpoint(source, tmp_path / "model.safetensors")
    native = kernel == "native"
    built, counts = packed_skeleton(
        source.config, pack_gguf(gguf), "sdpa", native=native, kernel=built_kernel() if native else None
    )
    with safe_open(str(checkpoint), framework="pt") as opened:
        read = fill_from_checkpoint(built, opened)
        dense = layer_weights(built, torch.bfloat16, opened)
    prepare_for_inference(built, torch.device("cpu"))
    assert counts == expected_counts(kernel)
    assert read == 2 * 2 + 2 * 3 + 1  # two norms and three biases a layer, and the final norm
    assert not any(t.is_meta for t in [*built.parameters(), *built.buffers()])
    if kernel == "native":  # bfloat16 twins of native layers dequantize their codes: nothing read
        assert dense == {}
    else:
        assert set(dense) == {n for n, m in built.named_modules() if isinstance(m, PackedLinear) and ".layers." in n}
        assert torch.equal(dense["model.layers.1.mlp.up_proj"], source.model.layers[1].mlp.up_proj.weight.bfloat16())
    ids = torch.tensor([[5, 17, 300, 42, 42, 9]])
    with torch.inference_mode():
        assert torch.equal(built(input_ids=ids).logits, model(input_ids=ids).logits)


def test_a_tensor_missing_from_the_checkpoint_is_named(packed: tuple, tmp_path: Path) -> None:
    from safetensors import safe_open

    source = make_tiny_qwen2(vocab_size=512, seed=1, dtype=torch.float32)
    checkpoint = save_checkpoint(source, tmp_path / "model.safetensors", drop="model.layers.1.input_layernorm.weight")
    built, _ = packed_skeleton(source.config, pack_gguf(packed[2]), "sdpa")
    with safe_open(str(checkpoint), framework="pt") as opened, pytest.raises(ValueError) as info:
        fill_from_checkpoint(built, opened)
    assert "model.layers.1.input_layernorm.weight" in str(info.value)


def test_the_packed_state_is_cached_and_a_damaged_cache_is_rebuilt(packed: tuple, tmp_path: Path) -> None:
    gguf = packed[2]
    produced: list[Path] = []

    def produce(_directory: Path) -> Path:
        produced.append(gguf)
        return gguf

    first = cached_packed_state(tmp_path, "abc", produce, lambda *_: None)
    second = cached_packed_state(tmp_path, "abc", produce, lambda *_: None)
    assert len(produced) == 1 and first.keys() == second.keys()
    assert all(torch.equal(first[k], second[k]) for k in first)
    cache_path(tmp_path, "abc").write_bytes(b"not a safetensors file")
    third = cached_packed_state(tmp_path, "abc", produce, lambda *_: None)
    assert len(produced) == 2 and third.keys() == first.keys()


@pytest.mark.parametrize(
    ("weights", "device", "dtype", "source", "expected"),
    [
        ("auto", "cpu", torch.float32, "embedded-cache", True),
        ("auto", "cpu", torch.float32, "gguf-converted", True),
        ("auto", "cpu", torch.float32, "hf-dir", False),
        ("auto", "cpu", torch.bfloat16, "embedded-cache", False),
        ("dense", "cpu", torch.float32, "embedded-cache", False),
        ("gguf", "cpu", torch.bfloat16, "embedded-cache", True),
    ],
)
def test_which_models_decode_on_gguf_weights(weights: str, device: str, dtype: torch.dtype, source: str,
                                             expected: bool) -> None:  # fmt: skip
    assert use_gguf_weights(weights, torch.device(device), dtype, source) is expected


def test_gguf_weights_for_a_model_without_a_gguf_is_a_clear_error() -> None:
    with pytest.raises(ModelLoadError, match="needs a model loaded from a GGUF"):
        use_gguf_weights("gguf", torch.device("cpu"), torch.float32, "hf-dir")
    with pytest.raises(ModelLoadError, match="bad weights"):
        use_gguf_weights("int3", torch.device("cpu"), torch.float32, "embedded-cache")


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_q6_k_matrix_runs_on_either_kernel(kernel: str, tmp_path: Path) -> None:
    rows, cols = 32, 256
    raw = random_blocks("Q6_K", rows, cols, seed=9)
    writer = GGUFWriter(str(tmp_path / "q6.gguf"), "qwen2")
    writer.add_tensor("blk.0.ffn_down.weight", raw, raw_shape=raw.shape, raw_dtype=GGMLQuantizationType.Q6_K)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    state = pack_gguf(tmp_path / "q6.gguf")
    assert int(state["model.layers.0.mlp.down_proj.woq.layout"]) == 6  # its own codes, no dense matrix
    parts = {k.rsplit(".", 1)[1]: v for k, v in state.items() if k.startswith("model.layers.0.mlp.down_proj.woq.")}
    layer, kind = gguf_linear(parts, None, built_kernel() if kernel == "native" else None)
    assert kind == kernel
    weight = torch.from_numpy(dequantize(raw, GGMLQuantizationType.Q6_K).reshape(rows, cols)).double()
    read_back = layer(torch.eye(cols)).t().double()  # one-hot rows: int8 activations hold them exactly
    if kernel == "native":  # the GGUF's own values, up to the float32 rounding of the activations' scale 1 / 127
        assert (read_back - weight).abs().max() <= 2**-22 * weight.abs().max()
    else:  # ATen's planes: 8-bit groups fitted to them, products in bfloat16
        assert (read_back - weight).abs().max() <= 2**-6 * weight.abs().max()
