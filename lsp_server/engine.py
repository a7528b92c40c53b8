"""The engine: owns the model, the decoder and the workspace index, and loads them in the background.

Threads: a loader thread per (re)load of the model and index (daemon: a load in flight never delays
exit; after loading a local model it picks torch's CPU thread count and measures the forward-pass cost
model by timing a few passes, in about a second, before the model is declared ready), one document-update
thread that coalesces edits per path (the newest text wins) before they reach the workspace and snippet
indexes, and the scheduler's model worker, the only thread that calls :meth:`Engine.decoder`. Progress and
failures reach the server through :class:`EngineEvents`; the engine itself knows nothing about LSP.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from context.snippets import Snippet, SnippetIndex
from lsp_server.config import Config

if TYPE_CHECKING:
    from context.prompt import PromptBuilder
    from context.workspace_index import WorkspaceIndex
    from decoder.backend import Backend
    from decoder.model import LoadedModel
    from decoder.policy import CostModel
    from decoder.types import CancelToken

log = logging.getLogger(__name__)

UPDATE_DELAY_S = 0.75  # an open document's indexes are updated once its text rests this long
MAX_INDEXED_CHARS = 1_000_000  # larger open documents stay out of the indexes (as on disk)

ModelState = Literal["idle", "loading", "ready", "failed"]
Task = Literal["model", "index"]


class EngineEvents(Protocol):
    """What the engine tells its owner (the server forwards these as $/progress and showMessage)."""

    def progress(self, task: Task, message: str, fraction: float | None) -> None: ...

    def finished(self, task: Task, message: str) -> None: ...

    def failed(self, task: Task, message: str) -> None: ...

    def notice(self, message: str, error: bool) -> None: ...


class QuietEvents:
    """Events for the command line: progress to the log; failures are raised to the caller."""

    def progress(self, task: Task, message: str, fraction: float | None) -> None:
        log.info("%s: %s%s", task, message, "" if fraction is None else f" ({fraction:.0%})")

    def finished(self, task: Task, message: str) -> None:
        log.info("%s: %s", task, message)

    def failed(self, task: Task, message: str) -> None:
        log.info("%s: %s", task, message)  # the caller reports it (load_now raises)

    def notice(self, message: str, error: bool) -> None:
        log.log(logging.WARNING if error else logging.INFO, "%s", message)


@dataclass(frozen=True)
class ModelSlot:
    """One loaded model and the settings it was loaded with; replaced whole on a reload."""

    loaded: LoadedModel
    key: tuple[Any, ...]
    generation: int
    stop_ids: frozenset[int]  # end-of-completion token ids (computed once: get_vocab is slow)
    cost: CostModel | None = None  # measured forward-pass cost (local models); None: the device's default
    threads: int | None = None  # torch intra-op threads chosen at load


class DocumentUpdates:
    """A coalescing, debounced queue of document texts (None: closed) handled on a daemon thread.

    A path's text is handled once it has not changed for ``delay`` seconds: typing does not re-tokenize
    a file at every keystroke while the model worker needs the CPU.
    """

    def __init__(self, handle: Callable[[Path, str | None], None], delay: float = UPDATE_DELAY_S) -> None:
        self._handle = handle
        self._delay = delay
        self._pending: dict[Path, tuple[float, str | None]] = {}
        self._cond = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name="document-updates", daemon=True)
        self._thread.start()

    def put(self, path: Path, text: str | None) -> None:
        with self._cond:
            self._pending.pop(path, None)  # re-queued at the end: the oldest change goes first
            self._pending[path] = (time.monotonic(), text)
            self._cond.notify()

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


class Engine:
    """The model, its decoder and the workspace context, for the server and the ``complete`` command."""

    def __init__(self, config: Config, roots: Sequence[Path], events: EngineEvents | None = None) -> None:
        self.config = config
        self.roots = [Path(r) for r in roots]
        self.events: EngineEvents = events or QuietEvents()
        self.state: ModelState = "idle"
        self.error: str | None = None
        self._slot: ModelSlot | None = None
        self._generation = 0
        self._decoder: tuple[tuple[Any, ...], Backend] | None = None
        self._builder: tuple[tuple[Any, ...], PromptBuilder] | None = None
        self.on_context_change: Callable[[Path], None] | None = None  # another file's text reached the indexes
        self._index: WorkspaceIndex | None = None
        self._index_ready = False
        self._snippets = SnippetIndex()
        self._snippet_lock = threading.Lock()
        self._open_paths: set[Path] = set()
        self._lock = threading.RLock()
        self._updates = DocumentUpdates(self._apply_document)

    # ---- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Load the model (then build the index) on a background thread."""
        with self._lock:
            self._generation += 1
            generation = self._generation
            self.state, self.error = "loading", None
        threading.Thread(target=self._load, args=(generation,), name="engine-loader", daemon=True).start()

    def load_now(self) -> None:
        """Load synchronously (the ``complete`` command); raises ``ModelLoadError`` on failure."""
        with self._lock:
            self._generation += 1
            generation = self._generation
            self.state = "loading"
        self._load(generation, raise_errors=True)

    def stop(self) -> None:
        """Stop watching and updating; save the index snapshot. Idempotent."""
        self._updates.stop()
        with self._lock:
            self._generation += 1  # a load still in flight discards its result
            index, self._index = self._index, None
        if index is not None:
            _stop_index(index)
        self._close_decoder()

    @property
    def ready(self) -> bool:
        return self.state == "ready" and self.config.enabled

    @property
    def model(self) -> LoadedModel:
        return self._loaded_slot().loaded

    @property
    def stop_ids(self) -> frozenset[int]:
        return self._loaded_slot().stop_ids

    def _loaded_slot(self) -> ModelSlot:
        slot = self._slot
        if slot is None:
            raise RuntimeError("the model is not loaded")
        return slot

    def apply_config(self, config: Config) -> None:
        """Take new settings: reload the model or rebuild the index only where their settings changed."""
        previous, self.config = self.config, config
        if config.threads != previous.threads and config.threads is not None and config.local:
            from decoder.model import configure_torch_threads

            configure_torch_threads(config.threads)
        if config.model_key() != previous.model_key() and self.state != "idle":
            self.start()
        elif config.index_key() != previous.index_key() and self._slot is not None:
            self.reindex()

    # ---- the model and its decoder (model worker thread) ---------------------------------------------

    def decoder(self) -> Backend:
        """The backend for the current settings over the current model; kept while they stay the same."""
        slot = self._loaded_slot()
        key = (slot.generation, *self.config.decoder_key())
        if self._decoder is None or self._decoder[0] != key:
            self._close_decoder()
            self._decoder = (key, _make_backend(slot.loaded, self.config, self.events, slot.cost))
        return self._decoder[1]

    def warm(self, prompt_ids: list[int], cancel: CancelToken) -> int | None:
        """Prefill ``prompt_ids`` in idle time (model worker): tokens prefilled, None where unsupported."""
        from decoder.backend import LocalBackend

        backend = self.decoder()
        if not isinstance(backend, LocalBackend):
            return None  # a remote engine keeps its own cache
        warm = getattr(backend.decoder, "warm", None)
        return int(warm(prompt_ids, cancel)) if warm is not None else None

    def prompt_settings(self) -> tuple[str, int]:
        """The (layout, token budget) in force: the settings, or the defaults for the model's device."""
        device = self._loaded_slot().loaded.device.type if self.config.local else "remote"
        return self.config.prompt_settings(device)

    def _close_decoder(self) -> None:
        current, self._decoder = self._decoder, None
        if current is not None:
            current[1].close()

    def prompt_builder(self) -> PromptBuilder:
        """The prompt builder for the current tokenizer and budget (it caches snippet token ids)."""
        slot = self._loaded_slot()
        layout, total = self.prompt_settings()
        key = (slot.generation, layout, total, self.config.local)
        if self._builder is None or self._builder[0] != key:
            from context.prompt import layout_builder

            heal = self.config.local  # remote engines cannot force the first tokens
            builder = layout_builder(slot.loaded.tokenizer, layout, total, heal)  # type: ignore[arg-type]  # parsed
            self._builder = (key, builder)
        return self._builder[1]

    def prompt_path(self, path: Path) -> str:
        """The path the prompt names: relative to its workspace root when inside one."""
        for root in self.roots:
            if path.is_relative_to(root):
                return path.relative_to(root).as_posix()
        return path.name

    def snippets_for(self, path: Path, text: str, offset: int) -> list[Snippet]:
        """Context snippets from other files, relevant to the code before ``offset`` in ``path``.

        The query ends at the start of the cursor's block of lines (``context/snippets.py: query_window``):
        typing on a line keeps the same snippets, so the context part of the prompt stays in the KV cache."""
        with self._snippet_lock:
            return self._snippets.query_at(text, offset, exclude_path=self.prompt_path(path))

    def _snippet_text(self, path: Path, text: str | None) -> None:
        """Keep the snippet index current (open documents and, through the index, files on disk)."""
        name = self.prompt_path(path)
        with self._snippet_lock:
            if text is None:
                self._snippets.remove_document(name)
            else:
                self._snippets.add_document(name, text)

    def draft_sources(self) -> list[Any]:
        """The workspace index as a draft source once it is built (nothing before)."""
        index = self._index
        if index is None or not self._index_ready:
            return []
        return [index.index]

    @property
    def repo_name(self) -> str:
        return self.roots[0].name if self.roots else ""

    # ---- documents and the index -------------------------------------------------------------------

    def document_changed(self, path: Path | None, text: str | None) -> None:
        """An open document's new text (None: closed); applied to the indexes in the background."""
        if path is None:
            return
        if text is not None and len(text) > MAX_INDEXED_CHARS:
            text = None  # too large to index: treated as closed
        if text is None:
            self._open_paths.discard(path)
        else:
            self._open_paths.add(path)
        self._updates.put(path, text)

    def set_current(self, path: Path | None) -> None:
        """Prefer drafts from the current file and the open ones (called before each completion)."""
        index = self._index
        if index is not None and self._index_ready:
            index.set_preferences(path, sorted(self._open_paths))

    def reindex(self) -> None:
        """Rebuild the workspace index from scratch in the background."""
        with self._lock:
            index, self._index, self._index_ready = self._index, None, False
            generation = self._generation
        if index is not None:
            _stop_index(index)
        if self._slot is not None:
            threading.Thread(target=self._build_index, args=(generation,), name="engine-index", daemon=True).start()

    def describe(self) -> dict[str, Any]:
        """The model and index state for ``lookahead.stats``."""
        slot = self._slot
        index = self._index
        info: dict[str, Any] = {"state": self.state, "error": self.error, "decoder": self.config.decoder}
        if slot is not None:
            loaded = slot.loaded
            info.update(
                spec=loaded.spec,
                source=loaded.source,
                device=str(loaded.device),
                dtype=str(loaded.dtype),
                loadSeconds=round(loaded.load_seconds, 2),
                threads=slot.threads,
                costModel=[list(point) for point in slot.cost.points] if slot.cost is not None else None,
            )
            layout, budget = self.prompt_settings()
            info.update(promptLayout=layout, tokenBudget=budget)
        backend = self._decoder[1] if self._decoder is not None else None
        if backend is not None and hasattr(backend, "describe"):
            info["remote"] = backend.describe()
        info["index"] = {
            "enabled": self.config.index_enabled,
            "ready": self._index_ready,
            "stats": index.stats.to_dict() if index is not None else None,
        }
        return info

    # ---- background work ---------------------------------------------------------------------------

    def _current(self, generation: int) -> bool:
        return generation == self._generation

    def _load(self, generation: int, raise_errors: bool = False) -> None:
        from decoder.model import ModelLoadError, stop_token_ids

        config = self.config
        started = time.perf_counter()
        self.events.progress("model", f"loading {config.model}", 0.0)
        if config.local:
            from decoder.model import configure_torch_threads

            configure_torch_threads(config.threads)  # inter-op threads: only before torch's first parallel work
        try:
            loaded = _load(config, lambda message, fraction: self.events.progress("model", message, fraction))
        except Exception as exc:  # ModelLoadError, and anything a broken checkpoint raises
            reason = str(exc) if isinstance(exc, ModelLoadError) else f"{type(exc).__name__}: {exc}"
            with self._lock:
                if self._current(generation):
                    self.state, self.error = "failed", reason
            self.events.failed("model", f"lookahead: cannot load model {config.model!r}: {reason}")
            if raise_errors:
                raise
            return
        self.events.progress("model", "preparing the tokenizer's tables", 0.95)
        _warm_up(loaded.tokenizer)
        threads, cost = None, None
        if loaded.model is not None:
            self.events.progress("model", "measuring forward passes", 0.97)
            threads, cost = _tune(loaded, config.threads)
        with self._lock:
            if not self._current(generation):
                return
            stop_ids = stop_token_ids(loaded.tokenizer)
            self._slot = ModelSlot(loaded, config.model_key(), generation, stop_ids, cost, threads)
            self._close_decoder()
            self._builder = None
            self.state = "ready"
        seconds = time.perf_counter() - started
        self.events.finished("model", f"{config.model} ready on {loaded.device} in {seconds:.1f} s")
        self._build_index(generation)

    def _build_index(self, generation: int) -> None:
        config = self.config
        if not config.index_enabled or not self.roots:
            return
        try:
            index = _make_index(self.roots, self.model.tokenizer, config)
            index.build(progress=lambda message, fraction: self.events.progress("index", message, fraction))
        except Exception as exc:
            log.exception("indexing failed")
            self.events.failed("index", f"lookahead: indexing failed: {exc}")
            return
        with self._lock:
            if not self._current(generation) or self._index is not None:
                _stop_index(index)
                return
            self._index, self._index_ready = index, True
        index.add_listener(lambda path, text: self._snippet_text(Path(path), text))
        try:
            index.start_watching()
        except Exception:
            log.exception("watching the workspace failed")
        self.events.finished("index", "workspace indexed")

    def _apply_document(self, path: Path, text: str | None) -> None:
        self._snippet_text(path, text)
        if self.on_context_change is not None:
            self.on_context_change(path)
        index = self._index
        if index is not None and self._index_ready:
            if text is None:
                index.close_document(path)
            else:
                index.update_document(path, text)


# ---- wiring to the decoder/ and context/ packages (one place to adapt to their signatures) ------------


def _load(config: Config, progress: Callable[[str, float | None], None]) -> LoadedModel:
    """The model (local decoders), or only its tokenizer (remote: the engine holds the weights)."""
    from decoder.model import LoadedModel, load_model

    if config.local:
        return load_model(
            config.model,
            config.device,
            config.dtype,
            progress,
            prefill_dtype=config.prefill_dtype,
            weights=config.weights,
        )
    import torch
    from transformers import AutoTokenizer

    from decoder.model import ModelLoadError, resolve_spec

    started = time.perf_counter()
    where, source = resolve_spec(config.model, progress)
    try:
        tokenizer = AutoTokenizer.from_pretrained(where, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot load the tokenizer of {config.model!r} from {where}: {exc}") from exc
    seconds = time.perf_counter() - started
    return LoadedModel(None, tokenizer, torch.device("cpu"), torch.float32, config.model, seconds, source, where)


def _make_backend(loaded: LoadedModel, config: Config, events: EngineEvents, cost: CostModel | None) -> Backend:
    """The local decoder (lookahead or greedy) over the model, or the remote engine's client."""
    from decoder.backend import LocalBackend, local_backend, remote_backend

    if config.decoder == "remote":
        remote = config.remote
        assert remote is not None  # parse_config guarantees it
        return remote_backend(
            remote,
            loaded.tokenizer,
            on_outage=lambda message: events.notice(message, True),
            on_recovery=lambda: events.notice(f"lookahead: the remote engine at {remote.url} is back", False),
        )
    if config.decoder == "greedy":
        return local_backend(loaded.model, "greedy")
    from decoder.lookahead import LookaheadConfig, LookaheadDecoder

    options: dict[str, Any] = {"window": config.window, "ngram": config.ngram, "draft_len": config.draft_length}
    if config.verify is not None:
        options["verify"] = config.verify
    return LocalBackend(LookaheadDecoder(loaded.model, LookaheadConfig(**options), cost), "lookahead")


def choose_threads(time_pass: Callable[[], float], candidates: Sequence[int], set_threads: Callable[[int], Any]) -> int:
    """The candidate thread count whose pass is fastest (one untimed pass each, then the better of two).

    On a CPU shared with other busy processes one thread can be several times faster than one per core
    (measured: docs/benchmarks.md), so the choice is measured, not assumed. A candidate whose untimed pass
    is already three times slower than the best is not timed further."""
    best, best_s = candidates[0], float("inf")
    for threads in candidates:
        set_threads(threads)
        first = time_pass()
        if first > 3 * best_s:
            continue
        seconds = min(first, time_pass(), time_pass())
        if seconds < best_s:
            best, best_s = threads, seconds
    set_threads(best)
    return best


def _tune(loaded: LoadedModel, threads: int | None) -> tuple[int | None, CostModel | None]:
    """Thread count (CPU, unless set) and the measured cost model; (None, None) if measuring fails."""
    import torch

    from decoder.forward import forward, measure_cost
    from decoder.kv import PrefixKV
    from decoder.model import configure_torch_threads, physical_cores

    try:
        if loaded.device.type == "cpu" and threads is None:
            torch.set_num_threads(1)  # the smallest candidate first: contended cores make more threads slower
        kv = PrefixKV()
        forward(loaded.model, kv, [10], last_only=True)

        def time_pass() -> float:
            t0 = time.perf_counter()
            forward(loaded.model, kv, [20])[-1, 0].item()
            kv.cache.crop(-1)
            return time.perf_counter() - t0

        if loaded.device.type == "cpu" and threads is None:
            started = time.perf_counter()
            threads = choose_threads(time_pass, sorted({1, physical_cores()}), configure_torch_threads)
            log.info("torch threads: %d (chosen in %.2f s)", threads, time.perf_counter() - started)
        elif loaded.device.type == "cpu":
            threads = torch.get_num_threads()
        started = time.perf_counter()
        cost = measure_cost(loaded.model)
        log.info("cost model %s (measured in %.2f s)", cost.points, time.perf_counter() - started)
        return threads, cost
    except Exception:
        log.exception("measuring forward passes failed; using the default cost model")
        return threads, None


def _warm_up(tokenizer: Any) -> None:
    """Build what the first completion would otherwise wait for (the healing vocabulary, a grammar)."""
    from context.healing import vocab_index
    from context.syntax import analyze

    vocab_index(tokenizer)
    analyze("x = 1\n", 5, "python")


def _make_index(roots: Sequence[Path], tokenizer: Any, config: Config) -> WorkspaceIndex:
    from context.workspace import WorkspaceConfig
    from context.workspace_index import WorkspaceIndex

    settings = WorkspaceConfig(include=config.include, exclude=config.exclude)
    return WorkspaceIndex.for_tokenizer(list(roots), tokenizer, settings)


def _stop_index(index: WorkspaceIndex) -> None:
    try:
        index.stop()
        index.save()
    except Exception:
        log.exception("saving the workspace index failed")
