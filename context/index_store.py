"""Snapshots of a workspace's token ids on disk, so that a restart re-tokenizes only the files that changed.

One msgpack file per (workspace roots, tokenizer identity) under ``$LOOKAHEAD_LSP_CACHE`` or
``platformdirs.user_cache_dir("lookahead-lsp")``, in ``workspace-index-v<FORMAT_VERSION>/``. Per file it
keeps the path, size, mtime_ns and the token ids (little-endian int32 bytes). Writes are atomic (temporary
file, fsync, rename, fsync of the directory). A corrupt snapshot, or one written for other roots, another
tokenizer or another format version, is discarded with a warning and the caller rebuilds.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import platformdirs

FORMAT_VERSION = 1
TOKEN_DTYPE = np.dtype("<i4")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StoredFile:
    path: str
    size: int
    mtime_ns: int
    tokens: np.ndarray  # int32

    def matches(self, size: int, mtime_ns: int) -> bool:
        return (self.size, self.mtime_ns) == (size, mtime_ns)


@dataclass
class Snapshot:
    roots: list[str]
    tokenizer_key: str
    files: dict[str, StoredFile] = field(default_factory=dict)


def cache_root() -> Path:
    override = os.environ.get("LOOKAHEAD_LSP_CACHE")
    return Path(override) if override else Path(platformdirs.user_cache_dir("lookahead-lsp"))


def normalized_roots(roots: Sequence[str | Path]) -> list[str]:
    return sorted(str(Path(r).resolve()) for r in roots)


def snapshot_path(roots: Sequence[str | Path], tokenizer_key: str, root_dir: Path | None = None) -> Path:
    """Where the snapshot for these roots and this tokenizer lives."""
    ident = json.dumps({"roots": normalized_roots(roots), "tokenizer": tokenizer_key}, sort_keys=True)
    digest = hashlib.sha256(ident.encode()).hexdigest()[:32]
    return (root_dir or cache_root()) / f"workspace-index-v{FORMAT_VERSION}" / f"{digest}.msgpack"


_KEYS: dict[int, tuple[Any, str]] = {}  # id(tokenizer) -> (tokenizer, key): hashing a vocabulary takes a while


def tokenizer_key(tokenizer: Any) -> str:
    """A tokenizer's identity: its name plus a hash of its vocabulary (so a changed vocab never matches)."""
    cached = _KEYS.get(id(tokenizer))
    if cached is not None and cached[0] is tokenizer:
        return cached[1]
    vocab = tokenizer.get_vocab()
    ordered = sorted(vocab, key=vocab.__getitem__)
    digest = hashlib.sha256("\0".join(ordered).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    name = Path(str(getattr(tokenizer, "name_or_path", "") or "tokenizer")).name
    key = f"{name}:{digest}"
    _KEYS[id(tokenizer)] = (tokenizer, key)
    return key


# ---------------------------------------------------------------------------------------------- encoding


def encode_snapshot(snapshot: Snapshot) -> bytes:
    files = [
        [f.path, f.size, f.mtime_ns, np.ascontiguousarray(f.tokens, dtype=TOKEN_DTYPE).tobytes()]
        for f in snapshot.files.values()
    ]
    payload = {
        "format": FORMAT_VERSION,
        "roots": snapshot.roots,
        "tokenizer": snapshot.tokenizer_key,
        "files": files,
    }
    return msgpack.packb(payload, use_bin_type=True)


class SnapshotError(Exception):
    """A snapshot that cannot be used (the message says why)."""


def decode_snapshot(data: bytes, roots: list[str], tokenizer: str) -> Snapshot:
    """The snapshot in ``data``, checked to belong to ``roots`` and ``tokenizer``; raises SnapshotError."""
    try:
        payload = msgpack.unpackb(data, raw=False)
    except Exception as exc:  # msgpack raises several unrelated types on garbage
        raise SnapshotError(f"unreadable: {exc}") from exc
    if not isinstance(payload, dict):
        raise SnapshotError("not a snapshot")
    if payload.get("format") != FORMAT_VERSION:
        raise SnapshotError(f"format {payload.get('format')!r}, expected {FORMAT_VERSION}")
    if payload.get("roots") != roots or payload.get("tokenizer") != tokenizer:
        raise SnapshotError("written for other roots or another tokenizer")
    snapshot = Snapshot(roots, tokenizer)
    try:
        for path, size, mtime_ns, blob in payload["files"]:
            tokens = np.frombuffer(blob, dtype=TOKEN_DTYPE).astype(np.int32)
            snapshot.files[path] = StoredFile(str(path), int(size), int(mtime_ns), tokens)
    except (KeyError, TypeError, ValueError) as exc:
        raise SnapshotError(f"malformed file entry: {exc}") from exc
    return snapshot


# ---------------------------------------------------------------------------------------------- disk


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def save_snapshot(path: Path, snapshot: Snapshot) -> None:
    write_atomic(path, encode_snapshot(snapshot))


def load_snapshot(path: Path, roots: Sequence[str | Path], tokenizer: str) -> Snapshot | None:
    """The stored snapshot, or ``None`` (missing; or corrupt or foreign: then logged and deleted)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("workspace index snapshot %s unreadable (%s); rebuilding", path, exc)
        return None
    try:
        return decode_snapshot(data, normalized_roots(roots), tokenizer)
    except SnapshotError as exc:
        log.warning("workspace index snapshot %s discarded (%s); rebuilding", path, exc)
        path.unlink(missing_ok=True)
        return None
