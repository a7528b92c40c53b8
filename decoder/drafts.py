"""decoder: draft sources behind one small interface: each proposes continuations of the token sequence so far.

Sources: n-grams of a fixed token sequence (the prompt, the suffix after the cursor), an in-memory index
over many token sequences (a stand-in with the same interface as the workspace index in
``context/ngram_index.py``), and the Jacobi pool that the lookahead branch fills (``decoder/lookahead.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from lookahead_lsp.decoder.ids import common_prefix_len


@dataclass(frozen=True)
class Draft:
    """A candidate continuation: ``tokens`` follow the current sequence if the draft is right."""

    tokens: tuple[int, ...]
    source: str
    match_len: int  # how many trailing tokens of the context matched to find it (0 for the Jacobi pool)
    count: int = 1  # how often this continuation occurred in its source
    rank: int = 0  # its place in its source's answer to one lookup (0: the best; decoder/policy.py keeps apart
    # estimates for the best draft and its alternatives)


@runtime_checkable
class DraftSource(Protocol):
    """Anything that can propose drafts. ``context`` is the whole sequence so far (prompt + generated)."""

    name: str

    def lookup(self, context: Sequence[int], max_len: int, max_count: int) -> list[Draft]:
        """Up to ``max_count`` distinct continuations of at most ``max_len`` tokens, best first."""
        ...


class NgramTable:
    """Positions of every k-gram (k <= ``max_match``) in one or more token sequences; sequences may grow.

    A lookup matches the context's last ``max_match .. 1`` tokens and returns what followed each occurrence,
    longest match first, then the most recent occurrence first.
    """

    SCAN_LIMIT = 64  # most recent occurrences examined per match length

    def __init__(self, name: str, max_match: int = 4) -> None:
        self.name = name
        self.max_match = max_match
        self._seqs: list[list[int]] = []
        self._where: dict[tuple[int, ...], list[tuple[int, int]]] = {}

    def add_sequence(self, tokens: Sequence[int]) -> int:
        """Index a new sequence; returns its handle for :meth:`extend`."""
        self._seqs.append([])
        handle = len(self._seqs) - 1
        self.extend(handle, tokens)
        return handle

    def extend(self, handle: int, tokens: Sequence[int]) -> None:
        """Append tokens to a sequence and index the k-grams that end in them."""
        seq = self._seqs[handle]
        start = len(seq)
        seq.extend(tokens)
        for end in range(start, len(seq)):
            for k in range(1, min(self.max_match, end + 1) + 1):
                self._where.setdefault(tuple(seq[end - k + 1 : end + 1]), []).append((handle, end))

    def lookup(self, context: Sequence[int], max_len: int, max_count: int) -> list[Draft]:
        drafts: list[Draft] = []
        seen: dict[tuple[int, ...], int] = {}
        for k in range(min(self.max_match, len(context)), 0, -1):
            occurrences = self._where.get(tuple(context[-k:]), [])
            for handle, end in reversed(occurrences[-self.SCAN_LIMIT :]):
                cont = tuple(self._seqs[handle][end + 1 : end + 1 + max_len])
                if not cont:
                    continue
                if cont in seen:
                    i = seen[cont]
                    drafts[i] = Draft(cont, self.name, drafts[i].match_len, drafts[i].count + 1)
                    continue
                if len(drafts) >= max_count:
                    continue
                seen[cont] = len(drafts)
                drafts.append(Draft(cont, self.name, k))
            if len(drafts) >= max_count:
                break
        return drafts


class PromptNgrams(NgramTable):
    """Drafts from a generation's context: its prompt, then what it has written (:meth:`write`), one sequence.
    Kept from one generation to the next of a document, it is aimed at a new prompt by :meth:`follow`, which
    unindexes only what follows the part the two share and indexes the new tail: a key's prompt, most of it the
    last one's, costs what changed, not its length. What it holds is then what a table built on the new prompt
    alone would hold, in the same order (the same drafts)."""

    def __init__(self, name: str = "prompt", max_match: int = 4) -> None:
        super().__init__(name, max_match)
        self.add_sequence(())

    @property
    def tokens(self) -> Sequence[int]:
        return self._seqs[0]

    def write(self, tokens: Sequence[int]) -> None:
        """What the generation wrote after its prompt (or after what it wrote before)."""
        self.extend(0, tokens)

    def follow(self, tokens: Sequence[int]) -> None:
        """Hold ``tokens`` (and nothing after them)."""
        seq = self._seqs[0]
        keep = common_prefix_len(seq, tokens)
        for end in range(len(seq) - 1, keep - 1, -1):  # the most recent entries of their lists, latest first
            for k in range(1, min(self.max_match, end + 1) + 1):
                key = tuple(seq[end - k + 1 : end + 1])
                where = self._where[key]
                where.pop()
                if not where:
                    del self._where[key]
        del seq[keep:]
        self.extend(0, tokens[keep:])


class SequenceNgrams(NgramTable):
    """Drafts from one fixed token sequence: the prompt, or the text after the cursor (the suffix)."""

    def __init__(self, name: str, tokens: Sequence[int], max_match: int = 4) -> None:
        super().__init__(name, max_match)
        self.add_sequence(tokens)


class TokenIndex(NgramTable):
    """An in-memory index over many token sequences (the same interface as the workspace index)."""

    def __init__(self, sequences: Sequence[Sequence[int]] = (), name: str = "workspace", max_match: int = 4):
        super().__init__(name, max_match)
        for seq in sequences:
            self.add_sequence(seq)


class JacobiPool:
    """N-grams collected from the Jacobi (lookahead) branch, keyed by the token they follow."""

    name = "jacobi"

    def __init__(self, per_key: int = 4) -> None:
        self.per_key = per_key
        self._pool: dict[int, list[tuple[int, ...]]] = {}

    def add(self, key: int, continuation: Sequence[int]) -> None:
        cont = tuple(continuation)
        if not cont:
            return
        entries = self._pool.setdefault(key, [])
        if cont in entries:
            entries.remove(cont)
        entries.append(cont)
        del entries[: -self.per_key]

    def lookup(self, context: Sequence[int], max_len: int, max_count: int) -> list[Draft]:
        if not context:
            return []
        entries = self._pool.get(context[-1], [])
        return [Draft(c[:max_len], self.name, 1) for c in reversed(entries[-max_count:])]
