"""Draft sources behind one small interface: each proposes continuations of the token sequence so far.

Sources: n-grams of a fixed token sequence (the prompt, the suffix after the cursor), an in-memory index
over many token sequences (a stand-in with the same interface as the workspace index in
``context/ngram_index.py``), and the Jacobi pool that the lookahead branch fills (``decoder/lookahead.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class Draft:
    """A candidate continuation: ``tokens`` follow the current sequence if the draft is right."""

    tokens: tuple[int, ...]
    source: str
    match_len: int  # how many trailing tokens of the context matched to find it (0 for the Jacobi pool)
    count: int = 1  # how often this continuation occurred in its source


@runtime_checkable
class DraftSource(Protocol):
    """Anything that can propose drafts. ``context`` is the whole sequence so far (prompt + generated)."""

    name: str

    def lookup(self, context: Sequence[int], max_len: int, max_count: int) -> list[Draft]:
        """Up to ``max_count`` distinct continuations of at most ``max_len`` tokens, best first."""
        ...
