"""decoder: which narrow passes take the native kernel's two-tile loop on this machine, timed once on the model.

At an AVX-512 level the kernel can multiply a pass's activations with two weight tiles at once (16 weight rows in
one 512-bit register) or with one at a time (8 rows, 256 bits). Passes of 5 tokens or more take the two-tile loop;
for passes of 1 to 4 tokens which is faster depends on the core: from tiles in the plain order a Sapphire Rapids
runs 512-bit dot products at twice the 256-bit rate (the 1.5B's passes of 1 to 4 tokens 1.20-1.30x faster two by
two), a Zen 4 splits each over two 256-bit pipes (0.83-0.94x at 2 to 4 tokens). An AVX-512 build's weights now lie
in pairs (``WoqWeight.paired``: the two-tile loop reads one stream, the one-tile loop every other tile-group), and
on a Zen 5 the two-tile loop ran the 1.5B's products of 1 to 4 tokens 1.12-1.18x faster than the faster loop
from the plain order. Both loops give the same bits, so the choice is one of speed
alone, and it is made where it can be seen: each width's pass of the model timed both ways in interleaved rounds
(each way's fastest), one tile at a time kept only where it is faster by :data:`MARGIN`. The choice is stored beside
the pass-cost table, under its key (``decoder/cost_table.py``: this machine, model, kernel build and pass code; it
settles the choice before its table is timed, so that the table times the passes as they will run), and read back
by later processes. A choice timed while other work ran is not one of speed: both loops wait on the same
stalls and time alike (a 2-core Zen 5 held the 1.5B's choice as "none"; timed on a quiet stretch it is 3 and 4
tokens, whose passes run 1.07x and 1.16x faster two by two; with the weights in pairs a tie keeps the two-tile
loop). So the stored choice records the machine's load while
it was timed and expires as every stored timing does (``decoder/timing_load.py``: older than the kernel build, or
timed under load and the machine quiet now). The host's own load (other machines' share of its memory: the same
timing in fresh processes chose "none", "4" and "3, 4" within minutes, no other process running) shows in neither
the load average nor the rounds' spread.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from lookahead_lsp.decoder.timing_load import Load, machine_busy, read_stamp, rounds_spread, stamp, still_holds
from lookahead_lsp.decoder.weights.cache import write_json

if TYPE_CHECKING:
    from lookahead_lsp.decoder.kernels.woq_native import WoqKernel

log = logging.getLogger(__name__)

VERSION = 3  # of the file's layout and of how the choice is timed (2: with the load it was timed under; 3: the
# two-tile loop unless one tile at a time is faster, the weights in pairs)
WIDTHS = (1, 2, 3, 4)  # tokens per pass the choice is made for (the kernel's mask: bit n - 1)
ROUNDS = 3  # interleaved rounds; each way of each width keeps its fastest
MARGIN = 0.03  # one tile at a time is kept where its fastest pass is at least this much faster: closer is noise


def model_kernel(model: torch.nn.Module) -> WoqKernel | None:
    """The native kernel ``model``'s layers run on, or None for a model without it."""
    for module in model.modules():
        kernel = getattr(module, "kernel", None)
        if callable(getattr(kernel, "pair_rows", None)):
            return kernel  # type: ignore[no-any-return]
    return None


@dataclass(frozen=True)
class Choice:
    """A timed choice: the kernel's mask, when it was timed and how busy the machine was."""

    mask: int
    measured_at: float  # seconds since the epoch
    load: Load


def choose(
    time_pass: Callable[[int, bool], float], widths: tuple[int, ...] = WIDTHS, rounds: int = ROUNDS
) -> tuple[int, float]:
    """The kernel's mask of the ``widths`` whose passes ran faster two tiles at a time: ``time_pass(n, paired)``
    times one pass of n tokens one way, each width both ways in ``rounds`` rounds (which way first alternates), and
    each way keeps its fastest (the round least disturbed by other work); a width leaves the two-tile loop only
    where one tile at a time is faster by :data:`MARGIN` (the weights lie in that loop's order). With it the
    timing's spread: the slowest round of a one-token pass (one tile at a time) over its fastest."""
    times: dict[tuple[int, bool], list[float]] = {}
    for round_ in range(rounds):
        for n in widths:
            for paired in (False, True) if round_ % 2 == 0 else (True, False):
                times.setdefault((n, paired), []).append(time_pass(n, paired))
    best = {way: min(seconds) for way, seconds in times.items()}
    reference = times[widths[0], False]
    mask = sum(1 << (n - 1) for n in widths if not best[n, False] < (1.0 - MARGIN) * best[n, True])
    return mask, rounds_spread(reference)


def measure(model: torch.nn.Module, kernel: WoqKernel) -> Choice:
    """:func:`choose` on ``model``'s own passes after :func:`decoder.forward.timing_cache`'s context (as the
    pass-cost table's), with the machine's load."""
    from lookahead_lsp.decoder.forward import masked_pass, timing_cache  # deferred: forward imports the policy

    kv = timing_cache(model)

    def time_pass(n: int, paired: bool) -> float:
        kernel.pair_rows(1 << (n - 1) if paired else 0)
        started = time.perf_counter()
        masked_pass(model, kv, n)
        return time.perf_counter() - started

    time_pass(1, False)  # warm-up
    time_pass(1, True)
    mask, spread = choose(time_pass)
    return Choice(mask, time.time(), Load(machine_busy(torch.get_num_threads()), spread))


def pairs_path(table: Path) -> Path:
    """The file of the choice for the model whose pass-cost table is ``table``: beside it, under the same key."""
    return table.with_name("pairs" + table.name.removeprefix("cost"))


def load(path: Path) -> Choice | None:
    """The choice stored at ``path``, or None where there is none (or it cannot be read)."""
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
        if data.get("version") != VERSION:
            return None
        mask = data["mask"]
        choice = Choice(mask, *read_stamp(data))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        if not isinstance(exc, FileNotFoundError):
            log.warning("two-tile choice %s unreadable (%s): timing it again", path, exc)
        return None
    return choice if isinstance(mask, int) and 0 <= mask < 1 << len(WIDTHS) else None


def store(path: Path, choice: Choice) -> None:
    """Write ``choice`` to ``path``, whole or not at all; a failure is logged, never raised."""
    data = {"version": VERSION, "mask": choice.mask, **stamp(choice.measured_at, choice.load)}
    write_json(path, data, "the two-tile choice")


def stored_choice(path: Path, library: Path, busy_now: float) -> tuple[Choice | None, str]:
    """The choice stored at ``path`` while it holds for the kernel ``library`` with the machine ``busy_now``
    (``decoder/timing_load.py``: not older than the build, not timed under load where the machine is quiet now),
    and why; else None and why it is timed again."""
    return still_holds("the two-tile choice", path, load(path), library, busy_now)


def settle(
    model: torch.nn.Module,
    path: Path,
    measure_choice: Callable[[torch.nn.Module, WoqKernel], Choice] = measure,
    busy_now: Callable[[], float] = lambda: machine_busy(1),
) -> int | None:
    """Set ``model``'s kernel to the choice stored at ``path`` while it holds (:func:`stored_choice`), else to one
    timed now and stored there; the mask set, or None where the model's kernel has no two-tile loop (no native
    kernel, or a level below AVX-512)."""
    kernel = model_kernel(model)
    if kernel is None or kernel.pair_rows() is None:
        return None
    choice, reason = stored_choice(path, kernel.library, busy_now())
    if choice is None:
        log.info("timing the two-tile choice: %s", reason)
        started = time.perf_counter()
        choice = measure_choice(model, kernel)
        store(path, choice)
        log.info("two-tile choice timed in %.2f s (%s; %s)", time.perf_counter() - started, path, choice.load.words())
    kernel.pair_rows(choice.mask)
    log.info("%s (%s)", describe(choice.mask), kernel.isa)
    return choice.mask


def describe(mask: int | None) -> str:
    """What ``mask`` (:func:`settle`'s) means, in words."""
    if mask is None:
        return "two-tile loop: none at this level"
    widths = ", ".join(str(n) for n in WIDTHS if mask >> (n - 1) & 1) or "none"
    return f"two-tile loop for passes of 5 tokens or more and of: {widths}"
