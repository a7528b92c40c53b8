"""The conversion cache keeps what the GGUF-code path reads: decoder/weights/gguf_file.py, gguf_convert.py's
vectors-only file and fast config, embedded.py's older-layout conversion and pruning, dense.py's lazy matrices."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from gguf import GGUFReader
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from lookahead_lsp.decoder.weights.dense import DENSE_FORMAT, ConvertedCheckpoint, dense_dir
from lookahead_lsp.decoder.weights.embedded import (
    CACHE_FORMAT,
    DENSE_FILE,
    EMBEDDED,
    MARKER_FILE,
    VECTORS_FILE,
    ConversionError,
    assemble,
    converted_dir,
    legacy_dir,
    prepare_embedded,
    prune_legacy,
)
from lookahead_lsp.decoder.weights.gguf_convert import INDEX_KEY, gguf_config, write_weights
from lookahead_lsp.decoder.weights.gguf_file import read_gguf
from tests.decoder.test_embedded import CHUNKS, make_fake_parts
from tests.decoder.test_gguf_convert import NAMES, write_gguf


def test_the_fast_reader_gives_what_gguf_s_reader_gives(tmp_path: Path) -> None:
    write_gguf(tmp_path / "m.gguf")
    mine, theirs = read_gguf(tmp_path / "m.gguf"), GGUFReader(str(tmp_path / "m.gguf"))
    assert [t.name for t in mine.tensors] == [t.name for t in theirs.tensors]
    for ours, reference in zip(mine.tensors, theirs.tensors, strict=True):
        assert ours.tensor_type == reference.tensor_type
        assert list(ours.shape) == [int(n) for n in reference.shape]
        assert ours.data.dtype == reference.data.dtype and ours.data.shape == reference.data.shape
        assert np.array_equal(ours.data, reference.data) and ours.n_bytes == int(reference.n_bytes)
    assert mine.metadata["general.architecture"] == "qwen2"


def test_a_truncated_or_foreign_file_is_a_value_error(tmp_path: Path) -> None:
    write_gguf(tmp_path / "m.gguf")
    whole = (tmp_path / "m.gguf").read_bytes()
    (tmp_path / "cut.gguf").write_bytes(whole[: len(whole) - 100])  # the last tensor's data is short
    with pytest.raises(ValueError, match="runs past the end"):
        read_gguf(tmp_path / "cut.gguf")
    (tmp_path / "header.gguf").write_bytes(whole[:40])
    with pytest.raises(ValueError, match="truncated"):
        read_gguf(tmp_path / "header.gguf")
    (tmp_path / "other.gguf").write_bytes(b"PK\x03\x04" + struct.pack("<Q", 1) * 4)
    with pytest.raises(ValueError, match="not a GGUF"):
        read_gguf(tmp_path / "other.gguf")


def test_the_vectors_file_holds_the_vectors_and_names_every_tensor(tmp_path: Path) -> None:
    tensors = write_gguf(tmp_path / "m.gguf")
    written = write_weights(tmp_path / "m.gguf", tmp_path / VECTORS_FILE, matrices=False)
    state = load_file(str(tmp_path / VECTORS_FILE))
    vectors = {name for gguf_name, name in NAMES.items() if tensors[gguf_name][1].ndim == 1}
    assert set(state) == set(written) == vectors
    for gguf_name, name in NAMES.items():
        if name in vectors:
            assert state[name].dtype == torch.float32
            assert torch.equal(state[name], torch.from_numpy(tensors[gguf_name][1]))
    with safe_open(str(tmp_path / VECTORS_FILE), framework="pt") as handle:
        index = json.loads(handle.metadata()[INDEX_KEY])
    assert index == {name: list(tensors[gguf_name][1].shape) for gguf_name, name in NAMES.items()}


def legacy_layout(root: Path, sha256: str, gguf: Path) -> Path:
    """A complete directory of the older layout: config files and every tensor dequantized (float32)."""
    legacy = legacy_dir(sha256, root)
    legacy.mkdir(parents=True)
    (legacy / "config.json").write_text('{"model_type": "qwen2"}')
    (legacy / "tokenizer.json").write_text("{}")
    write_weights(gguf, legacy / DENSE_FILE)
    (legacy / MARKER_FILE).write_text("{}")
    return legacy


def test_an_older_cache_is_converted_without_the_gguf_then_pruned(tmp_path: Path) -> None:
    tensors = write_gguf(tmp_path / "m.gguf")
    parts = make_fake_parts(tmp_path / "site", CHUNKS)  # not a GGUF: converting from the parts would fail
    root = tmp_path / "cache"
    legacy = legacy_layout(root, parts.sha256, tmp_path / "m.gguf")
    hooked: list[Path] = []
    converted = prepare_embedded(
        parts=parts, root=root, search_path=[str(tmp_path / "empty")], also=lambda g, _s: hooked.append(g)
    )
    assert converted.fresh and converted.path == converted_dir(parts.sha256, root) and hooked == []
    names = {p.name for p in converted.path.iterdir()}
    assert names == {"config.json", "tokenizer.json", VECTORS_FILE, MARKER_FILE}
    gguf_names = {name: gguf_name for gguf_name, name in NAMES.items()}
    never: list[str] = []
    with ConvertedCheckpoint(converted.path, lambda: never.append("asked") or str(legacy)) as checkpoint:
        assert checkpoint.keys() == set(NAMES.values())
        norm = checkpoint.get_tensor("model.norm.weight")  # a vector: the dense directory is not asked for
        assert torch.equal(norm, torch.from_numpy(tensors["output_norm.weight"][1])) and never == []
        matrix = checkpoint.get_tensor("model.layers.0.self_attn.q_proj.weight")
        assert never == ["asked"]
        want = tensors[gguf_names["model.layers.0.self_attn.q_proj.weight"]][1]
        assert torch.equal(matrix, torch.from_numpy(want))
        with pytest.raises(KeyError):
            checkpoint.get_tensor("model.layers.7.mlp.up_proj.weight")
    assert dense_dir(converted.path, lambda _d: tmp_path / "m.gguf", lambda *_: None, root=root) == legacy
    size = sum(p.stat().st_size for p in legacy.iterdir())
    assert prune_legacy(parts.sha256, root) == size
    assert not legacy.exists() and prune_legacy(parts.sha256, root) == 0
    assert sorted(p.name for p in legacy.parent.iterdir()) == []  # no lock file, no temporary directory left


def test_dense_matrices_are_written_on_first_need_from_the_gguf(tmp_path: Path) -> None:
    tensors = write_gguf(tmp_path / "m.gguf")
    root = tmp_path / "cache"
    converted = converted_dir("ab" * 32, root)
    converted.mkdir(parents=True)
    (converted / "config.json").write_text('{"model_type": "qwen2"}')
    write_weights(tmp_path / "m.gguf", converted / VECTORS_FILE, matrices=False)
    (converted / MARKER_FILE).write_text("{}")
    produced: list[Path] = []

    def produce(directory: Path) -> Path:
        produced.append(directory)
        return tmp_path / "m.gguf"

    dense = dense_dir(converted, produce, lambda *_: None, root=root)
    assert dense == root / DENSE_FORMAT / converted.name and len(produced) == 1
    assert {p.name for p in dense.iterdir()} == {"config.json", DENSE_FILE, MARKER_FILE}
    state = load_file(str(dense / DENSE_FILE))
    for gguf_name, name in NAMES.items():
        assert torch.equal(state[name], torch.from_numpy(tensors[gguf_name][1]))
    assert dense_dir(converted, produce, lambda *_: None, root=root) == dense and len(produced) == 1  # cached


def test_a_dense_build_that_fails_leaves_nothing(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    converted = converted_dir("cd" * 32, root)
    converted.mkdir(parents=True)
    (tmp_path / "bad.gguf").write_bytes(b"GGUF" + b"\xff" * 12)
    with pytest.raises(ConversionError):
        dense_dir(converted, lambda _d: tmp_path / "bad.gguf", lambda *_: None, root=root)
    assert sorted(p.name for p in (root / DENSE_FORMAT).iterdir()) == [f"{converted.name}.lock"]


def test_a_broken_older_cache_is_not_converted_from(tmp_path: Path) -> None:
    parts = make_fake_parts(tmp_path / "site", CHUNKS)
    root = tmp_path / "cache"
    legacy = legacy_dir(parts.sha256, root)
    legacy.mkdir(parents=True)
    save_file({"model.norm.weight": torch.ones(4)}, str(legacy / DENSE_FILE))  # no marker: not complete
    with pytest.raises(ConversionError):  # it went to the parts (not a GGUF) instead
        prepare_embedded(parts=parts, root=root, search_path=[str(tmp_path / "site")])
    assert legacy.exists() and not converted_dir(parts.sha256, root).exists()


@pytest.mark.real_model
def test_the_fast_config_and_tokenizer_are_transformers_own(tmp_path: Path) -> None:
    from transformers import AutoConfig, AutoTokenizer

    from lookahead_lsp.decoder.weights.gguf_convert import write_config_and_tokenizer

    gguf = tmp_path / EMBEDDED.gguf_name
    assemble(EMBEDDED, gguf)
    fields = gguf_config(gguf)
    assert fields is not None
    reference = AutoConfig.from_pretrained(str(tmp_path), gguf_file=gguf.name)
    fast, slow = AutoConfig.for_model(**fields).to_dict(), reference.to_dict()
    assert fast.pop("_name_or_path") == "" and slow.pop("_name_or_path") == str(tmp_path)  # where it was read from
    assert fast == slow
    write_config_and_tokenizer(gguf, tmp_path / "fast")
    AutoTokenizer.from_pretrained(str(tmp_path), gguf_file=gguf.name).save_pretrained(str(tmp_path / "slow"))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert (tmp_path / "fast" / name).read_bytes() == (tmp_path / "slow" / name).read_bytes()


@pytest.mark.real_model
def test_the_embedded_cache_holds_no_dense_matrices_and_fits_the_disk_budget() -> None:
    from lookahead_lsp.decoder.kernels.woq_native import native_kernel
    from lookahead_lsp.decoder.runtime.model import load_model
    from lookahead_lsp.decoder.runtime.packed_model import cache_path
    from lookahead_lsp.decoder.weights.cache import cache_root

    loaded = load_model("embedded", device="cpu")
    assert loaded.weights == ("gguf-native" if native_kernel() is not None else "gguf-int4")  # $LOOKAHEAD_LSP_NATIVE
    converted = Path(loaded.path)
    assert converted.parent.name == CACHE_FORMAT and not (converted / DENSE_FILE).exists()
    on_disk = (
        sum(p.stat().st_size for p in converted.iterdir()) + cache_path(cache_root(), EMBEDDED.sha256).stat().st_size
    )
    assert on_disk <= 1.3 * EMBEDDED.size


def test_prepare_takes_several_models_in_one_process(tiny_model_dir: Path) -> None:
    import subprocess
    import sys

    # a transformers directory: nothing is converted (the cache root stays the machine's: its native kernel)
    command = [sys.executable, "-m", "lookahead_lsp.lsp_server", "model", "--json", "--quiet"]
    command += ["--prepare", str(tiny_model_dir), "--prepare", str(tiny_model_dir)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=True)
    described = [json.loads(line) for line in done.stdout.splitlines()]
    spec = str(tiny_model_dir)
    assert [(d["spec"], d["source"], d["path"]) for d in described] == [(spec, "hf-dir", spec)] * 2
    assert all("older_cache_removed_bytes" not in d for d in described)  # not a GGUF: no cache of its own


def test_older_packed_formats_of_a_model_are_removed(tmp_path: Path) -> None:
    from lookahead_lsp.decoder.runtime.packed_model import CACHE_FORMAT as PACKED
    from lookahead_lsp.decoder.runtime.packed_model import cache_path, prune_older_packed

    current = cache_path(tmp_path, "ab" * 32)
    other_torch = tmp_path / PACKED / "torch-0.0.1" / current.name  # the current format for another PyTorch
    older = [
        tmp_path / "packed-v1" / current.parent.name / current.name,
        tmp_path / "packed-v0" / "torch-x" / current.name,
    ]
    other_model = tmp_path / "packed-v1" / current.parent.name / f"{'cd' * 32}.safetensors"
    for i, path in enumerate([current, other_torch, *older, other_model]):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * (10 + i))
    assert prune_older_packed(tmp_path, "ab" * 32) == 12 + 13
    assert current.exists() and other_torch.exists() and other_model.exists()
    assert not any(path.exists() for path in older)
