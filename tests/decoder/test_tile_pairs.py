"""Which narrow passes take the two-tile loop (decoder/tile_pairs.py): chosen by timing, stored, read back, set."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest
import torch

from lookahead_lsp.decoder import cost_table, tile_pairs
from lookahead_lsp.decoder.kernels.woq_native import WoqKernel
from lookahead_lsp.decoder.runtime.packed_model import pack_gguf, use_packed
from lookahead_lsp.decoder.timing_load import BUSY_LIMIT, Load
from tests.decoder.test_packed import write_tiny_gguf
from tests.tiny_model import make_tiny_qwen2


def test_one_tile_at_a_time_is_kept_only_where_its_fastest_pass_is_clearly_faster() -> None:
    # seconds a pass of n tokens takes: two by two 20% faster at 1 and 2 tokens, 10% slower at 3, 1% faster at 4
    # (a tie: the two-tile loop, the one the weights' order is for)
    cost = {(1, False): 1.0, (1, True): 0.8, (2, False): 1.2, (2, True): 0.96, (3, False): 1.4, (3, True): 1.54}
    cost |= {(4, False): 1.6, (4, True): 1.584}
    calls: list[tuple[int, bool]] = []

    def time_pass(n: int, paired: bool) -> float:
        calls.append((n, paired))
        disturbed = 3.0 if len(calls) in (2, 10) else 1.0  # two passes slowed by other work: their width's other
        return cost[n, paired] * disturbed  # rounds count, and the one-token pass's rounds disagree by 3x

    assert tile_pairs.choose(time_pass, rounds=3) == (0b1011, 3.0)
    assert len(calls) == 3 * 4 * 2
    assert calls[:2] == [(1, False), (1, True)] and calls[8:10] == [(1, True), (1, False)]  # the order alternates


@pytest.fixture(scope="module")
def gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    write_tiny_gguf(make_tiny_qwen2(vocab_size=512, seed=1, dtype=torch.float32), path)
    return path


def packed_on(kernel: WoqKernel, gguf: Path) -> torch.nn.Module:
    model = make_tiny_qwen2(vocab_size=512, seed=1, dtype=torch.float32)
    use_packed(model, pack_gguf(gguf), kernel=kernel)
    return model


def test_the_choice_is_timed_once_stored_read_back_and_set_at_every_level(
    levels: dict[str, WoqKernel], gguf: Path
) -> None:
    for kernel in levels.values():
        model = packed_on(kernel, gguf)
        assert tile_pairs.model_kernel(model) is kernel
        timed: list[WoqKernel] = []

        def measure(m: torch.nn.Module, k: WoqKernel, timed: list[WoqKernel] = timed) -> tile_pairs.Choice:
            timed.append(k)
            return tile_pairs.Choice(0b0101, time.time(), Load(0.0, 1.1))

        path = tile_pairs.pairs_path(cost_table.table_path(model))
        assert path.parent == kernel.library.parent and path.name.startswith("pairs-")  # beside the table
        before = kernel.pair_rows()
        if before is None:  # below AVX-512: no two-tile loop, nothing timed or stored
            assert tile_pairs.settle(model, path, measure) is None and timed == []
            assert not path.exists()
            continue
        try:
            kernel.pair_rows(0)
            assert tile_pairs.settle(model, path, measure) == 0b0101 and kernel.pair_rows() == 0b0101
            kernel.pair_rows(0)
            assert tile_pairs.settle(model, path, measure) == 0b0101 and kernel.pair_rows() == 0b0101  # read back
            assert timed == [kernel]
            real = tile_pairs.measure(model, kernel)  # the model's own passes (timings too noisy to assert)
            assert 0 <= real.mask < 16 and real.load.busy is not None and real.load.spread is not None
            assert real.load.spread >= 1.0 and abs(real.measured_at - time.time()) < 60
        finally:
            kernel.pair_rows(before)


def test_a_choice_timed_under_load_or_before_the_kernel_build_is_timed_again(
    levels: dict[str, WoqKernel], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Stored as "none" while other work ran, the choice is timed again at the next quiet start; on a machine
    still busy it is kept and the log says so; one timed before the kernel was built is timed again whatever the
    load; a file of the first version (no load recorded) too."""
    library = next(iter(levels.values())).library
    built = library.stat().st_mtime
    path = tmp_path / "pairs-woq-avx512-0-0.json"
    assert tile_pairs.stored_choice(path, library, 0.0) == (None, "none stored")
    loaded = tile_pairs.Choice(0, built + 60, Load(BUSY_LIMIT + 1.0, 1.1))
    tile_pairs.store(path, loaded)
    assert tile_pairs.load(path) == loaded and loaded.load.under_load()
    with caplog.at_level(logging.WARNING, logger="lookahead_lsp.decoder.timing_load"):
        kept, reason = tile_pairs.stored_choice(path, library, BUSY_LIMIT + 1.0)
    assert kept == loaded and "still busy" in reason and "still busy" in caplog.text  # kept, flagged
    assert tile_pairs.stored_choice(path, library, BUSY_LIMIT)[0] is None  # quiet now: timed again
    assert "quiet now" in tile_pairs.stored_choice(path, library, 0.0)[1]
    spread = tile_pairs.Choice(0, built + 60, Load(0.0, 3.0))  # rounds 3x apart: as if other work ran
    tile_pairs.store(path, spread)
    assert tile_pairs.stored_choice(path, library, 0.0)[0] is None
    quiet = tile_pairs.Choice(0b1100, built + 60, Load(0.1, 1.1))
    tile_pairs.store(path, quiet)
    kept, reason = tile_pairs.stored_choice(path, library, BUSY_LIMIT + 1.0)  # quiet when timed: busy now or not
    assert kept == quiet and "timed on a quiet machine" in reason
    tile_pairs.store(path, tile_pairs.Choice(0b1100, built - 60, Load(0.1, 1.1)))  # before the build
    old, reason = tile_pairs.stored_choice(path, library, 0.0)
    assert old is None and "older than the kernel build" in reason
    path.write_text(json.dumps({"version": 1, "mask": 0}))  # the first version's file: no load recorded
    assert tile_pairs.stored_choice(path, library, 0.0) == (None, "none stored")


def test_an_unreadable_choice_is_timed_again(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "pairs-woq-avx512-0-0.json"
    old = '{"version": 2, "mask": 3, "measured_at": 5.0, "busy": 0.25, "spread": 1.5}'  # timed the other way round
    for text in ('{"version": 3, "mask": 16}', '{"version": 1, "mask": 3}', '{"version": 3, "mask": "3"}', old):
        path.write_text(text)
        assert tile_pairs.load(path) is None
    path.write_text("{not json")
    with caplog.at_level(logging.WARNING, logger="lookahead_lsp.decoder.tile_pairs"):
        assert tile_pairs.load(path) is None
    assert "timing it again" in caplog.text
    path.write_text('{"version": 3, "mask": 3, "measured_at": 5.0, "busy": 0.25, "spread": 1.5}')
    assert tile_pairs.load(path) == tile_pairs.Choice(3, 5.0, Load(0.25, 1.5))
    assert tile_pairs.load(tmp_path / "absent.json") is None
    assert tile_pairs.describe(None).endswith("none at this level")
    assert tile_pairs.describe(0b0101).endswith("of: 1, 3") and tile_pairs.describe(0).endswith("of: none")
