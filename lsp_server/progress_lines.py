"""Progress on stderr for a one-shot command: a line per slow step and "still ..." while a step is quiet.

:class:`ProgressLines` is the engine's events (``EngineEvents``) for ``complete``: each task's progress
message becomes the current step. A step's line is written once the step has run ``after_s`` (a quick step,
or a command that fails at once, writes nothing), later messages of the same task at most every ``gap_s``;
and from a thread of its own, ``still <step> (N s)`` after every ``every_s`` seconds without a line, so that
a long step (converting, loading or timing a model, indexing a workspace) never looks like a hang; once a line
is out, no ``every_s`` passes without one, between steps included. Lines go
to ``stream`` (stderr), never to stdout: stdout carries the command's answer. :meth:`ProgressLines.tick` is
the whole decision, on the clock it is given, so that it is tested without threads. Every event also goes on
to ``forward`` (the command line's log).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO


class ProgressLines:
    """Lines ``<prefix>: <step>`` on ``stream``; a context manager that runs the ticking thread."""

    def __init__(
        self,
        prefix: str,
        stream: TextIO | None = None,
        after_s: float = 1.0,
        every_s: float = 8.0,
        gap_s: float = 3.0,
        clock: Callable[[], float] = time.monotonic,
        forward: Any = None,
    ) -> None:
        """``forward``: other engine events that get every event too (the log's: ``QuietEvents``)."""
        self.prefix, self.stream, self.forward = prefix, stream or sys.stderr, forward
        self.after_s, self.every_s, self.gap_s, self.clock = after_s, every_s, gap_s, clock
        self._lock = threading.Lock()
        self._step: str | None = None  # the current step's text
        self._task: str | None = None
        self._since = clock()  # when the current step began
        self._shown: str | None = None  # the step text last written
        self._last = clock()  # when a line was last written
        self._wrote = False  # whether any line was (a command that stays quick writes none)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="progress-lines", daemon=True)

    def __enter__(self) -> ProgressLines:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def step(self, text: str, task: str | None = None) -> None:
        """A new current step: written once it has run ``after_s``; a later step of the same ``task`` (progress
        messages) at once if the task's line is out and ``gap_s`` has passed, else it is only the current text."""
        with self._lock:
            now = self.clock()
            same_task = task is not None and task == self._task
            self._step, self._task = text, task
            if not same_task:
                self._since, self._shown = now, None
            elif self._shown is not None and now - self._last >= self.gap_s:
                self._write(text, now)

    def tick(self) -> None:
        """Write what is due now: the current step once it has run ``after_s`` (at once after ``every_s`` without
        a line), else "still <step>" after ``every_s`` without a line; between steps, "still working" then."""
        with self._lock:
            now = self.clock()
            quiet = self._wrote and now - self._last >= self.every_s
            if self._step is None:
                if quiet:
                    self._write(f"still working ({now - self._last:.0f} s since the last step)", now)
            elif self._shown is None:
                if now - self._since >= self.after_s or quiet:
                    self._write(self._step, now)
            elif quiet:
                self._write(f"still {self._step} ({now - self._since:.0f} s)", now)

    def done(self) -> None:
        """No current step any more (nothing is written until the next one)."""
        with self._lock:
            self._step = self._task = self._shown = None

    def _write(self, text: str, now: float) -> None:
        print(f"{self.prefix}: {text}", file=self.stream, flush=True)
        self._shown, self._last, self._wrote = self._step, now, True

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            self.tick()

    # ---- EngineEvents ------------------------------------------------------------------------------

    def progress(self, task: Any, message: str, fraction: float | None) -> None:
        self.step(f"{task}: {message}", str(task))
        if self.forward is not None:
            self.forward.progress(task, message, fraction)

    def finished(self, task: Any, message: str) -> None:
        self.done()
        if self.forward is not None:
            self.forward.finished(task, message)

    def failed(self, task: Any, message: str) -> None:
        self.done()  # the caller reports it
        if self.forward is not None:
            self.forward.failed(task, message)

    def notice(self, message: str, error: bool) -> None:
        if self.forward is not None:
            self.forward.notice(message, error)
