"""Which narrow passes take the two-tile loop (decoder/tile_pairs.py): chosen by timing, stored, read back, set."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch

from lookahead_lsp.decoder import cost_table, tile_pairs
from lookahead_lsp.decoder.kernels.woq_native import WoqKernel
from lookahead_lsp.decoder.runtime.packed_model import pack_gguf, use_packed
from tests.decoder.test_packed import write_tiny_gguf
from tests.tiny_model import make_tiny_qwen2


def test_the_two_tile_loop_is_kept_only_where_its_fastest_pass_is_clearly_faster() -> None:
    # seconds a pass of n tokens takes: two by two 20% faster at 1 and 2 tokens, 10% slower at 3, 1% faster at 4
    cost = {(1, False): 1.0, (1, True): 0.8, (2, False): 1.2, (2, True): 0.96, (3, False): 1.4, (3, True): 1.54}
    cost |= {(4, False): 1.6, (4, True): 1.584}
    calls: list[tuple[int, bool]] = []

    def time_pass(n: int, paired: bool) -> float:
        calls.append((n, paired))
        disturbed = 3.0 if len(calls) == 2 else 1.0  # one pass slowed by other work: its width's other rounds count
        return cost[n, paired] * disturbed

    assert tile_pairs.choose(time_pass, rounds=3) == 0b0011
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

        def measure(m: torch.nn.Module, k: WoqKernel, timed: list[WoqKernel] = timed) -> int:
            timed.append(k)
            return 0b0101

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
            assert 0 <= real < 16
        finally:
            kernel.pair_rows(before)


def test_an_unreadable_choice_is_timed_again(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "pairs-woq-avx512-0-0.json"
    for text in ('{"version": 1, "mask": 16}', '{"version": 0, "mask": 3}', '{"mask": "3"}'):
        path.write_text(text)
        assert tile_pairs.load(path) is None
    path.write_text("{not json")
    with caplog.at_level(logging.WARNING, logger="lookahead_lsp.decoder.tile_pairs"):
        assert tile_pairs.load(path) is None
    assert "timing it again" in caplog.text
    path.write_text('{"version": 1, "mask": 3}')
    assert tile_pairs.load(path) == 3
    assert tile_pairs.load(tmp_path / "absent.json") is None
    assert tile_pairs.describe(None).endswith("none at this level")
    assert tile_pairs.describe(0b0101).endswith("of: 1, 3") and tile_pairs.describe(0).endswith("of: none")
