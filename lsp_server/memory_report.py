"""Where the daemon's resident megabytes go: the breakdown that ``lookahead.memory`` answers (``bench memory``).

:func:`breakdown` splits the resident set (VmRSS) into parts measured inside the process, each in MB:

- ``runtime``: resident at the model load's start, before torch is imported (Python, pygls, this package);
- ``imports``: what importing torch and transformers added (:func:`lsp_server.memory.mark`);
- ``codes``, ``head``, ``embedding``, ``float``, ``small``: the model's tensors (decoder/runtime/footprint.py);
- ``kvCache``: every live KV cache's buffers (their capacity);
- ``index``: the workspace n-gram index (the draft sources' own ``nbytes``: context/ngram_index.py);
- ``mappedFiles``: resident pages of mapped data files (not shared libraries): model caches read through mmap;
- ``other``: the rest (the tokenizer, Python objects made since, libraries' pages touched since, kernel caches,
  and the allocator's slack).

``allocatorFreeMb`` (beside the parts, not one of them) is glibc's freed but held heap: an upper bound of the
slack in ``other``, since pages ``malloc_trim`` gave back stay counted as free but are no longer resident.

Tensors that are views of a mapped file (the embedding read from the packed cache) are in ``mappedFiles`` by
their resident pages only; ``mappedTensorsMb`` says how large they are. ``peak`` is VmHWM. The parts are
estimates of what is resident; ``rss`` is the fact.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from lookahead_lsp.lsp_server import memory


def breakdown(model: Any | None, draft_sources: Iterable[object]) -> dict[str, Any]:
    """The resident set and its parts in MB (see the module docstring); ``model``: the loaded torch model or None."""
    mb = memory.MB
    process = memory.resident()
    rss = process.get("rss", 0)
    parts: dict[str, int] = {}
    mapped_tensors = 0
    start, imports = memory.MARKS.get("start"), memory.MARKS.get("imports")
    if start is not None and imports is not None:
        parts["runtime"], parts["imports"] = start, imports - start
    if model is not None:
        from lookahead_lsp.decoder.kv import kv_cache_bytes
        from lookahead_lsp.decoder.runtime.footprint import tensor_footprint

        tensors = tensor_footprint(model)
        mapped_tensors = tensors.pop("mapped")
        parts |= tensors
        parts["kvCache"] = kv_cache_bytes()
    parts["index"] = sum(int(getattr(source, "nbytes", 0)) for source in draft_sources)
    files = memory.mapped_files()
    parts["mappedFiles"] = sum(size for name, size in files.items() if name != "libraries")
    parts["other"] = rss - sum(parts.values())
    return {
        "rssMb": round(rss / mb, 1),
        "peakMb": round(process.get("peak", 0) / mb, 1),
        "anonymousMb": round(process.get("anonymous", 0) / mb, 1),
        "fileMb": round(process.get("file", 0) / mb, 1),
        "librariesMb": round(files.get("libraries", 0) / mb, 1),
        "partsMb": {name: round(size / mb, 1) for name, size in parts.items()},
        "mappedFiles": {name: round(size / mb, 1) for name, size in files.items() if name != "libraries"},
        "mappedTensorsMb": round(mapped_tensors / mb, 1),
        "allocatorFreeMb": round(memory.allocator().get("free", 0) / mb, 1),
    }
