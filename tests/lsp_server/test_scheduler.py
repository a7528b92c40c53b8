"""The model worker's newest-wins bookkeeping (pure) and the worker thread around it."""

from __future__ import annotations

import threading
import time

from lookahead_lsp.decoder.types import CancelToken
from lookahead_lsp.lsp_server.scheduler import Job, NewestWins, Scheduler


def _job(job_id: str, key: str) -> Job[str]:
    return Job(job_id, key, lambda token, queue_ms: job_id)


def test_newest_queued_job_per_key_wins() -> None:
    book: NewestWins[str] = NewestWins()
    a1, b1, a2, a3 = _job("a1", "a"), _job("b1", "b"), _job("a2", "a"), _job("a3", "a")
    assert book.submit(a1) == []
    assert book.submit(b1) == []
    assert book.submit(a2) == [a1]
    assert book.submit(a3) == [a2]
    assert book.take() is b1  # keys run oldest first; a's slot moved behind b when replaced
    assert book.take() is a3
    assert book.take() is None


def test_new_job_cancels_the_running_one_of_its_key_only() -> None:
    book: NewestWins[str] = NewestWins()
    a1, b1 = _job("a1", "a"), _job("b1", "b")
    book.submit(a1)
    assert book.take() is a1
    book.submit(b1)
    assert not a1.token.cancelled
    book.submit(_job("a2", "a"))
    assert a1.token.cancelled
    book.finish(a1)
    assert book.running is None


def test_cancel_by_id() -> None:
    book: NewestWins[str] = NewestWins()
    a1, b1 = _job("a1", "a"), _job("b1", "b")
    book.submit(a1)
    book.submit(b1)
    assert book.take() is a1
    assert book.cancel("b1") is b1 and len(book) == 0
    assert book.cancel("a1") is None and a1.token.cancelled
    assert book.cancel("nope") is None


def test_drain_cancels_everything() -> None:
    book: NewestWins[str] = NewestWins()
    a1, b1 = _job("a1", "a"), _job("b1", "b")
    book.submit(a1)
    book.submit(b1)
    book.take()
    assert book.drain() == [b1]
    assert a1.token.cancelled


def test_worker_runs_newest_and_resolves_others_with_none() -> None:
    scheduler: Scheduler[str] = Scheduler()
    started, release = threading.Event(), threading.Event()

    def slow(token: CancelToken, queue_ms: float) -> str:
        started.set()
        while not token.cancelled and not release.is_set():
            time.sleep(0.005)
        return "slow"

    scheduler.start()
    try:
        first = scheduler.submit("doc", slow)
        assert started.wait(5)
        queued = [scheduler.submit("doc", lambda t, q, i=i: f"r{i}") for i in range(5)]
        assert first.future.result(5) is None  # cancelled while running
        assert [j.future.result(5) for j in queued] == [None, None, None, None, "r4"]
        other = scheduler.submit("other", lambda t, q: "x")
        assert other.future.result(5) == "x"
    finally:
        scheduler.stop()


def test_worker_survives_a_failing_job_and_cancel_by_id() -> None:
    scheduler: Scheduler[str] = Scheduler()
    scheduler.start()
    try:

        def boom(token: CancelToken, queue_ms: float) -> str:
            raise RuntimeError("boom")

        assert scheduler.submit("a", boom).future.result(5) is None
        gate = threading.Event()
        blocker = scheduler.submit("a", lambda t, q: str(gate.wait(5)))
        waiting = scheduler.submit("b", lambda t, q: "b", job_id="wanted")
        scheduler.cancel("wanted")
        assert waiting.future.result(1) is None
        gate.set()
        assert blocker.future.result(5) == "True"
    finally:
        scheduler.stop()
    late = scheduler.submit("a", lambda t, q: "late")
    assert late.future.result(1) is None


def test_a_progressive_job_answers_early_and_goes_on_until_a_real_job_cancels_it() -> None:
    scheduler: Scheduler[str] = Scheduler()
    went_on, release = threading.Event(), threading.Event()
    ended: list[bool] = []

    def progressive(token: CancelToken, queue_ms: float, answer) -> str:
        answer("first words")
        went_on.set()
        while not token.cancelled and not release.is_set():
            time.sleep(0.005)
        ended.append(token.cancelled)
        return "the whole block"

    scheduler.start()
    try:
        job = scheduler.submit_progressive("a", progressive)
        assert job.future.result(5) == "first words"  # answered while the job goes on
        assert went_on.wait(5) and not scheduler.busy  # a continuation is background work
        other = scheduler.submit("b", lambda t, q: "b")  # any real job cancels the continuation
        assert other.future.result(5) == "b" and ended == [True]
        assert job.future.result(0) == "first words"

        finishing = scheduler.submit_progressive("a", progressive)
        assert finishing.future.result(5) == "first words"
        release.set()  # left alone, the continuation runs to its end
        deadline = time.monotonic() + 5
        while len(ended) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ended == [True, False]
    finally:
        scheduler.stop()


def test_a_job_that_answers_while_a_real_one_waits_stops() -> None:
    book: NewestWins[str] = NewestWins()
    a1 = _job("a1", "a")
    book.submit(a1)
    assert book.take() is a1
    assert book.continuing(a1) and book.running_background
    book.finish(a1)
    a2, b1 = _job("a2", "a"), _job("b1", "b")
    book.submit(a2)
    assert book.take() is a2
    book.submit(b1)
    assert not a2.token.cancelled  # another key's job waits behind a running real job ...
    assert not book.continuing(a2) and a2.token.cancelled  # ... and stops it once it only goes on
