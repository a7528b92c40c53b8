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
