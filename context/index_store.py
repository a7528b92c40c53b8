"""Snapshots of a workspace's token ids on disk, so that a restart re-tokenizes only the files that changed.

One msgpack file per (workspace roots, tokenizer identity) under ``$LOOKAHEAD_LSP_CACHE`` or
``platformdirs.user_cache_dir("lookahead-lsp")``, in ``workspace-index-v<FORMAT_VERSION>/``. Per file it
keeps the path, size, mtime_ns and the token ids (little-endian int32 bytes). Writes are atomic (temporary
file, fsync, rename, fsync of the directory). A corrupt snapshot, or one written for other roots, another
tokenizer or another format version, is discarded with a warning and the caller rebuilds. Every
entry is checked on load (types, non-negative sizes, token ids inside the tokenizer's vocabulary:
:func:`vocab_limit`), so a damaged snapshot is discarded instead of failing the index or feeding the
decoder ids the model has no token for. File names that are not UTF-8 are stored as their bytes (lossless).
Temporary files of writers that were killed are removed (:func:`remove_stale_temporaries`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import stat
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
import numpy as np

from lookahead_lsp.decoder.weights.cache import cache_root

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
    outside: list[str] = field(default_factory=list)  # entries dropped on load: paths outside every root


def inside_roots(path: str, roots: Sequence[str]) -> bool:
    """Whether ``path`` (absolute, normalized: no ``..``) lies under one of ``roots``."""
    if not os.path.isabs(path) or os.path.normpath(path) != path:
        return False
    return any(path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def normalized_roots(roots: Sequence[str | Path]) -> list[str]:
    return sorted(str(Path(r).resolve()) for r in roots)


def snapshot_path(roots: Sequence[str | Path], tokenizer_key: str, root_dir: Path | None = None) -> Path:
    """Where the snapshot for these roots and this tokenizer lives."""
    ident = json.dumps({"roots": normalized_roots(roots), "tokenizer": tokenizer_key}, sort_keys=True)
    digest = hashlib.sha256(ident.encode()).hexdigest()[:32]
    return (root_dir or cache_root()) / f"workspace-index-v{FORMAT_VERSION}" / f"{digest}.msgpack"


_FACTS: dict[int, tuple[Any, str, int]] = {}  # id(tokenizer) -> (tokenizer, key, limit): get_vocab takes a while
_PLACEHOLDER = re.compile(r"\[PAD\d+\]|<\|?(?:pad|PAD|unused)_?\d+\|?>")  # rows padding an embedding, no text


def _vocab_facts(tokenizer: Any) -> tuple[str, int]:
    cached = _FACTS.get(id(tokenizer))
    if cached is not None and cached[0] is tokenizer:
        return cached[1], cached[2]
    vocab = tokenizer.get_vocab()
    ordered = sorted(vocab, key=vocab.__getitem__)
    digest = hashlib.sha256("\0".join(ordered).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    name = Path(str(getattr(tokenizer, "name_or_path", "") or "tokenizer")).name
    real = [i for token, i in vocab.items() if not _PLACEHOLDER.fullmatch(token)]
    facts = (f"{name}:{digest}", max(real) + 1 if real else len(vocab))
    _FACTS[id(tokenizer)] = (tokenizer, *facts)
    return facts


def tokenizer_key(tokenizer: Any) -> str:
    """A tokenizer's identity: its name plus a hash of its vocabulary (so a changed vocab never matches)."""
    return _vocab_facts(tokenizer)[0]


def vocab_limit(tokenizer: Any) -> int:
    """One past the highest token id ``tokenizer`` has a token for: its vocabulary without the placeholders
    that pad a model's embedding rows past the real tokens (the embedded model's ``[PAD151665]`` onwards, so
    151665 is its limit). Ids from tokenizing text are always below it."""
    return _vocab_facts(tokenizer)[1]


# ---------------------------------------------------------------------------------------------- encoding


def _path_out(path: str) -> str | bytes:
    """A path for msgpack: a str when it is valid UTF-8, else its file-system bytes (lossless)."""
    try:
        path.encode("utf-8")
        return path
    except UnicodeEncodeError:  # a name that is not UTF-8 (surrogate escapes)
        return os.fsencode(path)


def _path_in(value: Any) -> str:
    if isinstance(value, bytes):
        return os.fsdecode(value)
    if isinstance(value, str):
        return value
    raise TypeError(f"a path must be a string, got {type(value).__name__}")


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TypeError(f"a size or mtime must be a non-negative integer, got {value!r}")
    return value


def _token_ids(blob: Any, limit: int | None) -> np.ndarray:
    if not isinstance(blob, bytes):
        raise TypeError(f"token ids must be bytes, got {type(blob).__name__}")
    tokens = np.frombuffer(blob, dtype=TOKEN_DTYPE).astype(np.int32)
    if tokens.size and int(tokens.min()) < 0:
        raise ValueError("negative token ids")
    if tokens.size and limit is not None and int(tokens.max()) >= limit:
        raise ValueError(f"token id {int(tokens.max())} outside the vocabulary (ids below {limit})")
    return tokens


def encode_snapshot(snapshot: Snapshot) -> bytes:
    files = [
        [_path_out(f.path), f.size, f.mtime_ns, np.ascontiguousarray(f.tokens, dtype=TOKEN_DTYPE).tobytes()]
        for f in snapshot.files.values()
    ]
    payload = {
        "format": FORMAT_VERSION,
        "roots": [_path_out(root) for root in snapshot.roots],
        "tokenizer": snapshot.tokenizer_key,
        "files": files,
    }
    return msgpack.packb(payload, use_bin_type=True)


class SnapshotError(Exception):
    """A snapshot that cannot be used (the message says why)."""


def decode_snapshot(data: bytes, roots: list[str], tokenizer: str, limit: int | None = None) -> Snapshot:
    """The snapshot in ``data``, checked to belong to ``roots`` and ``tokenizer`` (and, given the vocabulary's
    ``limit``, to hold only token ids below it); raises SnapshotError. Entries outside the roots are left out
    (listed in ``outside``)."""
    try:
        payload = msgpack.unpackb(data, raw=False)
    except Exception as exc:  # msgpack raises several unrelated types on garbage
        raise SnapshotError(f"unreadable: {exc}") from exc
    if not isinstance(payload, dict):
        raise SnapshotError("not a snapshot")
    if payload.get("format") != FORMAT_VERSION:
        raise SnapshotError(f"format {payload.get('format')!r}, expected {FORMAT_VERSION}")
    stored_roots = payload.get("roots")
    if not isinstance(stored_roots, list) or not all(isinstance(r, (str, bytes)) for r in stored_roots):
        raise SnapshotError("malformed roots")
    if [_path_in(r) for r in stored_roots] != roots or payload.get("tokenizer") != tokenizer:
        raise SnapshotError("written for other roots or another tokenizer")
    snapshot = Snapshot(roots, tokenizer)
    try:
        for path, size, mtime_ns, blob in payload["files"]:
            name = _path_in(path)
            stored = StoredFile(name, _count(size), _count(mtime_ns), _token_ids(blob, limit))
            if inside_roots(name, roots):
                snapshot.files[name] = stored
            else:
                snapshot.outside.append(name)
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


TMP_SUFFIX = ".tmp"


def _tmp_prefix(path: Path, pid: int) -> str:
    return f".{path.name}.{pid}."


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one, never a part.

    The temporary file's name holds the writer's process id (see :func:`remove_stale_temporaries`).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=_tmp_prefix(path, os.getpid()), suffix=TMP_SUFFIX, dir=path.parent)
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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # someone else's process
        return True
    return True


def _boot_time() -> float | None:
    try:
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def writer_alive(pid: int, written: float) -> bool:
    """Whether the process ``pid`` that named a temporary file last written at ``written`` (epoch seconds) can
    still be writing it: it exists, is no zombie (killed, not yet reaped), and started before ``written`` (a
    later process given the same pid, as after a container's restart, is not the writer). Where there is no
    /proc, only the first."""
    boot = _boot_time()
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return False if boot is not None else _alive(pid)
    except (OSError, IndexError):
        return _alive(pid)
    if fields[0] in ("Z", "X"):
        return False
    if boot is None:
        return True
    started = boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    return started <= written + 1.0  # btime is whole seconds


def remove_stale_temporaries(directory: Path, max_age_s: float = 3600.0) -> int:
    """Delete temporary files that a killed writer left in ``directory``; how many were deleted.

    A temporary file is stale when the process named in it cannot be writing it (:func:`writer_alive`: gone,
    a zombie, or a newer process with the same pid), or, for a name without a process id, when it is older
    than ``max_age_s``; a live writer's file is left alone.
    """
    removed = 0
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return 0
    for entry in entries:
        if not (entry.name.startswith(".") and entry.name.endswith(TMP_SUFFIX)):
            continue
        parts = entry.name.split(".")
        pid = int(parts[-3]) if len(parts) >= 4 and parts[-3].isdigit() else None
        try:
            written = entry.stat(follow_symlinks=False).st_mtime
            stale = not writer_alive(pid, written) if pid is not None else time.time() - written > max_age_s
            if stale and entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)
                removed += 1
        except OSError:
            continue
    if removed:
        log.info("removed %d stale temporary file(s) from %s", removed, directory)
    return removed


def save_snapshot(path: Path, snapshot: Snapshot) -> None:
    write_atomic(path, encode_snapshot(snapshot))


def load_snapshot(path: Path, roots: Sequence[str | Path], tokenizer: str, limit: int | None = None) -> Snapshot | None:
    """The stored snapshot, or ``None`` (missing; or corrupt, foreign or holding a token id at or above the
    vocabulary's ``limit``: then logged once and deleted). Entries outside the workspace are dropped with one
    warning (the caller saves the snapshot again without them)."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):  # a directory, a FIFO: never read (a FIFO would block)
            raise IsADirectoryError(f"{path} is not a regular file")
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("workspace index snapshot %s unreadable (%s); rebuilding", path, exc)
        return None
    try:
        snapshot = decode_snapshot(data, normalized_roots(roots), tokenizer, limit)
    except SnapshotError as exc:
        log.warning("workspace index snapshot %s discarded (%s); rebuilding", path, exc)
        path.unlink(missing_ok=True)
        return None
    if snapshot.outside:
        count = len(snapshot.outside)
        log.warning(
            "workspace index snapshot %s: %d entr%s outside the workspace dropped (%r%s)",
            path,
            count,
            "y" if count == 1 else "ies",
            snapshot.outside[0],
            ", ..." if count > 1 else "",
        )
    return snapshot
