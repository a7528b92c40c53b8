"""The engine: the model host and the workspace context, started, reconfigured and stopped together.

``lsp_server/model_host.py`` loads the model, tunes it and makes its backend; ``lsp_server/workspace_context.py``
keeps the snippets, the workspace index and the open documents. The engine loads the model, then builds the
index with its tokenizer (on the loader thread), and gives the pipeline what a completion reads from both (the
:class:`~lsp_server.pipeline.CompletionEngine` interface), with each document's last completion
(``lsp_server/previous.py``). Progress and failures reach the server through
:class:`~lsp_server.model_host.EngineEvents`; the engine itself knows nothing about LSP.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lookahead_lsp.context.prompt import BuiltPrompt, PromptBuilder, PromptInput
from lookahead_lsp.decoder.backend import Backend
from lookahead_lsp.decoder.drafts import DraftSource
from lookahead_lsp.lsp_server.config import BlockEnd, Config
from lookahead_lsp.lsp_server.model_host import EngineEvents, ModelHost, ModelState, QuietEvents
from lookahead_lsp.lsp_server.previous import PreviousCompletions
from lookahead_lsp.lsp_server.workspace_context import WorkspaceContext


class Engine:
    """The model host and the workspace context for the server and the ``complete`` command."""

    def __init__(
        self, config: Config, roots: Sequence[Path], events: EngineEvents | None = None, watch: bool = True
    ) -> None:
        """``watch``: keep the workspace index current from filesystem events (False: a one-shot completion)."""
        events = events or QuietEvents()
        self.host = ModelHost(config, events)
        self.workspace = WorkspaceContext(roots, events, watch)
        self.previous = PreviousCompletions()  # each document's last completion (lsp_server/previous.py)

    # ---- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Load the model, then build the index, on a background thread."""
        self.host.start(self._build_index)

    def load_now(self) -> None:
        """Load the model and build the index in this thread (the ``complete`` command); raises
        ``ModelLoadError`` on failure."""
        self.host.load_now(self._build_index)

    def stop(self) -> None:
        """Discard a load in flight, stop watching and updating, save the index snapshot. Idempotent."""
        self.host.stop()
        self.workspace.stop()

    def apply_config(self, config: Config) -> None:
        """Take new settings: reload the model or rebuild the index only where their settings changed."""
        previous = self.host.config
        self.host.apply_config(config)
        if config.model_key() != previous.model_key() and self.host.state != "idle":
            self.start()
        elif config.index_key() != previous.index_key() and self.host.loaded:
            self.reindex()

    def reindex(self) -> None:
        """Rebuild the workspace index from scratch in the background (once a model is loaded)."""
        if not self.host.loaded:
            self.workspace.drop_index()
            return
        self.workspace.reindex(self.host.tokenizer, self.host.config, self._is_current())

    def _build_index(self, generation: int) -> None:
        self.workspace.build_index(self.host.tokenizer, self.host.config, lambda: self.host.current(generation))

    def _is_current(self) -> Callable[[], bool]:
        generation = self.host.generation
        return lambda: self.host.current(generation)

    @property
    def state(self) -> ModelState:
        return self.host.state

    @property
    def ready(self) -> bool:
        return self.host.state == "ready" and self.host.config.enabled

    def describe(self) -> dict[str, Any]:
        """The model and index state for ``lookahead.stats``."""
        return {**self.host.describe(), "index": self.workspace.describe(self.host.config.index_enabled)}

    # ---- documents (the server's) ------------------------------------------------------------------

    def document_changed(self, path: Path | None, text: str | None) -> None:
        self.workspace.document_changed(path, text)

    def context_pending(self, path: Path | None) -> bool:
        return self.workspace.context_pending(path)

    @property
    def on_context_change(self) -> Callable[[Path], None] | None:
        return self.workspace.on_context_change

    @on_context_change.setter
    def on_context_change(self, listener: Callable[[Path], None] | None) -> None:
        self.workspace.on_context_change = listener

    # ---- what a completion reads (lsp_server/pipeline.py: CompletionEngine) ---------------------------

    @property
    def config(self) -> Config:
        return self.host.config

    @property
    def tokenizer(self) -> Any:
        return self.host.tokenizer

    @property
    def stop_ids(self) -> frozenset[int]:
        return self.host.stop_ids

    def backend(self) -> Backend:
        return self.host.backend()

    def block_end(self) -> BlockEnd:
        return self.host.block_end()

    def prompt_builder(self, grown: bool = False) -> PromptBuilder:
        return self.host.prompt_builder(grown)

    def prompt_input(self, path: Path, text: str, offset: int, settled: bool = False) -> PromptInput:
        grow = self.host.idle_budget() is not None
        return self.workspace.prompt_input(path, text, offset, settled, self.host.config.definitions, grow)

    def prompt_built(self, request: PromptInput, built: BuiltPrompt) -> None:
        self.workspace.prompt_built(request, built)

    def prompt_moves(self, request: PromptInput, built: BuiltPrompt) -> bool:
        return self.workspace.prompt_moves(request, built)

    def draft_sources(self) -> list[DraftSource]:
        return self.workspace.draft_sources()

    def set_current(self, path: Path | None) -> None:
        self.workspace.set_current(path)
