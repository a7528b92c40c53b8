"""A loaded model's latency figures on this machine (``lsp_server/model_choice.py``'s :class:`Figures`): timed once,
stored beside the native kernels as the pass-cost table is (``decoder/cost_table.py``), read back by later starts.

The figures depend on the machine (processor, flags, torch threads and version, device), the model, the kernel
build (its file name carries its level and sources' key), the Python that runs a pass (``cost_table.pass_code``)
and the settings that change what a pass reads
(``device``, ``dtype``, ``prefillDtype``, ``weights``): the file's name is a hash of all of them, so a change of
any one measures again. Timing: the CPU's prompt budget prefilled once, then the fastest of :data:`ROUNDS` tail
prefills and of :data:`ROUNDS` one-token passes after it (the fastest: the round least disturbed by other work).

Stored figures expire (:func:`verdict`, a pure function of the stored record, the kernel library's mtime and the
machine's load now): figures timed before the kernel library was built (a rebuild of the same sources keeps its
name, not its code's timing) are timed again, and so are figures of an older file that recorded no load. Each
record carries the machine's load when it was timed (:func:`machine_busy`: other work's runnable threads per CPU,
the 1-minute load average less this process's own threads) and a self-check of the timing's noise (the slowest
of the one-token rounds over the fastest): over :data:`BUSY_LIMIT` or :data:`SPREAD_LIMIT` the figures were timed
under load, are not trusted, and are timed again at the next start where the machine is quiet (at most
:data:`BUSY_LIMIT`); on a machine still busy they are kept and the log flags them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lookahead_lsp.decoder.weights.cache import write_json
from lookahead_lsp.lsp_server.config import Config
from lookahead_lsp.lsp_server.model_choice import TAIL_TOKENS, Figures

log = logging.getLogger(__name__)

VERSION = 1  # of the file and of how it is timed: a new one measures again
ROUNDS = 3
BUSY_LIMIT = 0.5  # other work's runnable threads per CPU above which the machine is busy
SPREAD_LIMIT = 1.5  # the slowest one-token round over the fastest above which the timing was disturbed


@dataclass(frozen=True)
class Record:
    """Stored figures and how they were timed."""

    figures: Figures
    measured_at: float  # seconds since the epoch
    busy: float | None = None  # :func:`machine_busy` when timed (None: an older file that did not record it)
    spread: float | None = None  # the slowest one-token round over the fastest

    def under_load(self) -> bool:
        """Whether the figures were timed while other work ran (or the rounds disagree as if it did)."""
        return (self.busy or 0.0) > BUSY_LIMIT or (self.spread or 1.0) > SPREAD_LIMIT

    def load_words(self) -> str:
        busy = "unknown" if self.busy is None else f"{self.busy:.2f}"
        spread = "unknown" if self.spread is None else f"{self.spread:.2f}x"
        return f"load {busy} other threads a CPU, rounds' spread {spread}"


@dataclass(frozen=True)
class Verdict:
    """Whether stored figures serve this start, and why in words; ``flagged``: kept though timed under load."""

    keep: bool
    reason: str
    flagged: bool = False


def verdict(record: Record | None, kernel_mtime: float | None, busy_now: float) -> Verdict:
    """Keep ``record`` or time the model again (module docstring): ``kernel_mtime`` is the native kernel
    library's mtime (None: no native kernel), ``busy_now`` :func:`machine_busy` at this start."""
    if record is None:
        return Verdict(False, "no figures stored for this machine and settings")
    if kernel_mtime is not None and record.measured_at < kernel_mtime:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(kernel_mtime))
        return Verdict(False, f"the figures are older than the kernel build ({when} UTC)")
    if record.busy is None:
        return Verdict(False, "the figures do not say how busy the machine was when they were timed")
    if not record.under_load():
        return Verdict(True, f"timed on a quiet machine after the kernel build ({record.load_words()})")
    if busy_now <= BUSY_LIMIT:
        return Verdict(False, f"timed under load ({record.load_words()}); the machine is quiet now ({busy_now:.2f})")
    return Verdict(
        True,
        f"timed under load ({record.load_words()}) and the machine is still busy ({busy_now:.2f}): "
        "kept, and timed again at a quieter start",
        flagged=True,
    )


def machine_busy(own_threads: float) -> float:
    """Other work's runnable threads per CPU: the 1-minute load average less ``own_threads`` (this process's,
    as far as they ran), over the CPUs; 0.0 where the load average is unknown (not on this system)."""
    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):
        return 0.0
    return max(0.0, load - own_threads) / max(os.cpu_count() or 1, 1)


def kernel_mtime() -> float | None:
    """When the native kernel library in use was built (its file's mtime); None without one."""
    from lookahead_lsp.decoder.kernels.woq_native import native_kernel  # deferred: torch (see figures_path)

    kernel = native_kernel()
    try:
        return kernel.library.stat().st_mtime if kernel is not None else None
    except OSError:
        return None


def figures_path(config: Config, sha256: str) -> Path:
    """Where the figures of the model with GGUF ``sha256`` under ``config``'s settings live on this machine (the
    torch threads as they are now: call after the load's thread setting, before the model is tuned)."""
    # deferred: torch (cost_table, model) takes seconds to import; the daemon answers `initialize` first
    from lookahead_lsp.decoder.cost_table import kernel_folder, machine_description, pass_code
    from lookahead_lsp.decoder.kernels.woq_native import native_kernel
    from lookahead_lsp.decoder.runtime.model import resolve_device

    kernel = native_kernel()
    parts = [
        f"v{VERSION}",
        sha256,
        machine_description(resolve_device(config.device)),
        kernel.library.name if kernel is not None else "no native kernel",
        pass_code(),
        repr((config.device, config.dtype, config.prefill_dtype, config.weights)),
    ]
    return kernel_folder() / f"figures-{hashlib.sha256(chr(10).join(parts).encode()).hexdigest()[:20]}.json"


def _optional(value: Any) -> float | None:
    return None if value is None else float(value)


def stored(path: Path) -> Record | None:
    """The record stored at ``path``; None where there is none or it cannot be read."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("version") != VERSION or data.get("tail_tokens") != TAIL_TOKENS:
            return None
        threads = data.get("threads")
        figures = Figures(float(data["one_token_s"]), float(data["tail_prefill_s"]), int(threads) if threads else None)
        measured_at = float(data.get("measured_at", 0.0))  # an older file: as old as can be (timed again)
        return Record(figures, measured_at, _optional(data.get("busy")), _optional(data.get("spread")))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning("model figures %s unreadable (%s): measuring again", path, exc)
        return None


def store(path: Path, record: Record) -> None:
    """Write ``record`` to ``path``, whole or not at all; a failure is logged, never raised."""
    figures = record.figures
    data = {
        "version": VERSION,
        "tail_tokens": TAIL_TOKENS,
        "one_token_s": round(figures.one_token_s, 5),
        "tail_prefill_s": round(figures.tail_prefill_s, 5),
        "threads": figures.threads,
        "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.measured_at)),
        "measured_at": record.measured_at,
        "busy": None if record.busy is None else round(record.busy, 3),
        "spread": None if record.spread is None else round(record.spread, 3),
    }
    write_json(path, data, "the model figures")


def measure(model: Any, context: int, rounds: int = ROUNDS) -> Record:
    """Time ``model`` here: a ``context``-token prompt prefilled, then the fastest tail prefill of
    :data:`TAIL_TOKENS` and the fastest one-token pass after it (the cache left at the prompt after each), with
    the machine's load and the one-token rounds' spread."""
    import torch  # deferred (module docstring of figures_path)

    from lookahead_lsp.decoder.forward import forward, prefill
    from lookahead_lsp.decoder.kv import PrefixKV

    vocab = int(getattr(getattr(model, "config", None), "vocab_size", 0) or 256)
    ids = [(i * 7919) % vocab for i in range(context + TAIL_TOKENS)]  # which ids does not change the time
    kv = PrefixKV()
    prefill(model, kv, ids[:context])
    tail, ones = float("inf"), []
    for _ in range(rounds):
        started = time.perf_counter()
        prefill(model, kv, ids[context:])
        tail = min(tail, time.perf_counter() - started)
        kv.truncate(context)
        started = time.perf_counter()
        forward(model, kv, ids[context : context + 1])[-1, 0].item()  # .item() waits for an accelerator
        ones.append(time.perf_counter() - started)
        kv.cache.crop(-1)
    threads = torch.get_num_threads()
    figures = Figures(min(ones), tail, threads)
    return Record(figures, time.time(), machine_busy(threads), max(ones) / max(min(ones), 1e-9))
