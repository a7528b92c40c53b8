"""The workspace n-gram index: a draft source that proposes what followed the last tokens anywhere in the workspace.

Layout (compact numpy, no dict entry per n-gram). A *segment* indexes a set of files:

* ``codes``: the files' tokens concatenated, re-coded densely (``1 + rank`` of the token id among the ids the
  segment uses, ``uint16`` when fewer than 65535 distinct ids, else ``uint32``); ``0`` separates files and pads
  the front with ``depth`` zeros, so a context never reads across a file boundary or before the start.
* ``order``: ``int32`` positions of every token that has a successor in its file, sorted by the *reversed*
  context ``codes[i], codes[i-1], ..., codes[i-depth+1]`` (a suffix array of the reversed stream cut at
  ``depth``). Positions whose last ``k`` tokens equal the query's form one contiguous range for every
  ``k <= depth``, and the range for ``k + 1`` lies inside the range for ``k``: one narrowing binary search
  finds the longest match and all shorter ones.

The index holds up to three segments: ``main`` (the bulk build), ``overlay`` (files changed since, rebuilt on
each change, merged into ``main`` once it grows past ``overlay_max_tokens``) and ``preferred`` (the current
and open files, so that they are searched completely even where a range is too large to read whole). Files
superseded by a later version or by the preferred segment are masked out per file. Writers build new
immutable segments under a lock and publish them with one reference swap, so lookups never lock.

Ranking: longest match first; among continuations of the same match length, the preferred tier (current
file, then open files, then the rest), then the count, then recency (file generation, then offset). Ranges
larger than ``max_candidates`` are read at evenly spaced samples (counts become estimates). A level of at most
``few`` occurrences (a long match, the common case once a completion copies) is read in plain Python; larger ones
in a few dozen numpy calls, each dear when the CPU's caches are cold after a forward pass. Both read the same
candidates and rank them alike.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from lookahead_lsp.decoder.drafts import Draft

SOURCE_NAME = "workspace"
FEW = 32  # occurrences a lookup's level reads in plain Python, not numpy (NgramIndex.few)
TIER_OTHER, TIER_OPEN, TIER_CURRENT = 0, 1, 2


# ---------------------------------------------------------------------------------------------- segments


@dataclass(frozen=True)
class Segment:
    """An immutable index over some files (see the module docstring)."""

    paths: tuple[str, ...]
    gens: np.ndarray  # int64, one per file: the generation of the file's version indexed here
    starts: np.ndarray  # int64, one per file: index in ``codes`` of the file's first token
    codes: np.ndarray  # uint16/uint32 dense codes, 0 = separator
    order: np.ndarray  # int32 positions sorted by reversed context
    vocab: np.ndarray  # int64 sorted token ids; code c stands for vocab[c - 1]
    depth: int

    @property
    def nbytes(self) -> int:
        arrays = (self.gens, self.starts, self.codes, self.order, self.vocab)
        return sum(int(a.nbytes) for a in arrays)

    def encode(self, token_ids: Sequence[int]) -> list[int]:
        """Dense codes for ``token_ids`` (0 for ids this segment never saw)."""
        if len(self.vocab) == 0:
            return [0] * len(token_ids)
        ids = np.asarray(token_ids, dtype=np.int64)
        idx = np.minimum(np.searchsorted(self.vocab, ids), len(self.vocab) - 1)
        return [int(c) for c in np.where(self.vocab[idx] == ids, idx + 1, 0)]

    def ranges(self, context: Sequence[int]) -> list[tuple[int, int]]:
        """``ranges[k - 1]``: the range of ``order`` whose contexts end with the last ``k`` query tokens."""
        tail = list(context[-self.depth :])[::-1]
        codes_mv, order_mv = self.codes.data, self.order.data
        lo, hi = 0, len(self.order)
        found: list[tuple[int, int]] = []
        for back, code in enumerate(self.encode(tail)):
            if code == 0 or lo == hi:
                break

            def key(j: int, back: int = back) -> int:
                return int(codes_mv[order_mv[j] - back])

            new_lo = bisect.bisect_left(range(hi), code, lo, hi, key=key)
            new_hi = bisect.bisect_right(range(hi), code, new_lo, hi, key=key)
            if new_lo == new_hi:
                break
            found.append((new_lo, new_hi))
            lo, hi = new_lo, new_hi
        return found

    def file_of(self, positions: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.starts, positions, side="right") - 1

    def continuations(self, positions: np.ndarray, max_len: int) -> np.ndarray:
        """Rows of the token ids after each position, ``-1`` past the end of the file."""
        idx = np.minimum(positions[:, None] + 1 + np.arange(max_len), len(self.codes) - 1)
        rows = self.codes[idx].astype(np.int64)
        rows *= np.cumprod(rows != 0, axis=1)
        return np.where(rows > 0, self.vocab[np.maximum(rows - 1, 0)], -1)


def _dense_codes(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(codes, vocab): ``codes[i] = 1 + rank of flat[i]`` among the sorted distinct ids ``vocab``."""
    if flat.size == 0:
        return np.zeros(0, np.uint16), np.zeros(0, np.int64)
    if int(flat.min()) < 0:
        raise ValueError("token ids must be non-negative")
    present = np.zeros(int(flat.max()) + 1, dtype=bool)
    present[flat] = True
    vocab = np.flatnonzero(present).astype(np.int64)
    dtype = np.uint16 if len(vocab) < np.iinfo(np.uint16).max else np.uint32
    table = np.zeros(present.size, dtype=dtype)
    table[vocab] = np.arange(1, len(vocab) + 1, dtype=dtype)
    return table[flat], vocab


def _digits(codes: np.ndarray) -> list[np.ndarray]:
    """16-bit digits of ``codes``, least significant first (numpy radix-sorts 16-bit keys)."""
    if codes.dtype == np.uint16:
        return [codes]
    return [(codes & 0xFFFF).astype(np.uint16), (codes >> 16).astype(np.uint16)]


def reverse_context_order(codes: np.ndarray, positions: np.ndarray, depth: int) -> np.ndarray:
    """``positions`` sorted by ``codes[i], codes[i-1], ..., codes[i-depth+1]``: an LSD radix sort, one stable
    16-bit pass per token and digit, deepest token first."""
    order = positions.astype(np.int32)
    digits = _digits(codes)
    for back in range(depth - 1, -1, -1):
        for digit in digits:
            order = order[np.argsort(digit[order - back], kind="stable")]
    return order


def _exclusive_cumsum(values: np.ndarray) -> np.ndarray:
    return np.concatenate([np.zeros(1, np.int64), np.cumsum(values, dtype=np.int64)])[:-1]


def build_segment(files: Sequence[tuple[str, int, np.ndarray]], depth: int) -> Segment:
    """Index ``files`` given as (path, generation, token ids); pure."""
    lengths = np.array([len(tokens) for _, _, tokens in files], dtype=np.int64)
    flat = np.concatenate([np.asarray(t, np.int64) for _, _, t in files]) if files else np.zeros(0, np.int64)
    dense, vocab = _dense_codes(flat)
    starts = depth + _exclusive_cumsum(lengths + 1)
    codes = np.zeros(depth + int(lengths.sum()) + len(files) + 1, dtype=dense.dtype)
    if len(codes) >= np.iinfo(np.int32).max:
        raise ValueError("segment too large for int32 positions")
    codes[np.arange(flat.size) + np.repeat(starts - _exclusive_cumsum(lengths), lengths)] = dense
    positions = np.flatnonzero((codes[:-1] != 0) & (codes[1:] != 0))
    order = reverse_context_order(codes, positions, depth)
    return Segment(
        paths=tuple(p for p, _, _ in files),
        gens=np.array([g for _, g, _ in files], dtype=np.int64),
        starts=starts,
        codes=codes,
        order=order,
        vocab=vocab,
        depth=depth,
    )


# ---------------------------------------------------------------------------------------------- ranking


@dataclass(frozen=True)
class _View:
    """A segment with the per-file masks of one published state."""

    segment: Segment
    alive: np.ndarray  # bool per file
    tiers: np.ndarray  # int8 per file


@dataclass(frozen=True)
class _Candidates:
    rows: np.ndarray  # int64 (n, max_len), -1 past the end
    tiers: np.ndarray
    recency: np.ndarray  # int64: generation << 32 | offset in file


def _sample(lo: int, hi: int, cap: int) -> np.ndarray:
    if hi - lo <= cap:
        return np.arange(lo, hi)
    return lo + (np.arange(cap, dtype=np.int64) * (hi - lo)) // cap


def _gather(view: _View, lo: int, hi: int, max_len: int, cap: int) -> _Candidates:
    seg = view.segment
    positions = seg.order[_sample(lo, hi, cap)].astype(np.int64)
    files = seg.file_of(positions)
    keep = view.alive[files]
    positions, files = positions[keep], files[keep]
    recency = (seg.gens[files] << 32) | (positions - seg.starts[files])
    return _Candidates(seg.continuations(positions, max_len), view.tiers[files], recency)


def _group_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(group id per row, index of one row per group) for identical rows; exact, no hashing."""
    order = np.lexsort(rows.T[::-1])
    ordered = rows[order]
    starts = np.concatenate([[True], np.any(ordered[1:] != ordered[:-1], axis=1)])
    groups = np.empty(len(rows), dtype=np.int64)
    groups[order] = np.cumsum(starts) - 1
    return groups, order[starts]


def _ranked(c: _Candidates) -> Iterator[tuple[tuple[int, ...], int]]:
    """Distinct continuations with their counts, best first: (tier, count, recency) descending."""
    if len(c.rows) == 0:
        return
    groups, first = _group_rows(c.rows)
    counts = np.bincount(groups)
    tier = np.zeros(len(first), dtype=np.int64)
    np.maximum.at(tier, groups, c.tiers.astype(np.int64))
    last = np.full(len(first), -1, dtype=np.int64)
    np.maximum.at(last, groups, c.recency)
    for g in np.lexsort((last, counts, tier))[::-1].tolist():
        row = c.rows[first[g]].tolist()
        yield tuple(row[: row.index(-1)] if -1 in row else row), int(counts[g])


def _ranked_few(level: Sequence[tuple[_View, tuple[int, int]]], max_len: int) -> list[tuple[tuple[int, ...], int]]:
    """What ``_ranked(_concat(_gather(...)))`` yields for ranges too small to sample, read without numpy's
    per-call cost: the same candidates, grouped and ordered alike (tier, count, recency, then the padded row)."""
    groups: dict[tuple[int, ...], list[int]] = {}  # continuation -> [tier, count, recency]
    for view, (lo, hi) in level:
        seg = view.segment
        found: list[tuple[int, int, list[int]]] = []  # (tier, recency, codes) of each live occurrence
        positions = seg.order[lo:hi].astype(np.int64)
        for position, file in zip(positions.tolist(), seg.file_of(positions).tolist(), strict=True):
            if not view.alive[file]:
                continue
            codes = seg.codes[position + 1 : position + 1 + max_len].tolist()
            recency = (int(seg.gens[file]) << 32) | (position - int(seg.starts[file]))
            found.append((int(view.tiers[file]), recency, codes[: codes.index(0)] if 0 in codes else codes))
        flat = [code for _, _, codes in found for code in codes]
        ids = seg.vocab[np.asarray(flat, dtype=np.int64) - 1].tolist() if flat else []
        at = 0
        for tier, recency, codes in found:
            tokens, at = tuple(ids[at : at + len(codes)]), at + len(codes)
            group = groups.setdefault(tokens, [tier, 0, recency])
            group[0], group[1], group[2] = max(group[0], tier), group[1] + 1, max(group[2], recency)

    def rank(item: tuple[tuple[int, ...], list[int]]) -> tuple[int, int, int, tuple[int, ...]]:
        tokens, (tier, count, recency) = item
        return tier, count, recency, tokens + (-1,) * (max_len - len(tokens))

    return [(tokens, group[1]) for tokens, group in sorted(groups.items(), key=rank, reverse=True)]


def _covered(tokens: tuple[int, ...], chosen: list[Draft]) -> bool:
    return any(d.tokens[: len(tokens)] == tokens for d in chosen)


def _concat(parts: list[_Candidates], max_len: int) -> _Candidates:
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return _Candidates(np.zeros((0, max_len), np.int64), empty, empty)
    return _Candidates(
        np.concatenate([p.rows for p in parts]),
        np.concatenate([p.tiers for p in parts]),
        np.concatenate([p.recency for p in parts]),
    )


# ---------------------------------------------------------------------------------------------- the index


@dataclass(frozen=True)
class _FileVersion:
    gen: int
    tokens: np.ndarray  # int32


@dataclass(frozen=True)
class _State:
    views: tuple[_View, ...]


class NgramIndex:
    """A :class:`decoder.drafts.DraftSource` named ``"workspace"`` over all indexed files' token ids."""

    name = SOURCE_NAME

    def __init__(
        self, depth: int = 7, overlay_max_tokens: int = 262_144, max_candidates: int = 256, few: int = FEW
    ) -> None:
        if depth < 1:
            raise ValueError("depth must be at least 1")
        self.depth = depth
        self.overlay_max_tokens = overlay_max_tokens
        self.max_candidates = max_candidates
        self.few = min(few, max_candidates)  # a level this small is read in plain Python (never sampled)
        self._lock = threading.Lock()
        self._files: dict[str, _FileVersion] = {}
        self._next_gen = 1
        self._main = build_segment([], depth)
        self._overlay = self._main
        self._preferred = self._main
        self._current: str | None = None
        self._open: frozenset[str] = frozenset()
        self._state = _State(())

    # --- writers -------------------------------------------------------------------------------------

    def build(self, files: Iterable[tuple[str, Sequence[int] | np.ndarray]]) -> None:
        """Replace everything with ``files``, oldest first (later files count as more recent)."""
        with self._lock:
            self._files = {}
            for path, tokens in files:
                self._files[path] = self._version(tokens)
            self._rebuild_all()

    def set_file(self, path: str, tokens: Sequence[int] | np.ndarray) -> None:
        """Add or replace one file (it becomes the most recent)."""
        self.set_files([(path, tokens)])

    def set_files(self, files: Iterable[tuple[str, Sequence[int] | np.ndarray]]) -> None:
        """Add or replace files (the later the more recent); one rebuild of the overlay for all of them."""
        with self._lock:
            changed = []
            for path, tokens in files:
                self._files[path] = self._version(tokens)
                changed.append(path)
            if changed:
                self._after_change(changed)

    def remove_file(self, path: str) -> None:
        self.remove_files([path])

    def remove_files(self, paths: Iterable[str]) -> None:
        """Drop files (unknown paths are ignored); one rebuild of the overlay for all of them."""
        with self._lock:
            removed = [p for p in paths if self._files.pop(p, None) is not None]
            if removed:
                self._after_change(removed)

    def set_preferences(self, current_path: str | None, open_paths: Iterable[str] = ()) -> None:
        """Prefer continuations from the current file, then from the open files."""
        opened = frozenset(open_paths)
        with self._lock:
            if (current_path, opened) == (self._current, self._open):
                return
            self._current, self._open = current_path, opened
            self._preferred = self._segment_of(self._preferred_paths())
            self._publish()

    def merge(self) -> None:
        """Fold the overlay into the main segment now."""
        with self._lock:
            self._rebuild_all()

    # --- readers -------------------------------------------------------------------------------------

    def lookup(self, context: Sequence[int], max_len: int, max_count: int) -> list[Draft]:
        if max_len <= 0 or max_count <= 0 or len(context) == 0:
            return []
        views = self._state.views
        ranges = [view.segment.ranges(context) for view in views]
        chosen: list[Draft] = []
        previous: list[tuple[int, int]] = []
        for k in range(max((len(r) for r in ranges), default=0), 0, -1):
            level = [(view, r[k - 1]) for view, r in zip(views, ranges, strict=True) if len(r) >= k]
            if [span for _, span in level] == previous:
                continue  # ranges nest: an equal range holds the same candidates, all taken or covered
            previous = [span for _, span in level]
            if sum(hi - lo for _, (lo, hi) in level) <= self.few:
                candidates: Iterable[tuple[tuple[int, ...], int]] = _ranked_few(level, max_len)
            else:
                parts = [_gather(view, lo, hi, max_len, self.max_candidates) for view, (lo, hi) in level]
                candidates = _ranked(_concat(parts, max_len))
            for tokens, count in candidates:
                if not _covered(tokens, chosen):
                    chosen.append(Draft(tokens, SOURCE_NAME, k, count))
                    if len(chosen) >= max_count:
                        return chosen
        return chosen

    def paths(self) -> list[str]:
        return list(self._files)

    def file_tokens(self, path: str) -> np.ndarray | None:
        version = self._files.get(path)
        return None if version is None else version.tokens

    def generation(self, path: str) -> int | None:
        """The version number of ``path`` (increases with every add or replace; orders recency)."""
        version = self._files.get(path)
        return None if version is None else version.gen

    @property
    def num_files(self) -> int:
        return len(self._files)

    @property
    def num_tokens(self) -> int:
        return sum(len(v.tokens) for v in list(self._files.values()))

    @property
    def nbytes(self) -> int:
        """Bytes held: the segments plus each file's token array (shared buffers counted once)."""
        segments = sum(view.segment.nbytes for view in self._state.views)
        buffers: dict[int, int] = {}
        for version in list(self._files.values()):
            base = version.tokens.base if version.tokens.base is not None else version.tokens
            buffers[id(base)] = int(base.nbytes)
        return segments + sum(buffers.values())

    @property
    def bytes_per_token(self) -> float:
        tokens = self.num_tokens
        return self.nbytes / tokens if tokens else 0.0

    # --- internals (called with the lock held) -------------------------------------------------------

    def _version(self, tokens: Sequence[int] | np.ndarray) -> _FileVersion:
        version = _FileVersion(self._next_gen, np.asarray(tokens, dtype=np.int32))
        self._next_gen += 1
        return version

    def _segment_of(self, paths: Iterable[str]) -> Segment:
        files = [(p, self._files[p].gen, self._files[p].tokens) for p in paths if p in self._files]
        return build_segment(files, self.depth)

    def _preferred_paths(self) -> list[str]:
        paths = sorted(self._open - {self._current} if self._current else self._open)
        return ([self._current] if self._current else []) + paths

    def _rebuild_all(self) -> None:
        by_age = sorted(self._files, key=lambda p: self._files[p].gen)
        self._main = self._segment_of(by_age)
        self._overlay = self._segment_of([])
        self._preferred = self._segment_of(self._preferred_paths())
        self._publish()

    def _after_change(self, changed: list[str]) -> None:
        changed_set = set(changed)
        overlay = [p for p in self._overlay.paths if p not in changed_set and p in self._files]
        overlay += [p for p in dict.fromkeys(changed) if p in self._files]
        if sum(len(self._files[p].tokens) for p in overlay) > self.overlay_max_tokens:
            self._rebuild_all()
            return
        self._overlay = self._segment_of(overlay)
        if any(p == self._current or p in self._open for p in changed_set):
            self._preferred = self._segment_of(self._preferred_paths())
        self._publish()

    def _publish(self) -> None:
        preferred = set(self._preferred.paths)
        views = [self._view(self._preferred, set(), preferred=True)]
        views += [self._view(seg, preferred, preferred=False) for seg in (self._overlay, self._main)]
        self._state = _State(tuple(v for v in views if len(v.segment.paths)))

    def _view(self, segment: Segment, hidden: set[str], preferred: bool) -> _View:
        alive = [
            path not in hidden and path in self._files and self._files[path].gen == gen
            for path, gen in zip(segment.paths, segment.gens.tolist(), strict=True)
        ]
        tiers = [self._tier(p) if preferred else TIER_OTHER for p in segment.paths]
        return _View(segment, np.array(alive, dtype=bool), np.array(tiers, dtype=np.int8))

    def _tier(self, path: str) -> int:
        if path == self._current:
            return TIER_CURRENT
        return TIER_OPEN if path in self._open else TIER_OTHER
