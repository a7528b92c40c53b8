"""Shared fixtures: the tiny random Qwen2 stand-in, the embedded model's converted directory and tokenizer."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def embedded_hf_dir() -> Path:
    """The embedded default model converted to a transformers directory (config, safetensors, tokenizer)."""
    from lookahead_lsp.decoder.weights.embedded import ensure_converted

    return ensure_converted()


@pytest.fixture(scope="session")
def tokenizer(embedded_hf_dir: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(embedded_hf_dir))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory, embedded_hf_dir: Path) -> Path:
    """A loadable directory holding the tiny model (its continuation forced: tests/tiny_model.py), real tokenizer."""
    from tests.tiny_model import save_tiny_model_dir

    return save_tiny_model_dir(tmp_path_factory.mktemp("tiny-model"), embedded_hf_dir)


@pytest.fixture()
def keep_logging() -> Iterator[None]:
    """A test that calls the command line's ``main()`` (which points the root logger at the captured stderr):
    the root logger's handlers and level put back afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture(scope="session")
def tiny_base_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real, loadable GGUF of the tiny random Qwen2, every matrix Q8_0 as ggml-org's base files, with the
    embedded model's tokenizer (tests/gguf_model.py), named as the 0.5B base model's file."""
    from lookahead_lsp.decoder.weights.base_models import find_base
    from lookahead_lsp.decoder.weights.embedded import EMBEDDED, assemble
    from tests.gguf_model import write_tiny_base_gguf

    folder = tmp_path_factory.mktemp("base-gguf")
    source = folder / EMBEDDED.gguf_name
    assemble(EMBEDDED, source)
    base = find_base("qwen2.5-coder-0.5b-base")
    assert base is not None
    path = folder / base.filename
    write_tiny_base_gguf(path, source)
    source.unlink()
    return path


@pytest.fixture(scope="module")
def kernel_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache root of its own (conversions, downloads, figures and cost tables written there) that links the
    user cache's native kernel builds, so that none is built again."""
    from lookahead_lsp.decoder.weights.cache import cache_root

    root = tmp_path_factory.mktemp("cache")
    built = cache_root() / "native-v2"
    (root / "native-v2").mkdir()
    for library in built.glob("woq-*") if built.is_dir() else []:
        if library.suffix in (".so", ".dylib"):
            (root / "native-v2" / library.name).symlink_to(library)
    return root
