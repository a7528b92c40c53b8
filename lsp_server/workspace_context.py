"""The workspace context: what the prompt and the decoder learn from the other files, kept current.

It holds the snippet index (open documents and files changed on disk), the workspace n-gram index (a draft
source, built on a daemon thread once the model's tokenizer is there), the open paths and the prompt's names
(paths relative to their workspace root, the repository name). Open documents' texts reach both indexes
through :class:`DocumentUpdates`, one thread that coalesces edits per path (the newest text wins) and waits
until a text rests, so typing does not re-tokenize a file at every keystroke while the model worker needs the
CPU.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lookahead_lsp.context.anchors import PromptAnchors
from lookahead_lsp.context.definitions import CursorContext, SymbolTable, cursor_context
from lookahead_lsp.context.prompt import BuiltPrompt, PromptInput
from lookahead_lsp.context.snippets import SnippetIndex
from lookahead_lsp.context.workspace import WorkspaceConfig, read_source
from lookahead_lsp.context.workspace_index import WorkspaceIndex
from lookahead_lsp.decoder.drafts import DraftSource
from lookahead_lsp.lsp_server.config import Config
from lookahead_lsp.lsp_server.model_host import EngineEvents

log = logging.getLogger(__name__)

UPDATE_DELAY_S = 0.75  # an open document's indexes are updated once its text rests this long
MAX_INDEXED_CHARS = 1_000_000  # larger open documents stay out of the indexes (as on disk)


class DocumentUpdates:
    """A coalescing, debounced queue of document texts (None: closed) handled on a daemon thread.

    A path's text is handled once it has not changed for ``delay`` seconds; ``handled(path)`` follows each
    handling (failed or not) once :meth:`waiting` no longer counts that path.
    """

    def __init__(
        self,
        handle: Callable[[Path, str | None], None],
        delay: float = UPDATE_DELAY_S,
        handled: Callable[[Path], None] | None = None,
    ) -> None:
        self._handle = handle
        self._handled = handled
        self._delay = delay
        self._pending: dict[Path, tuple[float, str | None]] = {}
        self._handling: Path | None = None  # the path being handled now
        self._cond = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name="document-updates", daemon=True)
        self._thread.start()

    def put(self, path: Path, text: str | None) -> None:
        with self._cond:
            self._pending.pop(path, None)  # re-queued at the end: the oldest change goes first
            self._pending[path] = (time.monotonic(), text)
            self._cond.notify()

    def waiting(self, besides: Path | None = None) -> bool:
        """Whether a path other than ``besides`` has a text not yet handled (queued or being handled)."""
        with self._cond:
            return any(path != besides for path in self._pending) or self._handling not in (None, besides)

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._pending.clear()
            self._cond.notify()
        self._thread.join(2.0)

    def _next(self) -> tuple[Path, str | None] | None:
        with self._cond:
            while not self._stopping:
                if self._pending:
                    path, (changed, text) = next(iter(self._pending.items()))
                    wait = changed + self._delay - time.monotonic()
                    if wait <= 0:
                        del self._pending[path]
                        self._handling = path
                        return path, text
                    self._cond.wait(wait)
                else:
                    self._cond.wait()
            return None

    def _loop(self) -> None:
        while (item := self._next()) is not None:
            path, text = item
            try:
                self._handle(path, text)
            except Exception:
                log.exception("updating %s failed", path)
            finally:
                with self._cond:
                    self._handling = None
            if self._handled is not None:
                try:
                    self._handled(path)
                except Exception:
                    log.exception("after updating %s", path)


class WorkspaceContext:
    """Snippets, the workspace index, document updates and the prompt's paths for one set of roots."""

    def __init__(self, roots: Sequence[Path], events: EngineEvents, watch: bool = True) -> None:
        self.roots = [Path(r) for r in roots]
        self.events = events
        self.watch = watch  # keep the index current from filesystem events (not for a one-shot completion)
        self.on_context_change: Callable[[Path], None] | None = None  # another file's text reached the indexes
        self._index: WorkspaceIndex | None = None
        self._snippets = SnippetIndex()
        self._symbols = SymbolTable()  # every workspace file's definitions (context/definitions.py)
        self._anchors = PromptAnchors()
        self._snippet_lock = threading.Lock()
        self._open_paths: set[Path] = set()
        self._lock = threading.Lock()
        self._updates = DocumentUpdates(self._apply_document, handled=self._document_applied)

    # ---- what a completion reads -------------------------------------------------------------------

    @property
    def repo_name(self) -> str:
        return self.roots[0].name if self.roots else ""

    def prompt_path(self, path: Path) -> str:
        """The path the prompt names: relative to its workspace root when inside one."""
        for root in self.roots:
            if path.is_relative_to(root):
                return path.relative_to(root).as_posix()
        return path.name

    def prompt_input(
        self, path: Path, text: str, offset: int, settled: bool = False, definitions: bool = True, grow: bool = False
    ) -> PromptInput:
        """The prompt's input for a cursor in ``path``: its name, the repository, the context snippets and the
        document's anchor (``context/anchors.py``: a keystroke keeps its last prompt's snippets and prefix
        start; ``settled``, a prompt built in idle time, ranks the snippets again); ``definitions``: the
        definitions of the names the cursor uses come first (``context/definitions.py``); ``grow``: prompts grow
        in idle time (``PromptInput.grown``).

        The snippets are ranked against the code before the cursor's block of lines
        (``context/snippets.py: query_window``)."""
        name = self.prompt_path(path)

        def query() -> CursorContext:
            with self._snippet_lock:
                return cursor_context(self._snippets, self._symbols if definitions else None, name, text, offset)

        return self._anchors.input_for(name, text, offset, self.repo_name, settled, query, grow)

    def prompt_built(self, request: PromptInput, built: BuiltPrompt) -> None:
        """``built`` is the prompt of ``request``: its document's next prompt starts from it."""
        self._anchors.remember(request, built)

    def prompt_moves(self, request: PromptInput, built: BuiltPrompt) -> bool:
        """Whether ``built`` (the prompt of ``request``) starts otherwise than its document's last prompt."""
        return self._anchors.moves(request, built)

    def draft_sources(self) -> list[DraftSource]:
        """The workspace index as a draft source once it is built (nothing before)."""
        index = self._index
        return [index.index] if index is not None else []

    def set_current(self, path: Path | None) -> None:
        """Prefer drafts from the current file and the open ones (called before each completion)."""
        index = self._index
        if index is not None:
            index.set_preferences(path, sorted(self._open_paths))

    # ---- documents ---------------------------------------------------------------------------------

    def document_changed(self, path: Path | None, text: str | None) -> None:
        """An open document's new text (None: closed); applied to the indexes in the background."""
        if path is None:
            return
        if text is not None and len(text) > MAX_INDEXED_CHARS:
            text = None  # too large to index: treated as closed
        if text is None:
            self._open_paths.discard(path)
            self._anchors.forget(self.prompt_path(path))
        else:
            self._open_paths.add(path)
        self._updates.put(path, text)

    def context_pending(self, path: Path | None) -> bool:
        """Whether another file's text is about to reach the snippet index (and then ``on_context_change``):
        a prompt for ``path`` built now may be stale within a second."""
        return self._updates.waiting(besides=path)

    def _apply_document(self, path: Path, text: str | None) -> None:
        self._snippet_text(path, text)
        index = self._index
        if index is not None:
            if text is None:
                index.close_document(path)
            else:
                index.update_document(path, text)

    def _document_applied(self, path: Path) -> None:
        """A document's text has reached the indexes (or failed to): the open documents' prompts are looked at
        again. Only now, with the update no longer pending: a settle that found it pending (``context_pending``)
        skipped its background prefill and waits for this (closing a long file takes a second or more)."""
        if self.on_context_change is not None:
            self.on_context_change(path)

    def _disk_text(self, path: Path, text: str | None) -> None:
        """A file's text through the index (on disk, or an open document's): the indexes follow, and a change of
        its definitions tells the open documents' prompts (``on_context_change``) as an open document's does."""
        if self._snippet_text(path, text) and self.on_context_change is not None:
            self.on_context_change(path)

    def _snippet_text(self, path: Path, text: str | None) -> bool:
        """Keep the snippet index and the symbol table current (open documents and, through the index, files on
        disk); whether the file's definitions changed."""
        name = self.prompt_path(path)
        changed = self._symbols.update(name, text)
        with self._snippet_lock:
            if text is None:
                self._snippets.remove_document(name)
            else:
                self._snippets.add_document(name, text)
        return changed

    # ---- the workspace index -----------------------------------------------------------------------

    def build_index(self, tokenizer: Any, config: Config, current: Callable[[], bool]) -> None:
        """Build the workspace index (on the calling thread) and watch the roots; kept if ``current()`` still
        holds once it is built (the model it was built for was not replaced or stopped meanwhile)."""
        if not config.index_enabled or not self.roots:
            return
        try:
            settings = WorkspaceConfig(include=config.include, exclude=config.exclude)
            index = WorkspaceIndex.for_tokenizer(list(self.roots), tokenizer, settings, on_watch_limit=self._notice)
            index.build(progress=lambda message, fraction: self.events.progress("index", message, fraction))
        except Exception as exc:
            log.exception("indexing failed")
            self.events.failed("index", f"lookahead: indexing failed: {exc}")
            return
        with self._lock:
            keep = current() and self._index is None
            if keep:
                self._index = index
        if not keep:
            _stop_index(index)
            return
        index.add_listener(lambda path, text: self._disk_text(Path(path), text))
        self._read_symbols(index.paths(), settings.max_file_bytes)
        if self.watch:
            try:
                index.start_watching()
            except Exception:
                log.exception("watching the workspace failed")
        self.events.finished("index", "workspace indexed")

    def _read_symbols(self, paths: Sequence[str], max_bytes: int) -> None:
        """Every indexed file's definitions into the symbol table (an open document's text wins: it is there)."""
        open_names = {self.prompt_path(p) for p in list(self._open_paths)}
        for path in paths:
            name = self.prompt_path(Path(path))
            if name in open_names:
                continue
            text, _ = read_source(Path(path), max_bytes)
            if text is not None:
                self._symbols.update(name, text)

    def _notice(self, message: str) -> None:
        self.events.notice(message, False)

    def reindex(self, tokenizer: Any, config: Config, current: Callable[[], bool]) -> None:
        """Drop the index and build it again from scratch on a daemon thread."""
        self.drop_index()
        args = (tokenizer, config, current)
        threading.Thread(target=self.build_index, args=args, name="engine-index", daemon=True).start()

    def drop_index(self) -> None:
        """Stop watching and save the index snapshot."""
        with self._lock:
            index, self._index = self._index, None
        if index is not None:
            _stop_index(index)

    def stop(self) -> None:
        """Stop the document updates, the watcher and save the index snapshot. Idempotent."""
        self._updates.stop()
        self.drop_index()

    def describe(self, enabled: bool) -> dict[str, Any]:
        """The index state for ``lookahead.stats``."""
        index = self._index
        stats = index.stats.to_dict() if index is not None else None
        watching = index.watching() if index is not None else None
        return {"enabled": enabled, "ready": index is not None, "stats": stats, "watching": watching}


def _stop_index(index: WorkspaceIndex) -> None:
    try:
        index.stop()
        index.save()
    except Exception:
        log.exception("saving the workspace index failed")
