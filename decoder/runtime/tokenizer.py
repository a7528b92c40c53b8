"""runtime: a model directory's tokenizer, as lean as its source allows.

transformers' ``AutoTokenizer`` builds Qwen2's tokenizer class from Python copies of the vocabulary and merges
(151,665 entries each) and keeps them: about 50 MB resident beside the Rust tokenizer that does the work. A
directory this project converted from a GGUF holds a ``tokenizer.json`` written by that same class, so reading
the file straight into the Rust tokenizer (``PreTrainedTokenizerFast``) gives the same token ids, special
tokens and decoding (tests/decoder/test_tokenizer.py) without the copies. Any other directory or Hugging Face
id goes through ``AutoTokenizer``, whose class may add behaviour of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

CONVERTED_SOURCES = frozenset({"embedded-cache", "embedded-converted", "gguf-cache", "gguf-converted"})
"""The load sources (decoder.runtime.model.resolve_spec) whose directory this project's conversion wrote."""


def converted_tokenizer(directory: Path) -> Any:
    """The tokenizer of a directory this project's conversion wrote, from its ``tokenizer.json`` alone."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(str(directory), local_files_only=True)


def load_tokenizer(where: str, source: str) -> Any:
    """The tokenizer in ``where`` (a directory, or a Hugging Face id in the local cache): the converted one where
    ``source`` is one of :data:`CONVERTED_SOURCES` and the file is there, else ``AutoTokenizer``'s."""
    if source in CONVERTED_SOURCES and (Path(where) / "tokenizer.json").is_file():
        return converted_tokenizer(Path(where))
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(where, local_files_only=True)
