"""The slow-moving parts of each document's prompt, held from one prompt to the next: keystrokes keep them.

A prompt's head (context snippets, then the code from the prefix's first line on) is what the KV cache reuses
between keystrokes. Chosen afresh at every keystroke, it moves whenever the cursor enters another block of
lines (the snippet query moves) or the prefix outgrows its start, and each move re-prefills everything after
it: a few hundred tokens, seconds on a 2-core CPU, in the middle of typing. Here each document keeps the
snippets and the prefix's first line of its last prompt (:class:`Anchor`). A keystroke's prompt reuses them
(the prefix start moves only when it no longer fits, then ahead of need: ``context/prompt.py``); a prompt built
in idle time (``settled``: the daemon's background prefill) ranks the snippets again and moves a nearly full
prefix's start, so that the re-prefill those changes cost falls between keystrokes. Such a prompt
(:meth:`PromptAnchors.moves`) becomes the anchor only once its prefill is whole (``lsp_server/pipeline.py``:
:func:`warm`): a keystroke that stops the prefill half-way keeps the old head, which its cache still holds.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lookahead_lsp.context.definitions import CursorContext
from lookahead_lsp.context.imports import Statement
from lookahead_lsp.context.prompt import BuiltPrompt, PromptInput
from lookahead_lsp.context.snippets import Snippet

MAX_DOCUMENTS = 64  # documents whose anchors are kept (least recently prompted dropped first)


@dataclass(frozen=True)
class Anchor:
    """What a document's last prompt was built from: its snippets, the line its prefix started on and the
    file's import statements as they were then."""

    snippets: tuple[Snippet, ...]
    prefix_line: int
    imports: tuple[Statement, ...] = ()
    grown: bool = False  # built on the idle-time budget (``PromptInput.grown``)


class PromptAnchors:
    """Per document (by the path the prompt names): the :class:`Anchor` of its last prompt. Thread-safe."""

    def __init__(self, max_documents: int = MAX_DOCUMENTS) -> None:
        self._anchors: OrderedDict[str, Anchor] = OrderedDict()
        self._max = max_documents
        self._lock = threading.Lock()

    def input_for(
        self,
        path: str,
        text: str,
        offset: int,
        repo_name: str,
        settled: bool,
        query: Callable[[], CursorContext],
        grow: bool = False,
    ) -> PromptInput:
        """The prompt input at a cursor: the anchor's snippets and prefix line, or (``settled``, or no anchor
        yet) snippets from ``query`` with the anchor's prefix line still offered to the prompt builder.
        ``grow``: prompts grow in idle time (the daemon's ``idleTokenBudget``): a ``settled`` prompt is built on
        the larger budget, and a keystroke's on the budget of its anchor's."""
        with self._lock:
            anchor = self._anchors.get(path)
        keep = anchor is not None and not settled
        context = CursorContext(anchor.snippets, anchor.imports) if anchor is not None and keep else query()
        return PromptInput(
            path=path,
            text=text,
            offset=offset,
            repo_name=repo_name,
            snippets=context.snippets,
            imports=context.imports,
            anchor_line=anchor.prefix_line if anchor is not None else None,
            settled=settled,
            grown=grow and (settled or (anchor is not None and anchor.grown)),
        )

    def remember(self, request: PromptInput, built: BuiltPrompt) -> None:
        """Keep what ``built`` (the prompt of ``request``) was made from for the document's next prompt."""
        with self._lock:
            kept = Anchor(tuple(request.snippets), built.prefix_line, tuple(request.imports), request.grown)
            self._anchors[request.path] = kept
            self._anchors.move_to_end(request.path)
            while len(self._anchors) > self._max:
                self._anchors.popitem(last=False)

    def moves(self, request: PromptInput, built: BuiltPrompt) -> bool:
        """Whether ``built`` (the prompt of ``request``) starts otherwise than its document's anchor: other
        snippets (by place and text: a score alone does not change the prompt), another prefix line or another
        budget. A document with no anchor has nothing to move."""
        with self._lock:
            anchor = self._anchors.get(request.path)
        if anchor is None:
            return False
        moved_imports = tuple(request.imports) != anchor.imports
        return (
            moved_imports
            or request.grown != anchor.grown
            or built.prefix_line != anchor.prefix_line
            or _places(request.snippets) != _places(anchor.snippets)
        )

    def forget(self, path: str) -> None:
        """Drop a document's anchor (closed: its next prompt starts afresh)."""
        with self._lock:
            self._anchors.pop(path, None)


def _places(snippets: Sequence[Snippet]) -> list[tuple[str, int, str]]:
    """What of each snippet reaches a prompt: its path, first line and text."""
    return [(snippet.path, snippet.start_line, snippet.text) for snippet in snippets]
