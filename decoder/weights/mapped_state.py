"""weights: a safetensors file's tensors as views of one memory map whose resident pages can be given back.

Building a model from a cached state reads every tensor once (the native kernel's tiles are made from the codes)
and then keeps only a few of them as they are (the input embedding's codes and scales). Read through a map,
every page read stays resident in the process for as long as any tensor of the file lives: the embedded 0.5B
model kept 387 MB of its packed cache resident that way, beside the tiles copied from it.
:func:`map_state` maps the file (private, copy-on-write: nothing is ever written back) and
:meth:`MappedState.drop_pages` tells the kernel that the pages read so far are not needed now (``madvise``
``MADV_DONTNEED``): the tensors stay valid, and a page is read again from the page cache when touched (an
embedding lookup reads the pages of its tokens' rows: on this machine's kernel the 2 MB folio around each).
:func:`drop_all_pages` does the same for every map still alive (the daemon calls it when it gives memory back,
``lsp_server/memory.py``): a page read again costs a fault on the page cache, microseconds. Nothing may write
into a mapped tensor (a written page would be private, and dropping it would bring the file's value back).
Where the hints do not exist the pages simply stay.
"""

from __future__ import annotations

import ctypes
import json
import mmap
import struct
import weakref
from collections.abc import Iterable
from pathlib import Path

import torch

DTYPES: dict[str, torch.dtype] = {
    "BOOL": torch.bool,
    "U8": torch.uint8,
    "I8": torch.int8,
    "I16": torch.int16,
    "I32": torch.int32,
    "I64": torch.int64,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "F32": torch.float32,
    "F64": torch.float64,
}


class MappedState(dict[str, torch.Tensor]):
    """Tensors by name, each a view of :attr:`mapping` (which lives as long as any of them)."""

    def __init__(self, tensors: dict[str, torch.Tensor], mapping: mmap.mmap) -> None:
        super().__init__(tensors)
        self.mapping = mapping

    def drop_pages(self) -> bool:
        """Give back the resident pages of the map (the tensors stay valid); whether the hint exists here."""
        return _drop(self.mapping)

    def drop_tensors(self, tensors: Iterable[torch.Tensor]) -> int:
        """Give back the resident pages under ``tensors`` (those of this map; the pages they share with a
        neighbour too: it reads them again if it needs them), leaving the rest of the map as it is: a model
        built weight by weight then holds one weight's pages at a time beside what it made of them. Returns
        the bytes advised (0 where the hint does not exist here)."""
        drop, span = _dont_need(self.mapping), _MAPPINGS.get(self.mapping)
        if drop is None or span is None:
            return 0
        advised = 0
        for tensor in tensors:
            begin = tensor.data_ptr() - span[0]
            end = begin + tensor.untyped_storage().nbytes()
            if tensor.numel() == 0 or begin < 0 or end > span[1] - span[0]:
                continue
            first = begin // mmap.PAGESIZE * mmap.PAGESIZE
            self.mapping.madvise(drop, first, end - first)
            advised += end - first
        return advised


_MAPPINGS: weakref.WeakKeyDictionary[mmap.mmap, tuple[int, int]] = weakref.WeakKeyDictionary()
"""Every map still alive and its address range."""


def _dont_need(mapping: mmap.mmap) -> int | None:
    """``MADV_DONTNEED`` where ``mapping`` can take that hint here (an open map, a system that has it), else None."""
    drop = getattr(mmap, "MADV_DONTNEED", None)
    return None if drop is None or not hasattr(mapping, "madvise") or mapping.closed else int(drop)


def _drop(mapping: mmap.mmap) -> bool:
    drop, random = _dont_need(mapping), getattr(mmap, "MADV_RANDOM", None)
    if drop is None:
        return False
    mapping.madvise(drop)
    if random is not None:
        mapping.madvise(random)  # no read-ahead beyond what the kernel maps for a fault anyway
    return True


def drop_all_pages() -> int:
    """Give back the resident pages of every map still alive; how many maps."""
    return sum(_drop(mapping) for mapping in list(_MAPPINGS.keys()))


def in_a_map(address: int) -> bool:
    """Whether ``address`` lies in a map of :func:`map_state` still alive (a tensor's data is the file's)."""
    return any(start <= address < end for start, end in list(_MAPPINGS.values()))


def map_state(path: Path) -> MappedState:
    """The tensors of the safetensors file at ``path``, mapped (ValueError: not a safetensors file, or a dtype
    this module does not know; OSError: unreadable)."""
    with open(path, "rb") as source:
        try:
            mapping = mmap.mmap(source.fileno(), 0, access=mmap.ACCESS_COPY)
        except ValueError as exc:  # an empty file cannot be mapped
            raise ValueError(f"{path} is not a safetensors file: {exc}") from exc
    try:
        (length,) = struct.unpack("<Q", mapping[:8])
        header = json.loads(mapping[8 : 8 + length])
        base = 8 + length
        tensors = {}
        for name, entry in header.items():
            if name == "__metadata__":
                continue
            dtype = DTYPES[entry["dtype"]]
            begin, end = entry["data_offsets"]
            shape = tuple(int(n) for n in entry["shape"])
            count = (end - begin) // dtype.itemsize
            if count != int(torch.Size(shape).numel()) or base + end > len(mapping):
                raise ValueError(f"{path}: {name} does not fit its offsets")
            flat = torch.frombuffer(mapping, dtype=dtype, count=count, offset=base + begin) if count else None
            tensors[name] = flat.view(shape) if flat is not None else torch.empty(shape, dtype=dtype)
    except (struct.error, json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path} is not a safetensors file: {exc}") from exc
    start = ctypes.addressof(ctypes.c_char.from_buffer(mapping))
    _MAPPINGS[mapping] = (start, start + len(mapping))
    return MappedState(tensors, mapping)
