"""decoder: this machine's pass-cost table, kept in the cache beside the built kernel.

What a pass of n tokens costs against a pass of one is a property of the CPU (or accelerator), the model, the
kernel level it runs on and the thread count: the draft policy (``decoder/policy.py``) must not start from a
table measured on another machine. The table is measured once per such combination (interleaved rounds of every
size, each size's fastest: the round least disturbed by other work), written beside the kernel library the model
runs on (the kernel cache of ``decoder/kernels/woq_native.py``; a model without the native kernel uses the same
folder) and read back by every later process: a cold process neither pays for the timing nor starts from a
constant. The decoders' live passes correct it (:meth:`CostModel.observe`: a level per timed size, which passes
of other sizes ease back to the timing) and the levels are written back beside the timed sizes every
:data:`decoder.policy.PERSIST_EVERY` live passes. The table records when it was timed and the machine's
load while it ran, and expires as every stored timing does (``decoder/timing_load.py``: older than the kernel
build, or timed under load and the machine quiet now); live write-backs keep the timing's own stamp.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import torch

from lookahead_lsp.decoder.policy import CostModel
from lookahead_lsp.decoder.tile_pairs import model_kernel, pairs_path, settle
from lookahead_lsp.decoder.timing_load import Load, machine_busy, read_stamp, rounds_spread, stamp, still_holds
from lookahead_lsp.decoder.weights.cache import write_json

log = logging.getLogger(__name__)

# of the file's layout and of how it is measured: a new one measures again (2: the stored one-token time stays the
# timed one; version 1 wrote back the live mean, which a busy run raised and the next process took as quiet; 3: with
# when it was timed and under what load, expiring as the other stored timings do; 4: the timed sizes and the live
# levels apart, so that a level no pass corrects goes back to its timing, decoder/policy.RELAX, not to where the
# live passes last left it)
VERSION = 4
SIZES = (1, 2, 3, 4, 5, 6, 8, 12, 16)  # tokens per timed pass
ROUNDS = 3  # interleaved rounds; each size keeps its fastest
ATTEMPTS = 3  # at most this many times ROUNDS where the timing is implausible (measure)
NOISE = 0.03  # a wider pass timed this much below a one-token pass is noise, not implausible


def kernel_library(model: torch.nn.Module) -> Path | None:
    """The native kernel library ``model``'s layers run on (its name carries the level and the build's key), or
    None for a model without it."""
    kernel = model_kernel(model)
    return kernel.library if kernel is not None else None


def kernel_folder() -> Path:
    """Where the native kernels are built (``decoder/kernels/woq_native.py``: ``native-v2`` under the cache root)."""
    from lookahead_lsp.decoder.weights.cache import cache_root  # what woq_native builds under

    return cache_root() / "native-v2"


def machine_description(device: torch.device) -> str:
    """What makes this machine's passes cost what they do, besides the model: processor, flags, threads, device."""
    parts = [platform.machine(), platform.processor(), _cpu_line("model name"), _cpu_line("flags")]
    parts += [f"threads={torch.get_num_threads()}", f"torch={torch.__version__}", str(device.type)]
    if device.type == "cuda":
        parts.append(torch.cuda.get_device_name(device))
    return "\n".join(parts)


def _cpu_line(field: str) -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(field):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def model_description(model: torch.nn.Module) -> str:
    """What makes this model's passes cost what they do: its shape, its weights' dtype and kinds of layers."""
    config = getattr(model, "config", None)
    shape = {
        key: getattr(config, key, None)
        for key in (
            "model_type",
            "hidden_size",
            "intermediate_size",
            "num_hidden_layers",
            "num_attention_heads",
            "num_key_value_heads",
            "vocab_size",
        )
    }
    kinds: dict[str, int] = {}
    for module in model.modules():
        kinds[type(module).__name__] = kinds.get(type(module).__name__, 0) + 1
    dtype = next(model.parameters()).dtype
    return json.dumps({"shape": shape, "dtype": str(dtype), "modules": sorted(kinds.items())}, sort_keys=True)


PASS_SOURCES = ("forward.py", "kv.py", "runtime")  # the Python a pass runs (decoder/), besides the kernel


@functools.cache
def pass_code() -> str:
    """A key of the Python that runs a pass (:data:`PASS_SOURCES`): a table or figures timed under other code
    (a prefill that took another path, say) are timed again, as a new kernel build's are by its name."""
    digest = hashlib.sha256()
    package = resources.files("lookahead_lsp.decoder")
    for name in PASS_SOURCES:
        entry = package.joinpath(name)
        files = [f for f in entry.iterdir() if f.name.endswith(".py")] if entry.is_dir() else [entry]
        for source in sorted(files, key=lambda f: f.name):
            digest.update(source.name.encode() + b"\0" + source.read_bytes())
    return digest.hexdigest()[:20]


def table_path(model: torch.nn.Module) -> Path:
    """The file of ``model``'s table on this machine: beside its kernel library, named after it (level and build
    key), and after this machine, the model and the pass's code."""
    device = next(model.parameters()).device
    library = kernel_library(model)
    folder, stem = (library.parent, library.stem) if library is not None else (kernel_folder(), device.type)
    key = f"v{VERSION}\n{machine_description(device)}\n{model_description(model)}\n{pass_code()}"
    return folder / f"cost-{stem}-{hashlib.sha256(key.encode()).hexdigest()[:20]}.json"


@dataclass(frozen=True)
class Timed:
    """A table as timed: the table, when (seconds since the epoch) and the machine's load while it ran."""

    cost: CostModel
    measured_at: float
    load: Load


def load(path: Path, pairs: int | None = None) -> Timed | None:
    """The table stored at ``path`` with its timing's stamp, or None where there is none, it cannot be read, or it
    was timed under another two-tile choice than ``pairs`` (:func:`settle_pairs`': its passes of 1 to 4 tokens ran
    another loop)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        points = tuple((int(n), float(c)) for n, c in data["points"])
        levels = [float(level) for level in data.get("levels") or [1.0] * len(points)]
        base = data.get("one_token_seconds")
        measured_at, timed_load = read_stamp(data)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        if not isinstance(exc, FileNotFoundError):
            log.warning("pass-cost table %s unreadable (%s): measuring again", path, exc)
        return None
    if data.get("version") != VERSION or not points or points[0] != (1, 1.0) or data.get("pairs") != pairs:
        return None
    if len(levels) != len(points) or not all(0.0 < level < 10.0 for level in levels):
        log.warning("pass-cost table %s has %s live levels for %d sizes: starting from its timing", path, levels,
                    len(points))  # fmt: skip
        levels = [1.0] * len(points)
    cost = CostModel(points, levels, one_token_seconds=float(base) if base else None)
    return Timed(cost, measured_at, timed_load)


def save(path: Path, timed: Timed, one_token_seconds: float | None = None, pairs: int | None = None) -> None:
    """Write ``timed``'s table (its timed sizes and, apart, their live levels) to ``path`` with its timing's stamp,
    whole or not at all, with ``one_token_seconds`` (default: the table's own base) as the time of a one-token pass
    on this machine at rest and ``pairs`` the two-tile choice its passes ran under; a failure is logged, never
    raised (the table is only an optimisation)."""
    cost = timed.cost
    base = cost.one_token_seconds if one_token_seconds is None else one_token_seconds
    data = {
        "version": VERSION,
        "points": [[n, round(c, 4)] for n, c in cost.points],
        "levels": [round(level, 4) for level in cost.levels],
        "one_token_seconds": base,
        "pairs": pairs,
        "saved": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **stamp(timed.measured_at, timed.load),
    }
    write_json(path, data, "the pass-cost table")


def measure(model: torch.nn.Module, sizes: tuple[int, ...] = SIZES, rounds: int = ROUNDS) -> Timed:
    """Time passes of each size after :func:`decoder.forward.timing_cache`'s context, ``rounds`` interleaved
    rounds (each size keeps its fastest): the table of this machine as it is, no other machine's pulled in. Where
    the fastest one-token pass is still slower than a wider one (other work stole the rounds' one-token passes: a
    wider pass does all its work and more), more rounds run, up to :data:`ATTEMPTS` times as many. With it the
    machine's load: other work's threads, and the slowest timed one-token pass over the fastest."""
    from lookahead_lsp.decoder.forward import masked_pass, timing_cache  # deferred: forward imports the policy

    kv = timing_cache(model)
    warm_each = next(model.parameters()).device.type != "cpu"
    ones: list[float] = []  # every one-token pass of an attempt

    def run_pass(n: int) -> None:
        started = time.perf_counter()
        masked_pass(model, kv, n)
        if n == 1:
            ones.append(time.perf_counter() - started)

    fastest: dict[int, float] = {}
    timed_ones: list[float] = []
    for _ in range(ATTEMPTS):
        ones.clear()
        timed = CostModel.measure(run_pass, sizes, rounds, warm_each=warm_each)
        timed_ones += ones[-max(rounds, 1) :]  # the timed rounds: warm-ups come first
        base = timed.one_token_seconds or 1.0
        for n, relative in timed.points:
            fastest[n] = min(fastest.get(n, float("inf")), relative * base)
        table = CostModel(tuple((n, fastest[n] / fastest[sizes[0]]) for n in sizes), one_token_seconds=fastest[1])
        if not implausible(table):
            break
    return Timed(table, time.time(), Load(machine_busy(torch.get_num_threads()), rounds_spread(timed_ones)))


def envelope(cost: CostModel) -> CostModel:
    """``cost`` with each size at least as dear as a one-token pass and as every narrower size."""
    points, dearest = [], 1.0
    for n, relative in cost.points:
        dearest = max(dearest, relative)
        points.append((n, dearest))
    return CostModel(tuple(points), one_token_seconds=cost.one_token_seconds)


def implausible(cost: CostModel) -> bool:
    """Whether a timed pass of several tokens came out cheaper than a one-token pass (beyond timing noise)."""
    return any(relative < 1.0 - NOISE for n, relative in cost.points if n > 1)


def settle_pairs(model: torch.nn.Module) -> int | None:
    """``model``'s kernel set to this machine's choice of loop for narrow passes (:func:`decoder.tile_pairs.settle`),
    kept beside its table under the same key; the mask, or None where the kernel has no choice to make."""
    return settle(model, pairs_path(table_path(model)))


def stored_table(path: Path, pairs: int | None, library: Path | None, busy_now: float) -> tuple[Timed | None, str]:
    """The table stored at ``path`` while it holds for the two-tile choice ``pairs``, the kernel ``library`` and the
    machine ``busy_now`` (``decoder/timing_load.py``: not older than the build, not timed under load where the
    machine is quiet now), and why; else None and why it is timed again."""
    missing = "none stored for this build, model and two-tile choice (or one of an older layout)"
    return still_holds("the pass-cost table", path, load(path, pairs), library, busy_now, missing)


def machine_cost(
    model: torch.nn.Module,
    measure_table: Callable[[torch.nn.Module], Timed] = measure,
    busy_now: Callable[[], float] = lambda: machine_busy(1),
) -> CostModel:
    """``model``'s table on this machine: the stored one while it holds (:func:`stored_table`), else measured now
    and stored; either way written back as live passes correct it. The kernel's narrow passes are settled first
    (:mod:`decoder.tile_pairs`): the table times the passes as they will run."""
    pairs = settle_pairs(model)
    path = table_path(model)
    timed, reason = stored_table(path, pairs, kernel_library(model), busy_now())
    if timed is None:
        log.info("timing the pass costs: %s", reason)
        started = time.perf_counter()
        timed = measure_table(model)
        if implausible(timed.cost):  # a disturbed timing: its envelope, for this process only; live passes correct it
            log.warning("pass costs timed under heavy load (%s): not stored", timed.cost.points)
            timed = Timed(envelope(timed.cost), timed.measured_at, timed.load)
        else:
            save(path, timed, pairs=pairs)
        log.info("pass costs measured in %.2f s (%s; %s)", time.perf_counter() - started, path, timed.load.words())
    else:
        log.info("pass costs from %s (%s)", path, reason)
    cost = timed.cost
    cost.persist = _writer(path, timed, pairs)
    return cost


LOADED = 1.5  # a live one-token pass this many times the table's own: the machine is busier than when timed


def _writer(path: Path, timed: Timed, pairs: int | None) -> Callable[[CostModel], None]:
    """Writes the live table back with ``timed``'s stamp, unless it is implausible or its passes ran on a machine
    busier than the one the table was timed on (a one-token pass ``LOADED`` times slower): load makes every ratio
    noise. The stored one-token time stays the timed one: the live mean follows this process's load, and a
    base stored too high makes every wider pass look cheap to the next process, which then verifies drafts at
    nearly every step and so seldom times the one-token pass that would correct it."""
    quiet_seconds = timed.cost.one_token_seconds

    def write(cost: CostModel) -> None:
        busy = quiet_seconds and cost.one_token_seconds and cost.one_token_seconds > LOADED * quiet_seconds
        if not busy and not implausible(CostModel(cost.current())):
            save(path, Timed(cost, timed.measured_at, timed.load), quiet_seconds, pairs)

    return write


def describe(cost: CostModel) -> list[list[Any]]:
    """The table as the benchmarks record it: ``[[tokens, relative cost], ...]``."""
    return [[n, round(c, 3)] for n, c in cost.current()]
