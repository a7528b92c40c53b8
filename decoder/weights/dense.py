"""weights: a converted GGUF's dense matrices, written only on their first need, and its tensors by name.

A model on the GGUF's own codes (the default on a CPU) reads from its converted directory only the vectors
(:data:`decoder.weights.embedded.VECTORS_FILE`). A GPU, ``weights: "dense"``, ATen's int4 fallback prefilling in
bfloat16 or a matrix of a shape no kernel takes need the matrices dequantized: :func:`dense_dir` writes them
once into ``<cache root>/dense-v1/<sha256>/`` (a plain transformers directory, matrices in the GGUF's
:func:`~decoder.weights.embedded.matrix_dtype_for`), from the GGUF (a user's file, or the embedded model's parts
assembled again), under the same lock and atomic rename as the converted directory. A complete directory of the
older layout (``converted-v1``) is such a directory already and is used as it is.
:class:`ConvertedCheckpoint` reads a converted directory's tensors by name, opening the dense one only when a
tensor that is not a vector is asked for.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from lookahead_lsp.decoder.weights.cache import cache_root
from lookahead_lsp.decoder.weights.embedded import (
    DENSE_FILE,
    VECTORS_FILE,
    ProgressFn,
    build_dir_cached,
    copy_metadata_files,
    is_complete,
    legacy_dir,
    matrix_dtype_for,
    write_tensors,
)
from lookahead_lsp.decoder.weights.gguf_convert import INDEX_KEY

DENSE_FORMAT = "dense-v1"  # bump when the layout or contents of a dense directory change


def dense_dir(
    converted: Path,
    produce_gguf: Callable[[Path], Path],
    progress: ProgressFn,
    *,
    root: Path | None = None,
) -> Path:
    """The dense transformers directory of the converted directory ``converted`` (named by its GGUF's sha256):
    the older layout's where it is complete, else ``dense-v1/<sha256>``, written now from ``produce_gguf`` when
    it is not there (:class:`~decoder.weights.embedded.ConversionError` when it cannot be)."""
    sha256 = converted.name
    legacy = legacy_dir(sha256, root)
    if is_complete(legacy):
        return legacy
    target = (root or cache_root()) / DENSE_FORMAT / sha256

    def build(scratch: Path, out_dir: Path) -> None:
        progress("writing the model's dense matrices (once: a GPU, dense weights or bfloat16 prefill need them)", None)
        copy_metadata_files(converted, out_dir)
        write_tensors(produce_gguf(scratch), out_dir, progress, matrix_dtype_for(sha256))

    build_dir_cached(target, build, f"dense matrices of {converted}", progress)
    return target


class ConvertedCheckpoint:
    """The tensors of a converted directory by name (an open safetensors file's ``keys`` and ``get_tensor``):
    vectors from its own file, anything else from the dense checkpoint ``dense()`` returns a directory of,
    which is asked for only then. Close it (or use it as a context manager) to release the files."""

    def __init__(self, converted: Path, dense: Callable[[], str | Path]) -> None:
        from safetensors import safe_open

        self._vectors = safe_open(str(converted / VECTORS_FILE), framework="pt")
        index = json.loads((self._vectors.metadata() or {}).get(INDEX_KEY, "{}"))
        self._names = set(index) | set(self._vectors.keys())
        self._dense_source = dense
        self._dense: Any = None

    def keys(self) -> set[str]:
        return set(self._names)

    def get_tensor(self, name: str) -> torch.Tensor:
        if name in self._vectors.keys():  # noqa: SIM118 (a safetensors handle, not a dict)
            return self._vectors.get_tensor(name)
        if name not in self._names:
            raise KeyError(name)
        if self._dense is None:
            from safetensors import safe_open

            self._dense = safe_open(str(Path(self._dense_source()) / DENSE_FILE), framework="pt")
        return self._dense.get_tensor(name)

    def close(self) -> None:
        self._vectors = self._dense = None  # type: ignore[assignment]  # safetensors closes a file with its handle

    def __enter__(self) -> ConvertedCheckpoint:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
