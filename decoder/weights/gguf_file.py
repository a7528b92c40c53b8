"""weights: a GGUF file's metadata and tensor table read fast, its tensors as views of one map of the file.

gguf's ``GGUFReader`` builds a numpy view for every string of the tokenizer's arrays before it lists a single
tensor: 25 s for Qwen2.5-Coder-1.5B's 300,000 tokens and merges on a 2-core EPYC, each time a file is opened
(and the conversion opened it three times). Here the header is read with ``struct``: a string array is skipped
(its length is kept as the value, as transformers' own fast metadata reader does), a numeric array read in one
``numpy`` call. A tensor (:class:`GgufTensor`) has what ``GGUFReader``'s tensors have and the conversion and the
packing read: its name, type, shape (innermost dimension first) and data (rows of raw blocks as uint8 for a
quantized type, values for F32/F16), the data a view of a read-only map of the file.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_NUMPY = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "?", 10: "<u8", 11: "<i8", 12: "<f8"}
_STRING, _ARRAY = 8, 9
_VALUE_TYPES = {"F32": np.float32, "F16": np.float16}  # stored as values; every other type as blocks (bytes)


@dataclass(frozen=True)
class GgufTensor:
    """One tensor of a GGUF file, as gguf's ``ReaderTensor`` has it (``tensor_type`` a ``GGMLQuantizationType``)."""

    name: str
    tensor_type: Any
    shape: tuple[int, ...]  # innermost dimension first, as the file lists them
    data: np.ndarray
    n_bytes: int


@dataclass(frozen=True)
class GgufFile:
    """A GGUF file's metadata (a string array's value is its length) and tensors."""

    metadata: dict[str, Any]
    tensors: list[GgufTensor]


class _Cursor:
    def __init__(self, mapping: mmap.mmap) -> None:
        self.mapping, self.pos = mapping, 0

    def unpack(self, fmt: str) -> Any:
        (value,) = struct.unpack_from(fmt, self.mapping, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def string(self) -> str:
        length = self.unpack("<Q")
        self.pos += length
        return self.mapping[self.pos - length : self.pos].decode("utf-8", errors="replace")

    def value(self, kind: int) -> Any:
        if kind in _SCALARS:
            return self.unpack(_SCALARS[kind])
        if kind == _STRING:
            return self.string()
        if kind != _ARRAY:
            raise ValueError(f"unknown GGUF metadata type {kind}")
        item, count = self.unpack("<I"), self.unpack("<Q")
        if item == _STRING:
            for _ in range(count):  # skipped: only their number is kept
                length = self.unpack("<Q")
                self.pos += length
            return count
        if item not in _NUMPY:
            return [self.value(item) for _ in range(count)]
        dtype = np.dtype(_NUMPY[item])
        values = np.frombuffer(self.mapping, dtype=dtype, count=count, offset=self.pos)
        self.pos += count * dtype.itemsize
        return values.tolist()


def read_gguf(path: Path) -> GgufFile:
    """The metadata and tensors of the GGUF file at ``path`` (ValueError: not a GGUF file)."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    with open(path, "rb") as handle:
        try:
            mapping = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError as exc:  # an empty file cannot be mapped
            raise ValueError(f"{path} is not a GGUF file: {exc}") from exc
    blob = np.frombuffer(mapping, dtype=np.uint8)  # the tensors' data are views of it (and keep the map alive)
    cursor = _Cursor(mapping)
    try:
        if mapping[:4] != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file")
        cursor.pos = 4
        version, tensor_count, field_count = cursor.unpack("<I"), cursor.unpack("<Q"), cursor.unpack("<Q")
        if version not in (2, 3):
            raise ValueError(f"{path} is GGUF version {version}; versions 2 and 3 are read")
        metadata = {}
        for _ in range(field_count):
            key = cursor.string()
            metadata[key] = cursor.value(cursor.unpack("<I"))
        table = []
        for _ in range(tensor_count):
            name = cursor.string()
            dims = tuple(cursor.unpack("<Q") for _ in range(cursor.unpack("<I")))
            table.append((name, dims, cursor.unpack("<I"), cursor.unpack("<Q")))
    except struct.error as exc:
        raise ValueError(f"{path} is a truncated GGUF file: {exc}") from exc
    alignment = int(metadata.get("general.alignment", 32))
    start = (cursor.pos + alignment - 1) // alignment * alignment
    tensors = []
    for name, dims, kind, offset in table:
        tensor_type = GGMLQuantizationType(kind)
        rows = tuple(int(n) for n in reversed(dims))  # numpy order: outermost first
        value_type = _VALUE_TYPES.get(tensor_type.name)
        if value_type is not None:
            shape, dtype = rows, np.dtype(value_type)
        else:
            block, size = GGML_QUANT_SIZES[tensor_type]
            shape, dtype = (*rows[:-1], rows[-1] // block * size), np.dtype(np.uint8)
        n_bytes = int(np.prod(shape)) * dtype.itemsize
        if start + offset + n_bytes > len(blob):
            raise ValueError(f"{path}: tensor {name} runs past the end of the file")
        data = blob[start + offset : start + offset + n_bytes].view(dtype).reshape(shape)
        tensors.append(GgufTensor(name, tensor_type, tuple(int(n) for n in dims), data, n_bytes))
    return GgufFile(metadata, tensors)
