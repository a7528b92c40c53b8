"""A safetensors file's tensors as views of one map whose resident pages can be given back
(decoder/weights/mapped_state.py), and a packed model built from its cache keeping none of the file resident."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from lookahead_lsp.decoder.kernels.woq_native import built_kernel
from lookahead_lsp.decoder.runtime.packed_model import cached_packed_state, pack_gguf, packed_skeleton, use_packed
from lookahead_lsp.decoder.weights.mapped_state import MappedState, drop_all_pages, map_state
from lookahead_lsp.lsp_server import memory
from tests.decoder.test_packed import write_tiny_gguf
from tests.tiny_model import make_tiny_qwen2

MB = 1024 * 1024
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps (Linux)")


def test_every_tensor_reads_as_safetensors_loads_it(tmp_path: Path) -> None:
    generator = torch.Generator().manual_seed(0)
    tensors = {
        "codes": torch.randint(0, 256, (33, 17), generator=generator, dtype=torch.uint8),
        "half": torch.randn(5, 3, generator=generator).half(),
        "brain": torch.randn(7, generator=generator).bfloat16(),
        "float": torch.randn(2, 3, 4, generator=generator),
        "count": torch.tensor(896),
        "zero": torch.tensor(128.0),
        "none": torch.empty(0, 4),
        "flags": torch.tensor([True, False, True]),
    }
    path = tmp_path / "state.safetensors"
    save_file(tensors, str(path), metadata={"format": "pt"})
    mapped, loaded = map_state(path), load_file(str(path))
    assert mapped.keys() == loaded.keys() == tensors.keys()
    for name, tensor in loaded.items():
        assert mapped[name].dtype == tensor.dtype and mapped[name].shape == tensor.shape
        assert torch.equal(mapped[name], tensor), name


@pytest.mark.parametrize("content", [b"", b"not a safetensors file", b'\x10\0\0\0\0\0\0\0{"a": {"dtype": 1}}'])
def test_a_file_that_is_not_safetensors_is_a_value_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.safetensors"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="not a safetensors file"):
        map_state(path)


@linux
def test_dropped_pages_leave_the_process_and_come_back_when_read(tmp_path: Path) -> None:
    path = tmp_path / "big.safetensors"
    values = torch.arange(4 * MB, dtype=torch.int32)  # 16 MB
    save_file({"values": values}, str(path))
    state = map_state(path)
    assert torch.equal(state["values"], values)  # every page read
    assert memory.mapped_files()[str(path)] >= 16 * MB
    assert state.drop_pages()
    assert memory.mapped_files().get(str(path), 0) < MB
    assert int(state["values"][3 * MB]) == 3 * MB  # read again: the page (or the folio) around it
    assert memory.mapped_files()[str(path)] <= 2 * MB
    assert torch.equal(state["values"], values)
    values_only = state["values"]
    del state  # the tensor keeps the map alive; drop_all_pages still reaches it
    assert drop_all_pages() >= 1
    assert memory.mapped_files().get(str(path), 0) == 0
    assert int(values_only[-1]) == 4 * MB - 1


@linux
def test_dropping_some_tensors_gives_back_their_pages_and_keeps_the_others(tmp_path: Path) -> None:
    path = tmp_path / "two.safetensors"
    first, second = torch.arange(2 * MB, dtype=torch.int32), -torch.arange(2 * MB, dtype=torch.int32)  # 8 MB each
    save_file({"first": first, "second": second}, str(path))
    state = map_state(path)
    assert torch.equal(state["first"], first) and torch.equal(state["second"], second)  # every page read
    assert memory.mapped_files()[str(path)] >= 16 * MB
    assert state.drop_tensors([state["first"]]) >= 8 * MB
    assert 7 * MB <= memory.mapped_files()[str(path)] <= 9 * MB  # the second's pages (one shared page at most)
    assert torch.equal(state["first"], first)  # read again from the page cache
    assert state.drop_tensors([torch.zeros(4)]) == 0  # not of this map: nothing advised


@linux
@pytest.mark.skipif(built_kernel() is None, reason="the native kernel does not build here")
def test_a_model_built_from_the_cache_keeps_none_of_it_resident(tmp_path: Path) -> None:
    gguf = tmp_path / "tiny.gguf"
    write_tiny_gguf(make_tiny_qwen2(vocab_size=512, seed=1, dtype=torch.float32), gguf)
    state = cached_packed_state(tmp_path, "tiny", lambda _scratch: gguf, lambda *_: None)
    assert isinstance(state, MappedState)  # a fresh packing is mapped back from the file it wrote
    source = make_tiny_qwen2(vocab_size=512, seed=1, dtype=torch.float32)
    model, _ = packed_skeleton(source.config, state, "sdpa", kernel=built_kernel())
    cached = next(path for path in tmp_path.rglob("*.safetensors"))
    assert memory.mapped_files().get(str(cached), 0) > 0  # the tiles were made from it
    state.drop_pages()
    del state
    assert memory.mapped_files().get(str(cached), 0) == 0
    reference = make_tiny_qwen2(vocab_size=512, seed=1, dtype=torch.float32)
    use_packed(reference, pack_gguf(gguf), kernel=built_kernel())  # from memory, never mapped
    ids = torch.tensor([[5, 17, 300, 42, 42, 9]])
    with torch.inference_mode():
        got = model.model.embed_tokens(ids)
        assert torch.equal(got, reference.model.embed_tokens(ids))
        for layer, twin in zip(model.model.layers, reference.model.layers, strict=True):
            assert torch.equal(layer.mlp.up_proj.tiles, twin.mlp.up_proj.tiles)
