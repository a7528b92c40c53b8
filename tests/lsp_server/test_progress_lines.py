"""ProgressLines on a clock the test moves: a slow step is written, a quick one is not, a quiet one says "still"."""

from __future__ import annotations

import io
import re
import time

from lookahead_lsp.lsp_server.progress_lines import ProgressLines


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def lines_of(stream: io.StringIO) -> list[str]:
    return stream.getvalue().splitlines()


def make() -> tuple[ProgressLines, Clock, io.StringIO]:
    clock, stream = Clock(), io.StringIO()
    return ProgressLines("complete", stream, after_s=1.0, every_s=8.0, gap_s=3.0, clock=clock), clock, stream


def test_a_quick_step_writes_nothing_and_a_slow_one_its_line_then_still() -> None:
    lines, clock, stream = make()
    lines.step("completing")
    clock.now += 0.5
    lines.tick()
    lines.done()
    clock.now += 30
    lines.tick()
    assert lines_of(stream) == []
    lines.step("loading the model embedded")
    clock.now += 1.0
    lines.tick()
    clock.now += 7.9
    lines.tick()
    assert lines_of(stream) == ["complete: loading the model embedded"]
    clock.now += 0.1
    lines.tick()
    clock.now += 8.0
    lines.tick()
    assert lines_of(stream)[1:] == [
        "complete: still loading the model embedded (9 s)",
        "complete: still loading the model embedded (17 s)",
    ]


def test_a_tasks_progress_messages_are_spaced_and_a_new_task_starts_over() -> None:
    lines, clock, stream = make()
    lines.progress("model", "loading embedded", 0.0)
    clock.now += 1.0
    lines.tick()
    lines.progress("model", "converting", 0.2)  # within gap_s of the last line: only the current text
    clock.now += 3.0
    lines.progress("model", "packing", 0.5)
    lines.progress("index", "scanning", 0.0)
    lines.tick()
    clock.now += 1.0
    lines.tick()
    lines.finished("index", "workspace indexed")
    clock.now += 7.9
    lines.tick()
    assert lines_of(stream) == [
        "complete: model: loading embedded",
        "complete: model: packing",
        "complete: index: scanning",
    ]
    clock.now += 0.1  # eight seconds without a line, between steps: it still says so
    lines.tick()
    assert lines_of(stream)[3:] == ["complete: still working (8 s since the last step)"]
    clock.now += 8.0
    lines.step("completing")  # after eight quiet seconds a new step is out at once, not after its second
    lines.tick()
    assert lines_of(stream)[4:] == ["complete: completing"]


def test_the_thread_writes_while_a_step_runs() -> None:
    stream = io.StringIO()
    with ProgressLines("complete", stream, after_s=0.0, every_s=0.1) as lines:
        lines.step("waiting")
        for _ in range(100):
            if len(lines_of(stream)) >= 2:
                break
            time.sleep(0.05)
    first, second = lines_of(stream)[:2]
    assert first == "complete: waiting" and re.fullmatch(r"complete: still waiting \(\d+ s\)", second)
