"""The one model worker (batch 1): newest request per document wins, older ones are cancelled.

:class:`NewestWins` is the pure bookkeeping (which job runs next, which jobs a new one supersedes);
:class:`Scheduler` runs it on one thread. A job's future always resolves with a result or ``None``
(cancelled, superseded or failed): callers answer ``None`` with an empty completion, never an error.
A job that is running when it is superseded sees its :class:`CancelToken` set and stops at the next
decoder step.

Besides the real jobs there is one *idle* job at most (background prefill): it runs only when no real job
waits, a newer idle job replaces it, and any real job cancels it (queued: dropped; running: its token is
set, so it stops within one prefill chunk and the real job runs next).

A progressive job (:meth:`Scheduler.submit_progressive`) may *answer* before it ends: its future resolves
with what it has, and it goes on as a *continuation* (progressive ghost text: the rest of the line, then the
block, decoded on the same KV). A continuation is background work: any real job cancels it, like a running
idle job, and so does a newer job of its key; its future stays resolved with the early answer.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from lookahead_lsp.decoder.types import CancelToken

log = logging.getLogger(__name__)

T = TypeVar("T")

Work = Callable[[CancelToken, float], "T | None"]
"""What a job does on the worker: gets its cancel token and how long it queued (ms)."""

Answer = Callable[["T"], None]
"""Resolves a progressive job's future early; the job goes on as a continuation."""

ProgressiveWork = Callable[[CancelToken, float, "Answer[T]"], "T | None"]
"""A job that may answer before it ends (its third argument)."""


@dataclass(eq=False)
class Job(Generic[T]):
    job_id: str
    key: str  # jobs with the same key supersede each other (the document URI)
    work: Work[T]
    token: CancelToken = field(default_factory=CancelToken)
    future: Future[T | None] = field(default_factory=Future)
    submitted: float = field(default_factory=time.perf_counter)

    def resolve(self, result: T | None) -> None:
        if not self.future.done():
            self.future.set_result(result)


class NewestWins(Generic[T]):
    """Queued jobs (at most one per key, oldest key first) and the running one. No threads here."""

    def __init__(self) -> None:
        self._queued: OrderedDict[str, Job[T]] = OrderedDict()
        self.idle: Job[T] | None = None  # the queued idle job
        self.running: Job[T] | None = None
        self._running_idle = False
        self._continuing = False  # the running job answered early and goes on: any real job cancels it

    def submit(self, job: Job[T]) -> list[Job[T]]:
        """Queue ``job``; returns the queued jobs it replaces (the idle one too). A running job of the same
        key, or a running idle job, is cancelled."""
        superseded = [self._queued.pop(job.key)] if job.key in self._queued else []
        if self.idle is not None:
            superseded.append(self.idle)
            self.idle = None
        if self.running is not None and (self.running.key == job.key or self._running_idle or self._continuing):
            self.running.token.cancel()
        self._queued[job.key] = job
        return superseded

    def submit_idle(self, job: Job[T]) -> list[Job[T]]:
        """Queue an idle job in place of the previous one (returned); a running idle job is cancelled."""
        superseded = [self.idle] if self.idle is not None else []
        if self.running is not None and self._running_idle:
            self.running.token.cancel()
        self.idle = job
        return superseded

    def take(self) -> Job[T] | None:
        """The next job to run (it becomes ``running``): real jobs first, else the idle one, else None."""
        if self._queued:
            _, job = self._queued.popitem(last=False)
            self._running_idle = False
        elif self.idle is not None:
            job, self.idle = self.idle, None
            self._running_idle = True
        else:
            return None
        self.running = job
        self._continuing = False
        return job

    @property
    def running_idle(self) -> bool:
        return self.running is not None and self._running_idle

    @property
    def running_background(self) -> bool:
        """The running job is the idle one or a continuation."""
        return self.running is not None and (self._running_idle or self._continuing)

    def continuing(self, job: Job[T]) -> bool:
        """``job`` answered early and goes on in the background; False (and its token set) when a real job
        already waits, so that one runs next."""
        if self.running is not job:
            return False
        self._continuing = True
        if self._queued:
            job.token.cancel()
            return False
        return True

    def finish(self, job: Job[T]) -> None:
        if self.running is job:
            self.running = None
            self._running_idle = self._continuing = False

    def cancel(self, job_id: str) -> Job[T] | None:
        """Cancel one job: returns it if it was queued (now removed); a running one gets its token set."""
        for key, job in self._queued.items():
            if job.job_id == job_id:
                del self._queued[key]
                return job
        if self.running is not None and self.running.job_id == job_id:
            self.running.token.cancel()
        return None

    def drain(self) -> list[Job[T]]:
        """Remove every queued job and cancel the running one; returns the removed jobs."""
        jobs = list(self._queued.values())
        self._queued.clear()
        if self.idle is not None:
            jobs.append(self.idle)
            self.idle = None
        if self.running is not None:
            self.running.token.cancel()
        return jobs

    def __len__(self) -> int:
        """Real jobs waiting (the idle job does not count)."""
        return len(self._queued)


class Scheduler(Generic[T]):
    """Runs jobs one at a time on a single daemon thread, newest per key wins."""

    def __init__(self, name: str = "model-worker") -> None:
        self._name = name
        self._book: NewestWins[T] = NewestWins()
        self._cond = threading.Condition()
        self._stopping = False
        self._ids = itertools.count(1)
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()

    def submit(self, key: str, work: Work[T], job_id: str | None = None) -> Job[T]:
        """A real job: newest per key wins; it preempts the idle job."""
        return self._add(Job(job_id or f"job-{next(self._ids)}", key, work), idle=False)

    def submit_progressive(self, key: str, work: ProgressiveWork[T], job_id: str | None = None) -> Job[T]:
        """A real job that may answer early (``work``'s third argument): its future resolves with that answer
        and the job goes on as a continuation, cancelled by any later real job (and a newer one of its key)."""
        job: Job[T] = Job(job_id or f"job-{next(self._ids)}", key, lambda token, queue_ms: None)
        job.work = lambda token, queue_ms: work(token, queue_ms, lambda result: self._answer(job, result))
        return self._add(job, idle=False)

    def _answer(self, job: Job[T], result: T) -> None:
        with self._cond:
            if job.token.cancelled or job.future.done():
                return
            self._book.continuing(job)
        job.resolve(result)

    def submit_idle(self, key: str, work: Work[T], job_id: str | None = None) -> Job[T]:
        """An idle job (background prefill): runs only when no real job waits; the newest replaces it."""
        return self._add(Job(job_id or f"idle-{next(self._ids)}", key, work), idle=True)

    def _add(self, job: Job[T], idle: bool) -> Job[T]:
        with self._cond:
            if self._stopping:
                superseded = [job]
            else:
                superseded = self._book.submit_idle(job) if idle else self._book.submit(job)
                self._cond.notify()
        for old in superseded:
            old.resolve(None)
        return job

    def cancel(self, job_id: str) -> None:
        with self._cond:
            removed = self._book.cancel(job_id)
        if removed is not None:
            removed.resolve(None)

    @property
    def busy(self) -> bool:
        """Whether a real job runs or waits (background prefill and continuations do not count)."""
        with self._cond:
            return (self._book.running is not None and not self._book.running_background) or len(self._book) > 0

    @property
    def idle_running(self) -> bool:
        """Whether the idle job (background prefill) is running now."""
        with self._cond:
            return self._book.running_idle

    def stop(self, timeout: float = 5.0) -> None:
        """Cancel everything, let the running job see its token, and end the thread."""
        with self._cond:
            self._stopping = True
            removed = self._book.drain()
            self._cond.notify_all()
        for job in removed:
            job.resolve(None)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _next(self) -> Job[T] | None:
        with self._cond:
            while not self._stopping:
                job = self._book.take()
                if job is not None:
                    return job
                self._cond.wait()
            return None

    def _loop(self) -> None:
        while (job := self._next()) is not None:
            queue_ms = (time.perf_counter() - job.submitted) * 1000.0
            result: T | None = None
            try:
                if not job.token.cancelled:
                    result = job.work(job.token, queue_ms)
            except Exception:
                log.exception("job %s failed", job.job_id)
            finally:
                with self._cond:
                    self._book.finish(job)
                job.resolve(None if job.token.cancelled else result)
