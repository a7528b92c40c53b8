"""A loaded model's latency figures on this machine (``lsp_server/model_choice.py``'s :class:`Figures`): timed once,
stored beside the native kernels as the pass-cost table is (``decoder/cost_table.py``), read back by later starts.

The figures depend on the machine (processor, flags, torch threads and version, device), the model, the kernel
build (its file name carries its level and sources' key), the Python that runs a pass (``cost_table.pass_code``)
and the settings that change what a pass reads
(``device``, ``dtype``, ``prefillDtype``, ``weights``): the file's name is a hash of all of them, so a change of
any one measures again. Timing: the CPU's prompt budget prefilled once, then the fastest of :data:`ROUNDS` tail
prefills and of :data:`ROUNDS` one-token passes after it (the fastest: the round least disturbed by other work).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from pathlib import Path
from typing import Any

from lookahead_lsp.decoder.weights.cache import write_json
from lookahead_lsp.lsp_server.config import Config
from lookahead_lsp.lsp_server.model_choice import TAIL_TOKENS, Figures

log = logging.getLogger(__name__)

VERSION = 1  # of the file and of how it is timed: a new one measures again
ROUNDS = 3


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


def stored(path: Path) -> Figures | None:
    """The figures stored at ``path``; None where there are none or they cannot be read."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("version") != VERSION or data.get("tail_tokens") != TAIL_TOKENS:
            return None
        threads = data.get("threads")
        return Figures(float(data["one_token_s"]), float(data["tail_prefill_s"]), int(threads) if threads else None)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning("model figures %s unreadable (%s): measuring again", path, exc)
        return None


def store(path: Path, figures: Figures) -> None:
    """Write ``figures`` to ``path``, whole or not at all; a failure is logged, never raised."""
    data = {
        "version": VERSION,
        "tail_tokens": TAIL_TOKENS,
        "one_token_s": round(figures.one_token_s, 5),
        "tail_prefill_s": round(figures.tail_prefill_s, 5),
        "threads": figures.threads,
        "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    write_json(path, data, "the model figures")


def measure(model: Any, context: int, rounds: int = ROUNDS) -> Figures:
    """Time ``model`` here: a ``context``-token prompt prefilled, then the fastest tail prefill of
    :data:`TAIL_TOKENS` and the fastest one-token pass after it (the cache left at the prompt after each)."""
    import torch  # deferred (module docstring of figures_path)

    from lookahead_lsp.decoder.forward import forward, prefill
    from lookahead_lsp.decoder.kv import PrefixKV

    vocab = int(getattr(getattr(model, "config", None), "vocab_size", 0) or 256)
    ids = [(i * 7919) % vocab for i in range(context + TAIL_TOKENS)]  # which ids does not change the time
    kv = PrefixKV()
    prefill(model, kv, ids[:context])
    tail, one = float("inf"), float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        prefill(model, kv, ids[context:])
        tail = min(tail, time.perf_counter() - started)
        kv.truncate(context)
        started = time.perf_counter()
        forward(model, kv, ids[context : context + 1])[-1, 0].item()  # .item() waits for an accelerator
        one = min(one, time.perf_counter() - started)
        kv.cache.crop(-1)
    return Figures(one, tail, torch.get_num_threads())
