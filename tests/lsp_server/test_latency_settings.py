"""Settings for latency (background prefill, prompt layout, threads), the idle job slot and edit positions."""

from __future__ import annotations

from lookahead_lsp.lsp_server.config import DEVICE_PROMPT_DEFAULTS, Config, parse_config
from lookahead_lsp.lsp_server.pipeline import edit_end
from lookahead_lsp.lsp_server.scheduler import Job, NewestWins


def test_latency_switches_parse_and_bad_values_keep_the_previous() -> None:
    config, errors = parse_config({"backgroundPrefill": False, "promptLayout": "psm-short", "threads": 2})
    assert errors == [] and not config.background_prefill
    assert config.prompt_layout == "psm-short" and config.threads == 2
    config, errors = parse_config({"promptLayout": "mps", "threads": 0, "backgroundPrefill": "yes"}, config)
    assert len(errors) == 3 and config.prompt_layout == "psm-short" and config.threads == 2
    assert parse_config({"tokenBudget": None, "threads": None})[0] == Config()


def test_auto_layout_and_budget_follow_the_device_and_on_a_cpu_the_model() -> None:
    assert Config().prompt_settings("cpu") == DEVICE_PROMPT_DEFAULTS["cpu"] == ("psm-line", 512)
    assert Config().prompt_settings("cpu", "embedded-1.5b") == ("psm-line", 512)  # asked at the line start
    assert Config().prompt_settings("cpu", "embedded") == ("psm-lines", 512)  # the 0.5B continues its "own" lines
    assert Config().prompt_settings("cuda", "embedded") == DEVICE_PROMPT_DEFAULTS["gpu"]
    assert Config(prompt_layout="psm-line").prompt_settings("cpu", "embedded") == ("psm-line", 512)
    assert Config(prompt_layout="psm", token_budget=300).prompt_settings("cuda") == ("psm", 300)
    assert parse_config({"promptLayout": "psm-lines"}) == (Config(prompt_layout="psm-lines"), [])


def _job(key: str, name: str) -> Job[str]:
    return Job(name, key, lambda cancel, queue_ms: name)


def test_idle_job_runs_only_when_nothing_real_waits_and_is_preempted() -> None:
    book: NewestWins[str] = NewestWins()
    warm = _job("a", "warm")
    assert book.submit_idle(warm) == []
    real = _job("b", "real")
    book.submit(real)  # a real job drops the queued idle one
    assert book.idle is None and book.take() is real
    book.finish(real)
    warm2 = _job("a", "warm2")
    book.submit_idle(warm2)
    assert book.take() is warm2 and book.running_idle
    book.submit(_job("c", "real2"))  # any real job cancels a running idle job, whatever its key
    assert warm2.token.cancelled
    newer = _job("a", "warm3")
    assert book.submit_idle(newer) == []
    book.finish(warm2)
    assert book.take().job_id == "real2"  # type: ignore[union-attr]


def test_edit_end_is_where_the_cursor_lands() -> None:
    assert edit_end("abc", "abXc") == 3
    assert edit_end("def f():\n    ", "def f():\n    return") == len("def f():\n    return")
    assert edit_end("x = 1\n", "x = 1\n\n    ") == len("x = 1\n\n    ")
    big = "a" * 100_000
    assert edit_end(big, big[:70_000] + "zz" + big[70_000:]) >= 70_002


def test_start_up_tuning_measures_threads_and_pass_costs():
    import torch

    from lookahead_lsp.decoder.cost_table import SIZES
    from lookahead_lsp.decoder.runtime.model import LoadedModel
    from lookahead_lsp.lsp_server.model_host import tune
    from tests.tiny_model import make_tiny_qwen2

    before = torch.get_num_threads()
    try:
        model = make_tiny_qwen2(dtype=torch.float32)
        loaded = LoadedModel(model, None, torch.device("cpu"), torch.float32, "tiny", 0.0, "hf-dir", "tiny")
        threads, cost = tune(loaded, None)
        assert threads is not None and threads >= 1
        assert cost is not None and [n for n, _ in cost.points] == list(SIZES)
        assert cost.points[0] == (1, 1.0)
    finally:
        torch.set_num_threads(before)
