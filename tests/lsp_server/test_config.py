"""Settings parsing: valid values apply, invalid ones are reported and keep their previous values."""

from __future__ import annotations

from lookahead_lsp.lsp_server.config import Config, parse_config, settings_message, to_settings


def test_defaults_and_none() -> None:
    config, errors = parse_config(None)
    assert config == Config() and errors == []
    assert config.decoder == "lookahead" and config.window == 1 and config.ngram == 8
    from lookahead_lsp.decoder.slots import DEFAULT_SLOTS  # deferred: torch

    assert config.kv_slots == DEFAULT_SLOTS  # the README's default is the decoder's
    assert parse_config({"kvSlots": 0})[0].kv_slots == DEFAULT_SLOTS  # an invalid value keeps the previous one


def test_camel_case_values_apply() -> None:
    raw = {
        "model": "/models/qwen",
        "device": "cuda:1",
        "dtype": "bfloat16",
        "prefillDtype": "same",
        "weights": "dense",
        "decoder": "greedy",
        "window": 2,
        "ngram": 5,
        "verify": 4,
        "draftLength": 9,
        "maxNewTokens": 32,
        "kvSlots": 4,
        "multilineDeadlineMs": 1500,
        "lineDeadlineMs": 600,
        "lineCapMs": 4000,
        "progressive": False,
        "tokenBudget": 2048,
        "idleTokenBudget": 4096,
        "indexEnabled": False,
        "definitions": False,
        "include": ["*.py"],
        "exclude": ["build/"],
        "logFile": "/tmp/x.log",
        "enabled": False,
        "promptLayout": "spm",
        "blockEnd": "model",
        "backgroundPrefill": False,
        "threads": 1,
    }
    config, errors = parse_config(raw)
    assert errors == []
    assert config == Config(
        enabled=False,
        model="/models/qwen",
        device="cuda:1",
        dtype="bfloat16",
        prefill_dtype="same",
        weights="dense",
        decoder="greedy",
        window=2,
        ngram=5,
        verify=4,
        draft_length=9,
        max_new_tokens=32,
        kv_slots=4,
        multiline_deadline_ms=1500,
        line_deadline_ms=600,
        line_cap_ms=4000,
        progressive=False,
        token_budget=2048,
        idle_token_budget=4096,
        index_enabled=False,
        definitions=False,
        include=("*.py",),
        exclude=("build/",),
        log_file="/tmp/x.log",
        prompt_layout="spm",
        block_end="model",
        background_prefill=False,
        threads=1,
    )
    assert to_settings(config) == {**raw, "remote": None}


def test_block_end_auto_is_the_models_own_and_a_setting_wins() -> None:
    assert Config().block_end_for("embedded-1.5b") == "model"  # measured to end its middles
    assert Config().block_end_for("embedded") == "indent"
    assert Config().block_end_for("qwen2.5-coder-1.5b-base") == "indent"  # not measured: the dedent rule
    assert Config(block_end="model").block_end_for("embedded") == "model"
    config, errors = parse_config({"blockEnd": "eos"})
    assert config.block_end == "auto" and errors and "blockEnd" in errors[0]


def test_idle_budget_is_the_models_own_on_a_cpu_and_a_setting_wins() -> None:
    assert Config().idle_budget("cpu", "embedded-1.5b") == 1536  # measured to answer better with more of the file
    assert Config().idle_budget("cpu", "embedded") == 1024
    assert Config().idle_budget("cpu", "/models/other") == 512  # a model not measured: the keystrokes' budget
    assert Config().idle_budget("cuda", "embedded-1.5b") == 1024  # a GPU's budget is the long one already
    assert Config(token_budget=768).idle_budget("cpu", "embedded-1.5b") == 768  # the user's budget is kept
    assert Config(idle_token_budget=1536).idle_budget("cpu", "embedded") == 1536
    config, errors = parse_config({"idleTokenBudget": 10})
    assert config.idle_token_budget is None and errors and "idleTokenBudget" in errors[0]


def test_lookahead_section_is_unwrapped() -> None:
    config, errors = parse_config({"lookahead": {"window": 3}})
    assert errors == [] and config.window == 3


def test_invalid_values_keep_previous_and_say_why() -> None:
    previous = Config(window=2, max_new_tokens=40)
    config, errors = parse_config(
        {"window": "big", "maxNewTokens": 0, "decoder": "beam", "ngram": True, "device": "tpu", "ngram2": 1},
        previous,
    )
    assert config == previous
    assert len(errors) == 6
    joined = "\n".join(errors)
    assert "lookahead.window must be an integer" in joined and "keeping 2" in joined
    assert "lookahead.maxNewTokens must be from 1 to 2048, got 0" in joined
    assert "'lookahead', 'greedy'" in joined
    assert "unknown setting lookahead.ngram2" in joined


def test_valid_values_apply_next_to_invalid_ones() -> None:
    config, errors = parse_config({"window": 4, "verify": -1})
    assert config.window == 4 and config.verify is None
    assert len(errors) == 1 and "lookahead.verify" in errors[0]


def test_remote_settings() -> None:
    config, errors = parse_config({"decoder": "remote"})
    assert config.decoder == "lookahead" and "needs lookahead.remote.url" in errors[0]
    config, errors = parse_config({"decoder": "remote", "remote": {"url": "http://127.0.0.1:8000", "timeoutS": 5}})
    assert errors == [] and config.decoder == "remote" and not config.local
    assert config.remote is not None and config.remote.timeout_s == 5
    assert to_settings(config)["remote"]["url"] == "http://127.0.0.1:8000"
    config, errors = parse_config({"remote": {"timeoutS": "soon"}}, config)
    assert config.remote is not None and config.remote.timeout_s == 5 and "lookahead.remote.timeoutS" in errors[0]
    assert parse_config({"decoder": "lookahead"}, config)[0].model_key() != config.model_key()  # weights needed


def test_not_an_object() -> None:
    config, errors = parse_config([1, 2])
    assert config == Config() and errors == ["settings must be an object, got list"]


def test_keys_say_what_to_reload() -> None:
    base = Config()
    assert parse_config({"window": 3}, base)[0].model_key() == base.model_key()
    assert parse_config({"model": "x"}, base)[0].model_key() != base.model_key()
    assert parse_config({"exclude": ["a"]}, base)[0].index_key() != base.index_key()


def test_unusable_patterns_are_dropped_and_the_rest_applies() -> None:
    config, errors = parse_config({"include": ["[", "*.py"], "exclude": ["[z-a]", "build/", "!"]})
    assert config.include == ("*.py",) and config.exclude == ("build/",)
    assert len(errors) == 2, errors
    assert errors[0].startswith("lookahead.include: pattern '[' dropped (an unclosed '[')"), errors
    assert "'[z-a]' dropped" in errors[1] and "'!' dropped" in errors[1], errors
    config, errors = parse_config({"include": ["["]}, Config(include=("*.rs",)))
    assert config.include == () and len(errors) == 1  # no usable pattern left: no include filter


def test_all_problems_of_a_change_make_one_message() -> None:
    _, errors = parse_config({**{f"bad{i}": i for i in range(20)}, "window": "big"})
    message = settings_message(errors)
    assert message is not None and message.startswith("lookahead: 21 problems in the settings: ")
    assert message.endswith("; and 13 more (see the log)") and message.count("unknown setting") == 8
    assert settings_message(["lookahead.window must be an integer"]) == "lookahead: lookahead.window must be an integer"
    assert settings_message([]) is None
