"""This machine's pass-cost table: measured once, stored in the kernel cache, read back while its timing holds,
refreshed by live passes."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import torch

from lookahead_lsp.decoder import cost_table
from lookahead_lsp.decoder.lookahead import LookaheadDecoder
from lookahead_lsp.decoder.policy import PERSIST_EVERY, CostModel
from lookahead_lsp.decoder.timing_load import Load
from lookahead_lsp.decoder.types import DecodeRequest
from lookahead_lsp.decoder.weights.cache import CACHE_ENV
from tests.tiny_model import make_tiny_qwen2


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    return tmp_path


def quiet(cost: CostModel, at: float | None = None) -> cost_table.Timed:
    """``cost`` as timed on a quiet machine, now or ``at``."""
    return cost_table.Timed(cost, time.time() if at is None else at, Load(0.0, 1.05))


def test_measured_once_then_read_back_and_refreshed_by_live_passes(cache: Path) -> None:
    model = make_tiny_qwen2(dtype=torch.float32)
    measured: list[int] = []

    before = time.time()
    timed = cost_table.measure(model, sizes=(1, 2, 4, 8), rounds=2)  # real passes (timings too noisy to assert)
    assert [n for n, _ in timed.cost.points] == [1, 2, 4, 8] and timed.cost.points[0] == (1, 1.0)
    assert timed.cost.one_token_seconds is not None and timed.cost.one_token_seconds > 0
    assert before <= timed.measured_at <= time.time()
    assert timed.load.busy is not None and timed.load.spread is not None and timed.load.spread >= 1.0

    def measure(m: torch.nn.Module) -> cost_table.Timed:
        measured.append(1)
        return quiet(CostModel(((1, 1.0), (2, 1.1), (4, 1.3), (8, 1.9)), one_token_seconds=0.01))

    first = cost_table.machine_cost(model, measure)
    path = cost_table.table_path(model)
    assert path.parent == cache / "native-v2" and path.is_file()  # the kernel cache (no native kernel here)
    assert [n for n, _ in first.points] == [1, 2, 4, 8] and first.points[0] == (1, 1.0)
    again = cost_table.machine_cost(model, measure)  # a new process: read, not measured
    assert measured == [1]
    assert [c for _, c in again.points] == pytest.approx([c for _, c in first.points], rel=1e-3)
    # live passes: an 8-token pass at 3x a one-token pass is written back at the end of the generation in which
    # the PERSIST_EVERY-th pass ran
    for _ in range(PERSIST_EVERY):
        again.observe(1, 0.010)
        again.observe(8, 0.030)
        again.flush()  # a generation's end
    stored = cost_table.load(path)
    assert stored is not None and stored.cost.interpolated(8) == pytest.approx(again.interpolated(8), rel=0.05)
    assert abs(stored.cost.interpolated(8) - 3.0) < abs(first.interpolated(8) - 3.0)


def test_other_pass_code_has_its_own_table(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pass's Python changed (a prefill taking another path): the table is timed again, not read back."""
    small = make_tiny_qwen2(dtype=torch.float32)
    code = cost_table.pass_code()
    assert code == cost_table.pass_code.__wrapped__() and len(code) == 20
    monkeypatch.setattr(cost_table, "PASS_SOURCES", ("forward.py",))
    assert cost_table.pass_code.__wrapped__() != code  # every named source counts
    before = cost_table.table_path(small)
    monkeypatch.setattr(cost_table, "pass_code", lambda: "0" * 20)
    assert cost_table.table_path(small) != before


def test_another_model_or_thread_count_has_its_own_table(cache: Path) -> None:
    small, wide = make_tiny_qwen2(dtype=torch.float32), make_tiny_qwen2(vocab_size=1024, dtype=torch.float32)
    assert cost_table.table_path(small) != cost_table.table_path(wide)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = cost_table.table_path(small)
        torch.set_num_threads(2)
        assert cost_table.table_path(small) != one
    finally:
        torch.set_num_threads(before)


def test_an_unreadable_or_old_table_is_measured_again(cache: Path) -> None:
    model = make_tiny_qwen2(dtype=torch.float32)
    path = cost_table.table_path(model)
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    assert cost_table.load(path) is None
    path.write_text('{"version": 0, "points": [[1, 1.0], [8, 2.0]]}')
    assert cost_table.load(path) is None
    cost = cost_table.machine_cost(model, lambda m: quiet(CostModel(((1, 1.0), (8, 2.5)), one_token_seconds=0.01)))
    assert cost.interpolated(8) == 2.5 and cost_table.load(path) is not None


def test_the_timed_sizes_and_the_live_levels_are_stored_apart(cache: Path) -> None:
    """The file keeps the timing and the live levels apart (decoder/policy.RELAX eases a level back to the timing,
    which a table stored with its levels folded in would have lost); levels that do not fit the sizes are dropped,
    with a warning, and the table starts from its timing."""
    path = cache / "cost-woq-avx512-0-0.json"
    cost = CostModel(((1, 1.0), (4, 1.25), (8, 1.55)), one_token_seconds=0.02)
    cost.levels = [1.0, 1.1, 1.2]
    cost_table.save(path, quiet(cost))
    data = json.loads(path.read_text())
    assert data["points"] == [[1, 1.0], [4, 1.25], [8, 1.55]] and data["levels"] == [1.0, 1.1, 1.2]
    stored = cost_table.load(path)
    assert stored is not None and stored.cost.points == cost.points and stored.cost.current() == cost.current()
    data["levels"] = [1.0, "x"]
    path.write_text(json.dumps(data))
    assert cost_table.load(path) is None  # unreadable: measured again
    data["levels"] = [1.0, 1.1]
    path.write_text(json.dumps(data))
    stored = cost_table.load(path)
    assert stored is not None and stored.cost.levels == [1.0, 1.0, 1.0] and stored.cost.interpolated(8) == 1.55


def test_a_table_timed_under_another_two_tile_choice_is_measured_again(cache: Path) -> None:
    """The two-tile choice was timed again and changed (decoder/tile_pairs.py): the table's passes of 1 to 4 tokens
    ran the other loop, so it is timed again too; a table of a kernel with no choice matches only "none"."""
    path = cache / "cost-woq-avx512-0-0.json"
    cost = quiet(CostModel(((1, 1.0), (4, 1.5)), one_token_seconds=0.02))
    cost_table.save(path, cost, pairs=0)
    assert cost_table.load(path, 0) is not None
    assert cost_table.load(path, 0b1100) is None and cost_table.load(path) is None
    cost_table.save(path, cost, pairs=0b1100)
    stored = cost_table.load(path, 0b1100)
    assert stored is not None and stored.cost.interpolated(4) == 1.5 and cost_table.load(path, 0) is None
    cost_table.save(path, cost)
    assert cost_table.load(path) is not None and cost_table.load(path, 0) is None


def test_a_timing_disturbed_by_other_work_is_not_stored(cache: Path) -> None:
    """The one-token passes of every round met a busy moment: wider passes came out cheaper than one token. The
    process decodes with the table's envelope (no size cheaper than a narrower one) and stores nothing."""
    model = make_tiny_qwen2(dtype=torch.float32)
    disturbed = CostModel(((1, 1.0), (2, 0.57), (4, 0.63), (8, 1.6), (16, 3.7)), one_token_seconds=0.3)
    assert cost_table.implausible(disturbed)
    cost = cost_table.machine_cost(model, lambda m: quiet(disturbed))
    assert [c for _, c in cost.points] == [1.0, 1.0, 1.0, 1.6, 3.7]
    assert not cost_table.table_path(model).exists()


def test_live_passes_on_a_busier_machine_are_not_written_back(cache: Path) -> None:
    """Passes timed while other work runs (one-token passes 3x the stored table's) are not stored: every ratio
    is noise then; once the machine is as quiet as when the table was timed, write-back resumes."""
    model = make_tiny_qwen2(dtype=torch.float32)
    path = cost_table.table_path(model)
    cost = cost_table.machine_cost(model, lambda m: quiet(CostModel(((1, 1.0), (8, 2.0)), one_token_seconds=0.01)))
    written = path.stat().st_mtime_ns
    for _ in range(PERSIST_EVERY * 4):  # the base climbs by capped steps to the busy time
        cost.observe(1, 0.030)
        cost.observe(8, 0.090)
        cost.flush()
    assert cost.one_token_seconds is not None and cost.one_token_seconds > 0.02
    assert path.stat().st_mtime_ns == written
    for _ in range(PERSIST_EVERY * 4):
        cost.observe(1, 0.010)
        cost.observe(8, 0.025)
        cost.flush()
    stored = cost_table.load(path)
    assert stored is not None and stored.cost.interpolated(8) == pytest.approx(2.5, rel=0.1)


def test_the_stored_one_token_time_stays_the_timed_one(cache: Path) -> None:
    """A run whose one-token passes are a little slower than when the table was timed (not enough to count as
    busy) writes its table back, but not its one-token time: stored, that time would be the next process's idea
    of a quiet pass, every wider pass would look cheaper to it, and the next busy run would raise it again."""
    model = make_tiny_qwen2(dtype=torch.float32)
    path = cost_table.table_path(model)
    cost = cost_table.machine_cost(model, lambda m: quiet(CostModel(((1, 1.0), (8, 2.0)), one_token_seconds=0.01)))
    for _ in range(PERSIST_EVERY * 4):
        cost.observe(1, 0.013)
        cost.observe(8, 0.026)
        cost.flush()
    assert cost.one_token_seconds == pytest.approx(0.013, rel=0.02)
    stored = cost_table.load(path)
    assert stored is not None and stored.cost.one_token_seconds == 0.01
    assert stored.cost.interpolated(8) == pytest.approx(2.0, rel=0.05)


def test_the_table_is_written_between_generations_not_inside_a_step() -> None:
    """Writing the file takes milliseconds: within a generation the passes only count, and the write waits for
    the generation's end (LookaheadDecoder.generate flushes), so no timed step carries it."""
    model = make_tiny_qwen2(dtype=torch.float32)
    cost = CostModel(((1, 1.0), (8, 2.0)), one_token_seconds=0.01)
    writes: list[CostModel] = []
    cost.persist = writes.append
    for _ in range(PERSIST_EVERY * 2):
        cost.observe(1, 0.010)
        cost.observe(8, 0.030)
    assert writes == []
    cost.flush()
    cost.flush()  # nothing due any more
    assert len(writes) == 1 and writes[0].interpolated(8) > 2.2
    for _ in range(PERSIST_EVERY):
        cost.observe(8, 0.030)
    LookaheadDecoder(model, cost=cost).generate(DecodeRequest([1, 2, 3, 1, 2], max_new_tokens=3))
    assert len(writes) == 2


def test_a_table_expires_as_every_stored_timing_does(cache: Path) -> None:
    """Stored with when it was timed and the machine's load: a table older than the kernel build, or timed under
    load while the machine is quiet now, is timed again; one timed under load on a machine still busy is kept."""
    path = cache / "cost-woq-avx512-0-0.json"
    library = cache / "woq-avx512-0.so"
    library.write_bytes(b"")
    built = library.stat().st_mtime
    table = CostModel(((1, 1.0), (8, 2.0)), one_token_seconds=0.01)
    cost_table.save(path, quiet(table, at=built + 60))
    kept, why = cost_table.stored_table(path, None, library, busy_now=0.0)
    assert kept is not None and kept.measured_at == built + 60 and kept.load == Load(0.0, 1.05), why
    os.utime(library, (built + 120, built + 120))  # rebuilt since
    gone, why = cost_table.stored_table(path, None, library, busy_now=0.0)
    assert gone is None and "older than the kernel build" in why
    busy = cost_table.Timed(table, built + 180, Load(1.2, 1.1))  # other work's threads while it was timed
    cost_table.save(path, busy)
    gone, why = cost_table.stored_table(path, None, library, busy_now=0.1)
    assert gone is None and "timed under load" in why and "quiet now" in why
    kept, why = cost_table.stored_table(path, None, library, busy_now=0.9)
    assert kept is not None and "still busy" in why
    path.write_text('{"version": 2, "points": [[1, 1.0], [8, 2.0]], "one_token_seconds": 0.01, "pairs": null}')
    assert cost_table.load(path) is None  # the layout before stamps: timed again


def test_a_start_on_a_quiet_machine_times_a_table_stored_under_load_again(cache: Path) -> None:
    """The table a start reads decides every draft of the process: one timed while other work ran is replaced at
    the first quiet start, and the new timing's stamp is what live write-backs keep."""
    model = make_tiny_qwen2(dtype=torch.float32)
    path = cost_table.table_path(model)
    timings: list[cost_table.Timed] = [
        cost_table.Timed(CostModel(((1, 1.0), (8, 1.3)), one_token_seconds=0.02), 1000.0, Load(1.5, 2.0)),
        quiet(CostModel(((1, 1.0), (8, 2.0)), one_token_seconds=0.01), at=2000.0),
    ]
    calls: list[int] = []

    def measure(m: torch.nn.Module) -> cost_table.Timed:
        calls.append(1)
        return timings[len(calls) - 1]

    busy = cost_table.machine_cost(model, measure, busy_now=lambda: 0.0)
    assert busy.interpolated(8) == 1.3 and calls == [1]
    still = cost_table.machine_cost(model, measure, busy_now=lambda: 1.0)  # still busy: kept
    assert still.interpolated(8) == 1.3 and calls == [1]
    fresh = cost_table.machine_cost(model, measure, busy_now=lambda: 0.0)  # quiet now: timed again
    assert fresh.interpolated(8) == 2.0 and calls == [1, 1]
    for _ in range(PERSIST_EVERY):
        fresh.observe(1, 0.010)
        fresh.observe(8, 0.024)
        fresh.flush()
    stored = cost_table.load(path)
    assert stored is not None and stored.measured_at == 2000.0 and stored.load == Load(0.0, 1.05)
    assert stored.cost.interpolated(8) > 2.0  # the live passes' correction, under the timing's own stamp
    again = cost_table.machine_cost(model, measure, busy_now=lambda: 0.0)
    assert calls == [1, 1] and again.interpolated(8) == pytest.approx(stored.cost.interpolated(8))
