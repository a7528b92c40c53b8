"""decoder: whether a timing stored on this machine was taken under load, and whether a start times it again.

A choice made by timing on a 2-core machine (the model ``auto`` takes, ``lsp_server/model_figures.py``; which
narrow passes take the kernel's two-tile loop, ``decoder/tile_pairs.py``; what a pass of n tokens costs against
one, ``decoder/cost_table.py``) is only as good as the quiet it was
timed in: other work's threads make every pass slower and every difference between two ways noise. Each stored
timing records the machine's load while it ran (:class:`Load`: :func:`machine_busy`, other work's runnable
threads per CPU, and the timing's own spread, the slowest round of its reference pass over the fastest), and
:func:`verdict` keeps it or times it again: never a timing older than the kernel build (a rebuild of the same
sources keeps its name, not its code's timing) or one that recorded no load, and a timing taken under load (over
:data:`BUSY_LIMIT` or :data:`SPREAD_LIMIT`) again at the next start where the machine is quiet; on a machine
still busy it is kept, flagged.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

log = logging.getLogger(__name__)

BUSY_LIMIT = 0.5  # other work's runnable threads per CPU above which the machine is busy
SPREAD_LIMIT = 1.5  # the slowest round of a timing's reference pass over the fastest above which it was disturbed


@dataclass(frozen=True)
class Load:
    """How busy the machine was while a timing ran (None: not recorded, an older file)."""

    busy: float | None = None  # :func:`machine_busy` when timed
    spread: float | None = None  # the slowest round of the reference pass over the fastest

    def under_load(self) -> bool:
        """Whether other work ran while it was timed (or its rounds disagree as if it did)."""
        return (self.busy or 0.0) > BUSY_LIMIT or (self.spread or 1.0) > SPREAD_LIMIT

    def words(self) -> str:
        busy = "unknown" if self.busy is None else f"{self.busy:.2f}"
        spread = "unknown" if self.spread is None else f"{self.spread:.2f}x"
        return f"load {busy} other threads a CPU, rounds' spread {spread}"


@dataclass(frozen=True)
class Verdict:
    """Whether a stored timing serves this start, and why in words; ``flagged``: kept though timed under load."""

    keep: bool
    reason: str
    flagged: bool = False


def verdict(what: str, measured_at: float, load: Load, kernel_mtime: float | None, busy_now: float) -> Verdict:
    """Keep a stored timing of ``what`` (words: "the model figures") taken at ``measured_at`` (seconds since the
    epoch) under ``load``, or time it again (module docstring);
    ``kernel_mtime``: the native kernel library's mtime (None: no native kernel), ``busy_now``
    :func:`machine_busy` at this start."""
    if kernel_mtime is not None and measured_at < kernel_mtime:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(kernel_mtime))
        return Verdict(False, f"{what}: older than the kernel build ({when} UTC)")
    if load.busy is None:
        return Verdict(False, f"{what}: stored without how busy the machine was when timed")
    if not load.under_load():
        return Verdict(True, f"timed on a quiet machine after the kernel build ({load.words()})")
    if busy_now <= BUSY_LIMIT:
        return Verdict(False, f"timed under load ({load.words()}); the machine is quiet now ({busy_now:.2f})")
    return Verdict(
        True,
        f"timed under load ({load.words()}) and the machine is still busy ({busy_now:.2f}): "
        "kept, and timed again at a quieter start",
        flagged=True,
    )


class Stamped(Protocol):
    """A stored timing: when it was taken and under what load."""

    @property
    def measured_at(self) -> float: ...

    @property
    def load(self) -> Load: ...


S = TypeVar("S", bound=Stamped)


def still_holds(
    what: str, path: Path, stored: S | None, library: Path | None, busy_now: float, missing: str = "none stored"
) -> tuple[S | None, str]:
    """``stored``, the timing of ``what`` read from ``path`` (None: there is none, ``missing`` says why), while
    :func:`verdict` keeps it for the native kernel ``library`` with the machine ``busy_now``, and why; else None and
    why it is timed again. One kept though timed under load is logged as a warning."""
    if stored is None:
        return None, missing
    judged = verdict(what, stored.measured_at, stored.load, built_at(library), busy_now)
    if judged.flagged:
        log.warning("%s (%s): %s", what, path, judged.reason)
    return (stored if judged.keep else None), judged.reason


def rounds_spread(seconds: Sequence[float]) -> float:
    """A timing's spread (:attr:`Load.spread`): the slowest of its reference pass's rounds over the fastest."""
    return max(seconds) / max(min(seconds), 1e-9)


def stamp(measured_at: float, load: Load) -> dict[str, Any]:
    """When a timing was taken and under what load, as a stored timing's file holds them (:func:`read_stamp`)."""
    return {
        "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(measured_at)),
        "measured_at": measured_at,
        "busy": None if load.busy is None else round(load.busy, 3),
        "spread": None if load.spread is None else round(load.spread, 3),
    }


def read_stamp(data: Mapping[str, Any]) -> tuple[float, Load]:
    """:func:`stamp`'s fields from a file's ``data``: an older file without them is as old as can be (timed
    again) and its load unknown. ValueError or TypeError for values that are not numbers."""
    busy, spread = data.get("busy"), data.get("spread")
    load = Load(None if busy is None else float(busy), None if spread is None else float(spread))
    return float(data.get("measured_at", 0.0)), load


def machine_busy(own_threads: float) -> float:
    """Other work's runnable threads per CPU: the 1-minute load average less ``own_threads`` (this process's,
    as far as they ran), over the CPUs; 0.0 where the load average is unknown (not on this system)."""
    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):
        return 0.0
    return max(0.0, load - own_threads) / max(os.cpu_count() or 1, 1)


def built_at(library: Path | None) -> float | None:
    """When the native kernel ``library`` was built (its file's mtime); None without one or where it is gone."""
    try:
        return library.stat().st_mtime if library is not None else None
    except OSError:
        return None
