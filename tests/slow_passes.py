"""The slow-pass hook for tests: every forward pass of a Qwen2 model sleeps first, so that the keystroke
deadlines pass while the tiny model decodes (as they do on a slow CPU with the real model).

In-process: :func:`slow_down`. A daemon: ``python tests/slow_passes.py MS serve ...`` runs the CLI with it, from
the checkout this file is in (:data:`COMMAND`).
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

CHECKOUT = Path(__file__).resolve().parents[1]


def command(ms: float) -> list[str]:
    """The daemon's command line (``serve`` and its options follow) with every pass ``ms`` slower."""
    return [sys.executable, str(Path(__file__).resolve()), str(ms)]


def slow_down(ms: float) -> Callable[[], None]:
    """Make every Qwen2 forward pass sleep ``ms`` first; returns the function that undoes it."""
    from transformers import Qwen2ForCausalLM

    original = Qwen2ForCausalLM.forward

    @functools.wraps(original)
    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        time.sleep(ms / 1000.0)
        return original(self, *args, **kwargs)

    Qwen2ForCausalLM.forward = forward  # type: ignore[method-assign]

    def undo() -> None:
        Qwen2ForCausalLM.forward = original  # type: ignore[method-assign]

    return undo


if __name__ == "__main__":
    sys.path[0] = str(CHECKOUT)  # this checkout's packages (not tests/ itself), whatever .venv points at
    from lookahead_lsp.lsp_server.cli import main

    slow_down(float(sys.argv[1]))
    sys.exit(main(sys.argv[2:]))
