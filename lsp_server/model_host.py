"""The model host: loads (and reloads) the model, tunes it for the machine and makes its backend.

A load runs on a daemon thread (a load in flight never delays exit) or, for the ``complete`` command, in the
caller. ``"model": "auto"`` picks the model first (:func:`load_setting`: the rule in ``lsp_server/model_choice.py``,
the 1.5B's figures from ``lsp_server/model_figures.py``, measured with it loaded where none are stored) and falls
back to the 0.5B, with a warning, where the chosen 1.5B fails to load. After loading a local model it picks
torch's CPU thread count and measures the forward-pass cost model by timing a few passes (about a second) before
the model is declared ready. Each load gets a generation number;
a load whose generation is no longer current discards its result. The backend for the current settings is kept
while they stay the same; only the scheduler's model worker calls :meth:`ModelHost.backend`.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias, cast

from lookahead_lsp.context.healing import vocab_index
from lookahead_lsp.context.prompt import PromptBuilder, PromptLayout, layout_builder
from lookahead_lsp.context.syntax import analyze
from lookahead_lsp.decoder.backend import Backend, local_backend, remote_backend
from lookahead_lsp.lsp_server import memory
from lookahead_lsp.lsp_server.config import BlockEnd, Config
from lookahead_lsp.lsp_server.model_choice import (
    AUTO,
    LARGE,
    SMALL,
    Choice,
    Figures,
    carried_base,
    decide,
    fell_back,
    given,
    large_not_installed,
    untimed,
)

if TYPE_CHECKING:
    from lookahead_lsp.decoder.policy import CostModel
    from lookahead_lsp.decoder.runtime.model import LoadedModel

log = logging.getLogger(__name__)

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
    generation: int
    stop_ids: frozenset[int]  # end-of-completion token ids (computed once: get_vocab is slow)
    cost: CostModel | None = None  # measured forward-pass cost (local models); None: the device's default
    threads: int | None = None  # torch intra-op threads chosen at load
    choice: Choice | None = None  # which model the ``model`` setting came to and why


class ModelHost:
    """The model, its tuning and its backend for the current settings."""

    def __init__(self, config: Config, events: EngineEvents) -> None:
        self.config = config
        self.events = events
        self.state: ModelState = "idle"
        self.error: str | None = None
        self._slot: ModelSlot | None = None
        self._generation = 0
        self._backend: tuple[tuple[Any, ...], Backend] | None = None
        self._builders: dict[bool, tuple[tuple[Any, ...], PromptBuilder]] = {}  # by grown
        self._lock = threading.Lock()

    # ---- loading ---------------------------------------------------------------------------------

    def start(self, on_ready: Callable[[int], None]) -> None:
        """Load the model on a background thread; then ``on_ready(generation)`` on that thread."""
        generation = self._begin()
        args = (generation, on_ready)
        threading.Thread(target=self._load_in_background, args=args, name="engine-loader", daemon=True).start()

    def load_now(self, on_ready: Callable[[int], None]) -> None:
        """Load synchronously (the ``complete`` command); raises ``ModelLoadError`` on failure."""
        self._load(self._begin(), on_ready, raise_errors=True)

    def stop(self) -> None:
        """Discard a load in flight and close the backend. Idempotent."""
        with self._lock:
            self._generation += 1
        self._close_backend()

    @property
    def generation(self) -> int:
        """The latest load's number (a stop also moves it on)."""
        return self._generation

    def current(self, generation: int) -> bool:
        """Whether ``generation`` is the latest load (not superseded by another load or a stop)."""
        return generation == self._generation

    def apply_config(self, config: Config) -> None:
        """Take new settings (the caller reloads when the model's settings changed)."""
        previous, self.config = self.config, config
        if config.threads != previous.threads and config.threads is not None and config.local:
            configure_threads(config.threads)

    def _load_in_background(self, generation: int, on_ready: Callable[[int], None]) -> None:
        """The loader thread: a load that a stop (or another load) superseded ends quietly, whatever failed under
        it (at exit the interpreter is torn down under a daemon thread: an import or a torch call then fails)."""
        try:
            self._load(generation, on_ready)
        except BaseException:
            if self.current(generation):
                raise

    def _warn(self, message: str) -> None:
        """A problem the load got past (the 0.5B in place of a 1.5B that failed): logged and shown."""
        log.warning("%s", message)
        self.events.notice(f"lookahead: {message}", True)

    def _begin(self) -> int:
        with self._lock:
            self._generation += 1
            self.state, self.error = "loading", None
            return self._generation

    def _load(self, generation: int, on_ready: Callable[[int], None], raise_errors: bool = False) -> None:
        memory.mark("start")  # the memory breakdown's runtime: before torch is imported
        # deferred: decoder.model imports torch (seconds); the daemon answers `initialize` before it loads
        from lookahead_lsp.decoder.runtime.model import stop_token_ids

        config = self.config
        started = time.perf_counter()
        self.events.progress("model", f"loading {config.model}", 0.0)
        if config.local:
            configure_threads(config.threads)  # inter-op threads: only before torch's first parallel work
        try:
            choice, loaded, tuned = load_setting(
                config, lambda message, fraction: self.events.progress("model", message, fraction), self._warn
            )
        except Exception as exc:  # ModelLoadError, and anything a broken checkpoint raises
            reason = _error_line(exc)
            with self._lock:
                if self.current(generation):
                    self.state, self.error = "failed", reason
            self.events.failed("model", f"lookahead: cannot load model {config.model!r}: {reason}")
            if raise_errors:
                raise
            return
        self.events.progress("model", "preparing the tokenizer's tables", 0.95)
        warm_up(loaded.tokenizer)
        threads, cost = tuned if tuned is not None else (None, None)
        if loaded.model is not None and tuned is None:
            self.events.progress("model", "measuring forward passes", 0.97)
            threads, cost = tune(loaded, config.threads)
        with self._lock:
            if not self.current(generation):
                return
            self._slot = ModelSlot(loaded, generation, stop_token_ids(loaded.tokenizer), cost, threads, choice)
            self._builders = {}
            self.state = "ready"
        self._close_backend()
        memory.trim()  # the load's scratch (conversion, tile building, the passes measured) given back
        seconds = time.perf_counter() - started
        self.events.finished("model", f"{loaded.spec} ready on {loaded.device} in {seconds:.1f} s")
        on_ready(generation)

    # ---- the loaded model -------------------------------------------------------------------------

    @property
    def loaded(self) -> bool:
        return self._slot is not None

    @property
    def model(self) -> LoadedModel:
        return self._loaded_slot().loaded

    @property
    def tokenizer(self) -> Any:
        return self._loaded_slot().loaded.tokenizer

    @property
    def stop_ids(self) -> frozenset[int]:
        return self._loaded_slot().stop_ids

    def _loaded_slot(self) -> ModelSlot:
        slot = self._slot
        if slot is None:
            raise RuntimeError("the model is not loaded")
        return slot

    def backend(self) -> Backend:
        """The backend for the current settings over the current model; kept while they stay the same."""
        slot = self._loaded_slot()
        key = (slot.generation, *self.config.decoder_key())
        if self._backend is None or self._backend[0] != key:
            self._close_backend()
            self._backend = (key, make_backend(slot.loaded, self.config, self.events, slot.cost))
        return self._backend[1]

    def _close_backend(self) -> None:
        current, self._backend = self._backend, None
        if current is not None:
            current[1].close()

    def prompt_settings(self) -> tuple[str, int]:
        """The (layout, token budget) in force: the settings, or the defaults for the model's device."""
        loaded = self._loaded_slot().loaded
        return self.config.prompt_settings(loaded.device.type if self.config.local else "remote", loaded.spec)

    def block_end(self) -> BlockEnd:
        """Where a block ends for the model loaded: the setting, or the model's own (``Config.block_end_for``)."""
        return self.config.block_end_for(self._loaded_slot().loaded.spec)

    def _anchored(self, slot: ModelSlot) -> bool:
        """Whether prompts follow their documents' anchors and may grow in idle time: tokens generated here on a
        CPU, where a moved prompt head costs seconds."""
        return self.config.local and slot.loaded.device.type == "cpu"

    def idle_budget(self) -> int | None:
        """The token budget a document's prompts grow to in idle time (``Config.idle_budget``), None where they
        do not grow: a budget no larger than the keystrokes', or prompts not anchored (on a GPU a prefill costs
        milliseconds and the budget is the longest already; a remote engine keeps its own cache)."""
        slot = self._loaded_slot()
        if not self._anchored(slot):
            return None
        idle = self.config.idle_budget(slot.loaded.device.type, slot.loaded.spec)
        return idle if idle > self.prompt_settings()[1] else None

    def prompt_builder(self, grown: bool = False) -> PromptBuilder:
        """The prompt builder for the current tokenizer and budget (it caches snippet token ids); ``grown``: for
        prompts on the idle-time budget (:meth:`idle_budget`). On a CPU its prefixes follow their documents'
        anchors (``context/anchors.py``): a moved prompt head costs seconds."""
        slot = self._loaded_slot()
        layout, total = self.prompt_settings()
        idle = self.idle_budget() if grown else None
        key = (slot.generation, layout, total, idle, self.config.local)
        held = self._builders.get(grown)
        if held is None or held[0] != key:
            heal = self.config.local  # remote engines cannot force the first tokens
            anchored = self._anchored(slot)
            grown_from = total if idle is not None else None
            named = cast(PromptLayout, layout)  # a name the settings checked
            builder = layout_builder(slot.loaded.tokenizer, named, idle or total, heal, anchored, grown_from)
            held = self._builders[grown] = (key, builder)
        return held[1]

    def describe(self) -> dict[str, Any]:
        """The model's state for ``lookahead.stats``."""
        slot = self._slot
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
                choice=slot.choice.to_json() if slot.choice is not None else None,
            )
            layout, budget = self.prompt_settings()
            info.update(promptLayout=layout, tokenBudget=budget, idleTokenBudget=self.idle_budget())
            info.update(blockEnd=self.block_end())
        backend = self._backend[1] if self._backend is not None else None
        described = backend.describe() if backend is not None else None
        if described is not None:
            info["remote"] = described
        return info


# ---- from settings to the decoder/ package (one place to adapt to its signatures) ---------------------


def load(config: Config, progress: Callable[[str, float | None], None]) -> LoadedModel:
    """The model (local decoders), or only its tokenizer (remote: the engine holds the weights)."""
    # deferred: torch and transformers take seconds to import; the daemon answers `initialize` first
    import torch

    from lookahead_lsp.decoder.runtime.model import LoadedModel, ModelLoadError, load_model, resolve_spec
    from lookahead_lsp.decoder.runtime.tokenizer import load_tokenizer

    memory.mark("imports")
    if config.local:
        return load_model(
            config.model,
            config.device,
            config.dtype,
            progress,
            prefill_dtype=config.prefill_dtype,
            weights=config.weights,
        )
    started = time.perf_counter()
    where, source = resolve_spec(config.model, progress)
    try:
        tokenizer = load_tokenizer(where, source)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot load the tokenizer of {config.model!r} from {where}: {exc}") from exc
    seconds = time.perf_counter() - started
    return LoadedModel(None, tokenizer, torch.device("cpu"), torch.float32, config.model, seconds, source, where)


Tuned: TypeAlias = "tuple[int | None, CostModel | None]"
"""(threads, cost model) of :func:`tune`."""


def load_setting(
    config: Config, progress: Callable[[str, float | None], None], warn: Callable[[str], None]
) -> tuple[Choice, LoadedModel, Tuned | None]:
    """The model the ``model`` setting comes to (``auto``: :func:`choose`), loaded, and its tuning where choosing
    tuned it already. A chosen 1.5B or base model that fails to load gives the 0.5B (``warn`` says so); other
    failures raise."""
    if config.model != AUTO:
        return given(config.model), load(config, progress), None
    choice, measured = choose(config, progress, warn)
    log.info("%s", choice.log_line())
    if measured is not None:
        return choice, measured[0], measured[1]
    try:
        return choice, load(dataclasses.replace(config, model=choice.spec), progress), None
    except Exception as exc:
        if choice.spec == SMALL:
            raise
        warn(f"{choice.spec} failed to load ({_error_line(exc)}); using the 0.5B")
        choice = fell_back(choice, _error_line(exc))
    return choice, load(dataclasses.replace(config, model=SMALL), progress), None


def choose(
    config: Config, progress: Callable[[str, float | None], None], warn: Callable[[str], None]
) -> tuple[Choice, tuple[LoadedModel, Tuned] | None]:
    """The choice for ``auto`` (``lsp_server/model_choice.py``), and the chosen model loaded and tuned where
    timing it loaded it: first a downloaded base model this machine carries (:func:`choose_base`), else the 1.5B
    Instruct where installed and fast enough, else the 0.5B. Figures come from the store while they hold
    (``model_figures.verdict``), else from timing the model here, loaded (stored for later starts); a 1.5B
    that fails to load or run while timed gives the 0.5B with a warning."""
    if not config.local:
        return Choice(SMALL, "a remote engine decodes: only the tokenizer, the same for both sizes"), None
    base = choose_base(config, progress, warn)
    if base is not None:
        return base
    missing = large_not_installed()
    if missing is not None:
        return decide(missing, None), None
    from lookahead_lsp.decoder.weights.embedded import EMBEDDED_1_5B  # deferred: torch (see `load`)

    timed = timed_figures(config, LARGE, EMBEDDED_1_5B.sha256, progress)
    if isinstance(timed, str):
        warn(f"the 1.5B failed to load or run ({timed}); using the 0.5B")
        return untimed(timed), None
    choice = decide(None, timed.figures)
    return choice, timed.kept(choice)


def choose_base(
    config: Config, progress: Callable[[str, float | None], None], warn: Callable[[str], None]
) -> tuple[Choice, tuple[LoadedModel, Tuned] | None] | None:
    """The largest downloaded base model this machine carries (``model_choice.carried_base``; a larger one timed
    here as the 1.5B is), with it loaded where timing loaded it; None where none is downloaded or carried."""
    from lookahead_lsp.decoder.weights.base_models import installed_bases, installed_sha256

    for model in reversed(installed_bases()):
        sha256 = installed_sha256(model)
        if model.size == "0.5B" or sha256 is None:
            choice = carried_base(model, None)
            if choice is not None:
                return choice, None
            continue
        timed = timed_figures(config, model.name, sha256, progress)
        if isinstance(timed, str):
            warn(f"the downloaded {model.name} failed to load or run ({timed}); not chosen")
            continue
        choice = carried_base(model, timed.figures)
        if choice is not None:
            return choice, timed.kept(choice)
        log.info("the downloaded %s is too slow here: %s", model.name, timed.figures.describe())
        timed.kept(None)
    return None


@dataclass
class Timed:
    """A model's figures on this machine, and the model itself where timing loaded it (until :meth:`kept`)."""

    figures: Figures
    held: tuple[LoadedModel, Tuned] | None = None

    def kept(self, choice: Choice | None) -> tuple[LoadedModel, Tuned] | None:
        """The model timing loaded, where it is the one chosen; else its memory given back before the next
        model loads (None)."""
        held, self.held = self.held, None
        if held is None or (choice is not None and held[0].spec == choice.spec):
            return held
        del held
        gc.collect()
        memory.trim()
        return None


def timed_figures(config: Config, spec: str, sha256: str, progress: Callable[[str, float | None], None]) -> Timed | str:
    """``spec``'s figures on this machine: the stored ones while they hold (``model_figures.verdict``: not
    older than the kernel build, not timed under load where the machine is quiet now), else timed with it
    loaded (and tuned), returned loaded; a one-line error where it fails to load or run."""
    from lookahead_lsp.lsp_server import model_figures  # deferred: torch (see `load`)

    path = model_figures.figures_path(config, sha256)
    record = model_figures.stored(path)
    judged = model_figures.verdict(record, model_figures.kernel_mtime(), model_figures.machine_busy(1))
    if judged.keep and record is not None:
        log.log(logging.WARNING if judged.flagged else logging.INFO, "%s's figures (%s): %s", spec, path, judged.reason)
        return Timed(record.figures)
    log.info("timing %s on this machine: %s", spec, judged.reason)
    progress(f"timing {spec} on this machine to choose the model", None)
    try:
        loaded = load(dataclasses.replace(config, model=spec), progress)
        tuned = tune(loaded, config.threads)
        record = model_figures.measure(loaded.model, config.prompt_settings(loaded.device.type)[1])
    except Exception as exc:  # ModelLoadError, a damaged cache, anything a pass raises
        return _error_line(exc)
    model_figures.store(path, record)
    if record.under_load():
        log.warning("%s timed under load (%s): timed again at a quieter start", spec, record.load_words())
    log.info("%s timed on this machine: %s (stored in %s)", spec, record.figures.describe(), path)
    return Timed(record.figures, (loaded, tuned))


def chosen_spec(spec: str, device: str = "auto") -> str:
    """The model a command's ``--model`` names: ``auto`` chosen as the daemon chooses (logged), else itself."""
    if spec != AUTO:
        return spec
    configure_threads(None)
    config = Config(model=AUTO, device=device)
    choice, _ = choose(config, lambda message, _fraction: log.info("%s", message), lambda text: log.warning("%s", text))
    log.info("%s", choice.log_line())
    return choice.spec


def _error_line(exc: BaseException) -> str:
    from lookahead_lsp.decoder.runtime.model import ModelLoadError  # deferred: torch (see `load`)

    return str(exc) if isinstance(exc, ModelLoadError) else f"{type(exc).__name__}: {exc}"


def make_backend(loaded: LoadedModel, config: Config, events: EngineEvents, cost: CostModel | None) -> Backend:
    """The local decoder (lookahead or greedy) over the model, or the remote engine's client."""
    if config.decoder == "remote":
        remote = config.remote
        assert remote is not None  # parse_config guarantees it
        return remote_backend(
            remote,
            loaded.tokenizer,
            on_outage=lambda message: events.notice(message, True),
            on_recovery=lambda: events.notice(f"lookahead: the remote engine at {remote.url} is back", False),
        )
    from lookahead_lsp.decoder.lookahead import LookaheadConfig  # deferred: imports torch (see `load`)

    options: dict[str, Any] = {"window": config.window, "ngram": config.ngram, "draft_len": config.draft_length}
    if config.verify is not None:
        options["verify"] = config.verify
    return local_backend(loaded.model, config.decoder, LookaheadConfig(**options), cost, config.kv_slots)


def configure_threads(threads: int | None) -> None:
    """torch's thread counts (None: the physical cores)."""
    from lookahead_lsp.decoder.runtime.model import configure_torch_threads  # deferred: imports torch (see `_load`)

    configure_torch_threads(threads)


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


def tune(loaded: LoadedModel, threads: int | None) -> tuple[int | None, CostModel | None]:
    """Thread count (CPU, unless set) and the measured cost model; (None, None) if measuring fails."""
    # deferred: torch (see `load`)
    import torch

    from lookahead_lsp.decoder.cost_table import machine_cost
    from lookahead_lsp.decoder.forward import forward
    from lookahead_lsp.decoder.kv import PrefixKV
    from lookahead_lsp.decoder.runtime.model import configure_torch_threads, physical_cores

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
        cost = machine_cost(loaded.model)  # this machine's, stored beside the kernel: measured once
        log.info("cost model %s (in %.2f s)", cost.points, time.perf_counter() - started)
        return threads, cost
    except Exception:
        log.exception("measuring forward passes failed; using the default cost model")
        return threads, None


def warm_up(tokenizer: Any) -> None:
    """Build what the first completion would otherwise wait for (the healing vocabulary, a grammar)."""
    vocab_index(tokenizer)
    analyze("x = 1\n", 5, "python")
