"""The workspace's n-gram index kept current: scan + tokenize + :class:`NgramIndex` + snapshot + watcher.

``build()`` scans the roots, reuses the snapshot's token ids for files whose size and mtime are unchanged,
tokenizes the rest in batches, indexes everything (oldest file first, so recency follows modification time)
and saves the snapshot. Afterwards the watcher (``start_watching()``) and the editor
(``update_document``/``close_document``; an open document's text overrides the disk) keep it current (the
watcher's paths that settle together as one update). Listeners (``add_listener``) hear about every effective
change, e.g. snippet retrieval.

A reconcile (after a burst of events, a directory move, the build) reads, tokenizes and indexes the files that
changed in chunks of ``RECONCILE_CHUNK`` (one tokenizer call and one index update per chunk), so thousands of
changed files are caught up with in seconds; :meth:`WorkspaceIndex.stop` cuts a running reconcile short at
the next chunk and gives the last one ``STOP_RECONCILE_S``: a file it does not reach keeps its old size and
mtime in the snapshot, so the next start reads it again (a snapshot is only ever used where both still match).

Threads: the watcher thread and the LSP worker may call in concurrently; the bookkeeping here is guarded by one
lock and the index itself publishes immutable states (lookups never wait).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lookahead_lsp.context.index_store import (
    Snapshot,
    StoredFile,
    load_snapshot,
    remove_stale_temporaries,
    save_snapshot,
    snapshot_path,
    tokenizer_key,
    vocab_limit,
)
from lookahead_lsp.context.ngram_index import NgramIndex
from lookahead_lsp.context.watcher import WorkspaceWatcher
from lookahead_lsp.context.workspace import DEFAULT_CONFIG, PathFilter, ScannedFile, WorkspaceConfig, read_source, scan

TokenizeFn = Callable[[str], list[int]]
TokenizeBatchFn = Callable[[list[str]], list[list[int]]]
ProgressFn = Callable[[str, "float | None"], None]
ListenerFn = Callable[[str, "str | None"], None]
log = logging.getLogger(__name__)

BATCH_CHARS = 1 << 20  # texts per tokenizer call: about a megabyte
RECONCILE_CHUNK = 256  # changed files read, tokenized and indexed together by a reconcile
STOP_RECONCILE_S = 2.0  # the reconcile before the last snapshot stops after this long


@dataclass
class IndexStats:
    files: int = 0
    tokens: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    reused_files: int = 0  # token ids taken from the snapshot
    tokenized_files: int = 0
    build_seconds: float = 0.0  # the whole build(), tokenization and scanning included
    tokenize_seconds: float = 0.0
    index_seconds: float = 0.0  # NgramIndex.build alone
    index_bytes: int = 0
    snapshot_path: str | None = None

    @property
    def bytes_per_token(self) -> float:
        return self.index_bytes / self.tokens if self.tokens else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "tokens": self.tokens,
            "bytes_per_token": round(self.bytes_per_token, 2),
            "index_bytes": self.index_bytes,
            "reused_files": self.reused_files,
            "tokenized_files": self.tokenized_files,
            "build_seconds": round(self.build_seconds, 3),
            "tokenize_seconds": round(self.tokenize_seconds, 3),
            "index_seconds": round(self.index_seconds, 3),
            "skipped": dict(sorted(self.skipped.items())),
            "snapshot_path": self.snapshot_path,
        }


def batch_tokenizer(tokenizer: Any) -> TokenizeBatchFn:
    """A fast tokenizer called on a list of texts at once, no special tokens added."""

    def tokenize_batch(texts: list[str]) -> list[list[int]]:
        return list(tokenizer(texts, add_special_tokens=False)["input_ids"]) if texts else []

    return tokenize_batch


def _batches(texts: Sequence[str], max_chars: int) -> Iterable[tuple[int, int]]:
    start, size = 0, 0
    for i, text in enumerate(texts):
        if size and size + len(text) > max_chars:
            yield start, i
            start, size = i, 0
        size += len(text)
    if start < len(texts):
        yield start, len(texts)


class WorkspaceIndex:
    """The n-gram index over ``roots``, kept current. ``store_key`` names the tokenizer (None: no snapshot)."""

    def __init__(
        self,
        roots: Sequence[str | Path],
        tokenize: TokenizeFn,
        config: WorkspaceConfig = DEFAULT_CONFIG,
        store_key: str | None = None,
        tokenize_batch: TokenizeBatchFn | None = None,
        index: NgramIndex | None = None,
        debounce_s: float = 0.2,
        vocab_limit: int | None = None,
        on_watch_limit: Callable[[str], None] | None = None,
    ) -> None:
        self.roots = [Path(r).resolve() for r in roots]
        self.config = config
        self.index = index or NgramIndex()
        self.stats = IndexStats()
        self.snapshot_file = snapshot_path(self.roots, store_key) if store_key else None
        self._store_key = store_key
        self._vocab_limit = vocab_limit  # a snapshot holding a token id at or above it is discarded
        self._tokenize = tokenize
        self._tokenize_batch = tokenize_batch or (lambda texts: [tokenize(t) for t in texts])
        self._filters = [PathFilter(r, config) for r in self.roots]
        self._lock = threading.RLock()
        self._disk: dict[str, StoredFile] = {}  # what is on disk (and in the snapshot)
        self._open: dict[str, str] = {}  # editor overrides
        self._listeners: list[ListenerFn] = []
        self._halt = threading.Event()  # set by stop(): a reconcile on the watcher's thread ends at its next chunk
        self._watcher = WorkspaceWatcher(
            self.roots,
            self._on_disk_change,
            config,
            debounce_s,
            self._resync,
            on_changes=self._on_disk_changes,
            on_limit=on_watch_limit,
        )

    @classmethod
    def for_tokenizer(
        cls, roots: Sequence[str | Path], tokenizer: Any, config: WorkspaceConfig = DEFAULT_CONFIG, **kwargs: Any
    ) -> WorkspaceIndex:
        """Wire a Hugging Face fast tokenizer: single and batch tokenization, the snapshot key and id limit."""
        batch = batch_tokenizer(tokenizer)
        kwargs.setdefault("vocab_limit", vocab_limit(tokenizer))
        return cls(roots, lambda text: batch([text])[0], config, tokenizer_key(tokenizer), batch, **kwargs)

    # --- build ---------------------------------------------------------------------------------------

    def build(self, progress: ProgressFn | None = None) -> IndexStats:
        """Scan, tokenize what changed since the snapshot, index, save. Returns the stats."""
        report = progress or (lambda message, fraction: None)
        started = time.perf_counter()
        stats = IndexStats(snapshot_path=str(self.snapshot_file) if self.snapshot_file else None)
        report("scanning", 0.0)
        scanned: list[ScannedFile] = []
        for root in self.roots:
            result = scan(root, self.config)
            scanned += result.files
            stats.skipped.update(result.skipped)
        if self.snapshot_file is not None:
            remove_stale_temporaries(self.snapshot_file.parent)
        snapshot = self._load_snapshot()
        disk = self._collect(scanned, snapshot, stats, report)
        report("indexing", 0.95)
        with self._lock:
            self._disk = disk
            t0 = time.perf_counter()
            self.index.build(self._effective_files())
            stats.index_seconds = time.perf_counter() - t0
        stats.files, stats.tokens, stats.index_bytes = self.index.num_files, self.index.num_tokens, self.index.nbytes
        if stats.tokenized_files or snapshot is None or snapshot.outside or len(snapshot.files) != len(disk):
            self.save()
        stats.build_seconds = time.perf_counter() - started
        self.stats = stats
        report("done", 1.0)
        return stats

    def _load_snapshot(self) -> Snapshot | None:
        if self.snapshot_file is None or self._store_key is None:
            return None
        return load_snapshot(self.snapshot_file, self.roots, self._store_key, self._vocab_limit)

    def _collect(
        self, scanned: list[ScannedFile], snapshot: Snapshot | None, stats: IndexStats, report: ProgressFn
    ) -> dict[str, StoredFile]:
        """Token ids for every scanned file: from the snapshot when unchanged, else read and tokenized."""
        disk: dict[str, StoredFile] = {}
        fresh: list[ScannedFile] = []
        texts: list[str] = []
        for i, file in enumerate(sorted(scanned, key=lambda f: (f.mtime_ns, str(f.path)))):
            stored = snapshot.files.get(str(file.path)) if snapshot else None
            if stored is not None and stored.matches(file.size, file.mtime_ns):
                disk[str(file.path)] = stored
                stats.reused_files += 1
                continue
            text, reason = read_source(file.path, self.config.max_file_bytes)
            if text is None:
                stats.skipped[str(reason)] += 1
                continue
            fresh.append(file)
            texts.append(text)
            if i % 256 == 0:
                report(f"reading {i}/{len(scanned)} files", 0.1 * i / max(1, len(scanned)))
        for file, tokens in zip(fresh, self._tokenize_all(texts, stats, report), strict=True):
            disk[str(file.path)] = StoredFile(str(file.path), file.size, file.mtime_ns, tokens)
        stats.tokenized_files = len(fresh)
        return dict(sorted(disk.items(), key=lambda item: (item[1].mtime_ns, item[0])))

    def _tokenize_all(self, texts: list[str], stats: IndexStats, report: ProgressFn) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        total = sum(len(t) for t in texts) or 1
        done = 0
        t0 = time.perf_counter()
        for start, stop in _batches(texts, BATCH_CHARS):
            out += [np.asarray(ids, dtype=np.int32) for ids in self._tokenize_batch(texts[start:stop])]
            done += sum(len(t) for t in texts[start:stop])
            report(f"tokenizing {stop}/{len(texts)} files", 0.1 + 0.85 * done / total)
        stats.tokenize_seconds = time.perf_counter() - t0
        return out

    def _effective_files(self) -> list[tuple[str, np.ndarray]]:
        """Every file's token ids, an open document's taking the place of the disk's."""
        files = [(path, stored.tokens) for path, stored in self._disk.items() if path not in self._open]
        return files + [(path, self._tokens(text)) for path, text in self._open.items()]

    def _tokens(self, text: str) -> np.ndarray:
        return np.asarray(self._tokenize(text), dtype=np.int32)

    # --- persistence ---------------------------------------------------------------------------------

    def save(self) -> Path | None:
        """Write the snapshot of the disk's files (not the editor's unsaved text)."""
        if self.snapshot_file is None or self._store_key is None:
            return None
        with self._lock:
            files = dict(self._disk)
        roots = [str(r) for r in self.roots]
        try:
            save_snapshot(self.snapshot_file, Snapshot(sorted(roots), self._store_key, files))
        except OSError as exc:  # the snapshot path is a directory, the cache path a file, a full disk...
            log.warning("workspace index snapshot %s not saved (%s); kept in memory", self.snapshot_file, exc)
            return None
        return self.snapshot_file

    def paths(self) -> list[str]:
        """The indexed files on disk (absolute paths), oldest first."""
        with self._lock:
            return list(self._disk)

    # --- editor documents ----------------------------------------------------------------------------

    def update_document(self, path: str | Path, text: str) -> None:
        """An open editor's text for ``path``: it overrides the file on disk until closed."""
        key = str(Path(path).resolve())
        tokens = self._tokens(text)
        with self._lock:
            self._open[key] = text
            self.index.set_file(key, tokens)
        self._notify(key, text)

    def close_document(self, path: str | Path) -> None:
        """Back to the disk's version of ``path`` (or out of the index if it is not an indexed file)."""
        key = str(Path(path).resolve())
        with self._lock:
            if self._open.pop(key, None) is None:
                return
        self._refresh_from_disk(Path(key))

    def set_preferences(self, current_path: str | Path | None, open_paths: Iterable[str | Path] = ()) -> None:
        current = str(Path(current_path).resolve()) if current_path is not None else None
        self.index.set_preferences(current, [str(Path(p).resolve()) for p in open_paths])

    # --- disk changes --------------------------------------------------------------------------------

    def add_listener(self, listener: ListenerFn) -> None:
        """``listener(path, text_or_None)`` after every effective change (None: the file left the index)."""
        self._listeners.append(listener)

    def start_watching(self) -> None:
        """Watch the roots; a first rescan catches what changed while the index was being built."""
        self._watcher.start()
        self._watcher.request_resync(0.0)

    def watching(self) -> dict[str, Any] | None:
        """The watcher's state (backend, watches, overflows, rescans, polling); None when not watching."""
        return self._watcher.describe() if self._watcher.running else None

    def reconcile(self, halted: Callable[[], bool] = lambda: False) -> int:
        """Bring the index in line with the disk: rescan (stat only), re-read what changed, drop what is gone.

        Runs on the watcher's thread (after a burst, a directory move, or the build); the changed files are
        handled in chunks, and ``halted()`` (asked before each chunk) ends it early. Returns how many paths
        were out of date.
        """
        scanned: dict[str, ScannedFile] = {}
        for root in self.roots:
            scanned.update((str(f.path), f) for f in scan(root, self.config).files)
        with self._lock:
            held = {path: (stored.size, stored.mtime_ns) for path, stored in self._disk.items()}
        gone = [path for path in held if path not in scanned]
        changed = [f for path, f in scanned.items() if held.get(path) != (f.size, f.mtime_ns)]
        self._remove_under(gone)
        done = 0
        for start in range(0, len(changed), RECONCILE_CHUNK):
            if halted():
                break
            done += self._refresh_files(changed[start : start + RECONCILE_CHUNK])
        if gone or changed:
            log.info(
                "workspace index reconciled with the disk: %d of %d changed, %d gone", done, len(changed), len(gone)
            )
        return len(gone) + len(changed)

    def _resync(self) -> int:
        """The watcher's rescan: a reconcile that :meth:`stop` cuts short."""
        return self.reconcile(self._halt.is_set)

    def stop(self, budget_s: float = STOP_RECONCILE_S) -> None:
        """Stop watching. Events the watcher had not settled yet (debounced paths, a rescan it was waiting for, a
        burst still in the kernel's queue) would be lost, and a snapshot saved now would miss them: a watched
        index reconciles with the disk once more first, for ``budget_s`` at most (see the module docstring)."""
        self._halt.set()
        watching = self._watcher.running
        self._watcher.stop()
        if watching:
            deadline = time.monotonic() + budget_s
            self.reconcile(lambda: time.monotonic() > deadline)

    def _filter_for(self, path: Path) -> PathFilter | None:
        return next((f for f in self._filters if f.root in path.parents), None)

    def _refresh_files(self, files: Sequence[ScannedFile]) -> int:
        """Read and index ``files`` as the scan found them (their size and mtime are the scan's, taken before the
        read: a file written in between looks changed to the next reconcile). Returns how many were indexed."""
        entries: list[tuple[str, int, int, str]] = []
        gone: list[str] = []
        for file in files:
            text, _ = read_source(file.path, self.config.max_file_bytes)
            if text is None:
                gone.append(str(file.path))
            else:
                entries.append((str(file.path), file.size, file.mtime_ns, text))
        self._remove_under(gone)
        return self._index_texts(entries)

    def _refresh_from_disk(self, path: Path) -> None:
        path_filter = self._filter_for(path)
        text = None
        if path_filter is not None and path_filter.reason(path) is None:
            text, _ = read_source(path, self.config.max_file_bytes)
        self._on_disk_change(path, text)

    def _on_disk_change(self, path: Path, text: str | None) -> None:
        """The watcher's callback: ``text`` is the file's new content, ``None`` when it is gone."""
        self._on_disk_changes([(path, text)])

    def _on_disk_changes(self, changes: Sequence[tuple[Path, str | None]]) -> None:
        """The watcher's callback for paths that settled together: one tokenizer call, one index update."""
        entries: list[tuple[str, int, int, str]] = []
        gone: list[str] = []
        for path, text in changes:
            try:
                info = path.stat() if text is not None else None
            except OSError:
                info = None
            if text is None or info is None:
                gone.append(str(path))
            else:
                entries.append((str(path), info.st_size, info.st_mtime_ns, text))
        self._remove_under(gone)
        self._index_texts(entries)

    def _index_texts(self, entries: Sequence[tuple[str, int, int, str]]) -> int:
        """Tokenize (one batch) and index (path, size, mtime_ns, text) entries from the disk; the editor's text
        of an open path wins (the disk is read again on close), so an open path's text is not even tokenized:
        an editor that saves as the user pauses (VS Code's auto-save) had the whole file tokenized for nothing at
        every save (about 0.17 s of a core for 180 KB). Returns how many were indexed."""
        with self._lock:
            entries = [entry for entry in entries if entry[0] not in self._open]
        tokens = self._tokenize_batch([text for *_, text in entries])
        with self._lock:
            stored = {
                key: StoredFile(key, size, mtime_ns, np.asarray(ids, dtype=np.int32))
                for (key, size, mtime_ns, _), ids in zip(entries, tokens, strict=True)
                if key not in self._open
            }
            if stored:
                self._disk.update(stored)
                self.index.set_files([(key, entry.tokens) for key, entry in stored.items()])
                self._count()
        for key, _, _, text in entries:
            if key in stored:
                self._notify(key, text)
        return len(stored)

    def _remove_under(self, keys: Sequence[str]) -> None:
        """Drop each of ``keys`` and, when one was a directory, every file under it; one index update."""
        if not keys:
            return
        targets = set(keys)
        with self._lock:
            under = tuple(key + "/" for key in targets if key not in self._disk)  # maybe directories
            gone = [p for p in self._disk if p not in self._open and (p in targets or p.startswith(under))]
            for p in gone:
                del self._disk[p]
            self.index.remove_files([*gone, *(key for key in targets if key not in self._open)])
            self._count()
        for p in gone:
            self._notify(p, None)

    def _count(self) -> None:
        """Keep the stats' file and token counts true after a change from the watcher."""
        self.stats.files, self.stats.tokens = self.index.num_files, self.index.num_tokens

    def _notify(self, path: str, text: str | None) -> None:
        for listener in list(self._listeners):
            try:
                listener(path, text)
            except Exception:
                log.exception("workspace index listener failed for %s", path)
