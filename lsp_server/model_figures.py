"""A loaded model's latency figures on this machine (``lsp_server/model_choice.py``'s :class:`Figures`): timed once,
stored beside the native kernels as the pass-cost table is (``decoder/cost_table.py``), read back by later starts.

The figures depend on the machine (processor, flags, torch threads and version, device), the model, the kernel
build (its file name carries its level and sources' key), the Python that runs a pass (``cost_table.pass_code``)
and the settings that change what a pass reads
(``device``, ``dtype``, ``prefillDtype``, ``weights``): the file's name is a hash of all of them, so a change of
any one measures again. Timing: the CPU's prompt budget prefilled once, then the fastest of :data:`ROUNDS` tail
prefills and of :data:`ROUNDS` one-token passes after it (the fastest: the round least disturbed by other work).

Stored figures expire as every timing stored on this machine does (``decoder/timing_load.py``): timed again
when older than the kernel build or when they recorded no load, and when timed under load (other work's threads,
or the one-token rounds' spread) at the next start where the machine is quiet; on a machine still busy they are
kept and the log flags them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lookahead_lsp.decoder.timing_load import Load, Verdict, built_at, machine_busy, read_stamp, rounds_spread, stamp
from lookahead_lsp.decoder.timing_load import verdict as timing_verdict
from lookahead_lsp.decoder.weights.cache import write_json
from lookahead_lsp.lsp_server.config import Config
from lookahead_lsp.lsp_server.model_choice import TAIL_TOKENS, Figures

log = logging.getLogger(__name__)

VERSION = 1  # of the file and of how it is timed: a new one measures again
ROUNDS = 3


@dataclass(frozen=True)
class Record:
    """Stored figures and how they were timed."""

    figures: Figures
    measured_at: float  # seconds since the epoch
    busy: float | None = None  # :func:`machine_busy` when timed (None: an older file that did not record it)
    spread: float | None = None  # the slowest one-token round over the fastest

    @property
    def load(self) -> Load:
        return Load(self.busy, self.spread)

    def under_load(self) -> bool:
        """Whether the figures were timed while other work ran (or the rounds disagree as if it did)."""
        return self.load.under_load()

    def load_words(self) -> str:
        return self.load.words()


def verdict(record: Record | None, kernel_mtime: float | None, busy_now: float) -> Verdict:
    """Keep ``record`` or time the model again (``decoder/timing_load.py``'s verdict): ``kernel_mtime`` is the
    native kernel library's mtime (None: no native kernel), ``busy_now`` :func:`machine_busy` at this start."""
    if record is None:
        return Verdict(False, "no figures stored for this machine and settings")
    return timing_verdict("the model figures", record.measured_at, record.load, kernel_mtime, busy_now)


def kernel_mtime() -> float | None:
    """When the native kernel library in use was built (its file's mtime); None without one."""
    from lookahead_lsp.decoder.kernels.woq_native import native_kernel  # deferred: torch (see figures_path)

    kernel = native_kernel()
    return built_at(kernel.library if kernel is not None else None)


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


def stored(path: Path) -> Record | None:
    """The record stored at ``path``; None where there is none or it cannot be read."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("version") != VERSION or data.get("tail_tokens") != TAIL_TOKENS:
            return None
        threads = data.get("threads")
        figures = Figures(float(data["one_token_s"]), float(data["tail_prefill_s"]), int(threads) if threads else None)
        measured_at, load = read_stamp(data)
        return Record(figures, measured_at, load.busy, load.spread)
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
        **stamp(record.measured_at, record.load),
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
    return Record(figures, time.time(), machine_busy(threads), rounds_spread(ones))
