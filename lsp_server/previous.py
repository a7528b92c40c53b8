"""The last completion of each document, offered as a draft source to the next completion near it.

Where the ghost text's first line was wrong, the user types the real line and the daemon completes again a line
further on (typing through the held text serves only keys that match it). That completion often goes on as the
last one did: the rest of the block. The decoder sees that text nowhere else, since it was never in the document.
Replayed on the bench's holes, drafts from the first completion made such second completions 4-9% faster at the
pass costs of a 2-core CPU (docs/runs/2026-11-28-policy-replay-zen4/).

Each document (its path) keeps its last completion's token ids, the cursor it was made at and how far its text
reached. It is offered only to a completion whose cursor lies within that reach, so a completion elsewhere in the
file does not look up text written for another place. At most :data:`KEEP` documents are kept, the least recently
completed given up. Only the model worker touches it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from lookahead_lsp.decoder.drafts import DraftSource, SequenceNgrams

SOURCE = "previous"
"""The draft source's name (decoder/policy.py's ``PRIORS`` has its prior)."""
KEEP = 8  # documents whose last completion is kept


@dataclass(frozen=True)
class _Last:
    offset: int  # the cursor it was made at (code points)
    reach: int  # how many characters its text covered from there
    tokens: tuple[int, ...]  # every token it decoded


class PreviousCompletions:
    """Each document's last completion (see the module docstring)."""

    def __init__(self, keep: int = KEEP) -> None:
        self.keep = keep
        self._last: OrderedDict[str, _Last] = OrderedDict()

    def remember(self, path: str, offset: int, token_ids: Sequence[int], reach: int) -> None:
        """``path``'s completion at ``offset`` decoded ``token_ids``, shown as ``reach`` characters of text (one
        that decoded nothing changes nothing)."""
        if not token_ids:
            return
        self._last.pop(path, None)
        self._last[path] = _Last(offset, reach, tuple(token_ids))
        while len(self._last) > self.keep:
            self._last.popitem(last=False)

    def sources(self, path: str, offset: int) -> list[DraftSource]:
        """The draft source for a completion of ``path`` at ``offset``: its last completion where the cursor lies
        within the text that one covered, else none."""
        last = self._last.get(path)
        if last is None or not last.offset <= offset <= last.offset + last.reach:
            return []
        return [SequenceNgrams(SOURCE, last.tokens)]
