"""The daemon's settings: one frozen dataclass and a pure parser for the client's JSON.

Settings arrive as ``initializationOptions`` and ``workspace/didChangeConfiguration`` (section
``"lookahead"``), in camelCase. :func:`parse_config` applies the valid values on top of the previous
settings and returns one readable reason for each invalid one; an invalid value keeps its previous value,
except a list of include/exclude patterns, which keeps its usable patterns (a bad one is dropped, reported).
:func:`settings_message` makes all the problems of one change one message for the user.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from lookahead_lsp.context.workspace import split_patterns
from lookahead_lsp.decoder.remote import RemoteConfig, parse_remote_config

DecoderKind = Literal["lookahead", "greedy", "remote"]
LayoutSetting = Literal["auto", "psm", "spm", "psm-short", "psm-line", "psm-lines"]
BlockEnd = Literal["indent", "model"]

SECTION = "lookahead"

DEVICE_PROMPT_DEFAULTS: dict[str, tuple[str, int]] = {
    # Chosen from the measured layout/budget curve (docs/benchmarks.md, "Prompt layout and budget").
    "cpu": ("psm-line", 512),
    "gpu": ("psm", 1024),
    "remote": ("psm", 1024),  # the engine keeps its own cache; the layout the model was trained on
}
"""(layout, token budget) for ``promptLayout: "auto"`` / ``tokenBudget: null`` by where tokens are generated."""
MODEL_CPU_LAYOUTS: dict[str, str] = {"embedded": "psm-lines"}
"""``promptLayout: "auto"`` on a CPU for the models that answer better in another layout than the device's: the
0.5B Instruct continues lines it takes for its own better than it fills in at a line start (HumanEval infilling
in three languages, docs/benchmarks.md); the 1.5B, like the models trained for it, answers best asked at the
line start, as the Qwen2.5-Coder report's protocol asks."""

MODEL_CPU_IDLE_BUDGETS: dict[str, int] = {"embedded": 1024, "embedded-1.5b": 1536}
"""``idleTokenBudget: null`` on a CPU for the models measured to answer better with a longer prompt: the token
budget a document's prompt grows to once the daemon has prefilled it in idle time (the keystrokes after it then
re-prefill only what they change: ``context/anchors.py``). Each model takes the longest prompt measured whose first
ghost text after a pause stays within 10% of a 512-token prompt's (medians of 3 runs on cattrs: the 1.5B 1.01x on
1024 tokens, 1.08x on 1536, 1.14x on 2048; the 0.5B 1.06x, 1.09x, 1.25x (2048: one run)), unless a shorter one answers
as well. Cross-file holes of rich and cattrs (80 each, each file prefilled before the key; docs/benchmarks.md, "A
prompt that grows in idle time" to "1536 tokens"), exact on 512 / 1024 / 1536 / 2048 tokens: the 1.5B 53 / 63 /
67 / 71 of 160; the 0.5B 38 / 47 / 48 / 52, so the 0.5B keeps 1024 (as good as 1536 and sooner). In-file holes
on these budgets: the 1.5B 62 of 160 against 59 on 512, the 0.5B 34 against 35."""

MODEL_BLOCK_ENDS: dict[str, BlockEnd] = {"embedded-1.5b": "model"}
"""``blockEnd: "auto"`` for the models measured to end their middles themselves (``model``: a block ends at the
model's end-of-text token, not where a line dedents out of the cursor's block). The 1.5B Instruct does: asked
plainly it passes 99 of HumanEval's 164 multi-line holes, the dedent rule cut it to 79. The 0.5B Instruct does
not (asked plainly it writes on past the hole: 4 of 164) and every other model keeps ``indent`` until measured
(docs/benchmarks.md, "Where a block ends")."""


@dataclass(frozen=True)
class Config:
    """Everything the client may set. Field names are the snake_case of the camelCase settings."""

    enabled: bool = True
    # "auto" (a downloaded base model the machine carries, else the 1.5B where installed and fast enough here, else
    # the 0.5B: lsp_server/model_choice.py), "embedded", "embedded-1.5b", a downloaded base model
    # ("qwen2.5-coder-1.5b-base" or its hub id: decoder/weights/base_models.py), an HF id, a directory or a .gguf
    # (remote: its tokenizer)
    model: str = "auto"
    device: str = "auto"  # "auto", "cpu", "cuda", "cuda:1", "mps"
    dtype: str = "auto"  # "auto", "float32", "float16", "bfloat16"
    prefill_dtype: str = "auto"  # "auto" (bf16 for fp32 on a CPU with bf16 instructions), "same", or a dtype
    weights: str = "auto"  # "auto" (a GGUF's own codes on a CPU: decoder/packed_model.py), "gguf", "dense"
    decoder: DecoderKind = "lookahead"
    window: int = 1  # lookahead W
    ngram: int = 8  # lookahead N
    verify: int | None = None  # lookahead G; None: the decoder's own default
    draft_length: int = 15  # longest prompt/suffix/workspace draft verified in one pass (tokens)
    max_new_tokens: int = 128  # a block the model ends itself (blockEnd "model") is often longer than 64
    kv_slots: int = 2  # KV caches kept, one per document (decoder/slots.py's DEFAULT_SLOTS)
    multiline_deadline_ms: int | None = 800  # a block still decoding this long after the key ends at a line end
    line_deadline_ms: int | None = 600  # a first line still decoding this long after the key ends at its line end
    line_cap_ms: int | None = 2500  # a first line still decoding this long after the key ends at a word end
    progressive: bool = True  # a block's first whole line, or a deadline, shows what is there; decoding goes on
    token_budget: int | None = None  # prompt tokens at most; None: by device (DEVICE_PROMPT_DEFAULTS)
    idle_token_budget: int | None = None  # a CPU prompt's budget once prefilled in idle time; None: by model
    prompt_layout: LayoutSetting = "auto"  # psm, spm, psm-short, psm-line(s) (context/prompt.py); "auto": by device
    block_end: BlockEnd | Literal["auto"] = "auto"  # "indent", "model" (context/postprocess.py); "auto": by model
    background_prefill: bool = True  # prefill the next prompt in idle time (preempted by any request)
    threads: int | None = None  # torch intra-op threads on CPU; None: the physical cores
    index_enabled: bool = True
    definitions: bool = True  # definitions of the names the cursor uses from other files (context/definitions.py)
    include: tuple[str, ...] = ()  # gitignore-style patterns the workspace index adds back
    exclude: tuple[str, ...] = ()  # gitignore-style patterns the workspace index skips
    log_file: str | None = None
    remote: RemoteConfig | None = None  # the engine for decoder "remote" (docs/remote-engines.md)

    @property
    def local(self) -> bool:
        """Whether tokens are generated in-process (so the model's weights are needed)."""
        return self.decoder != "remote"

    def model_key(self) -> tuple[str, str, str, str, str, bool]:
        """Settings whose change means loading another model (or only its tokenizer, for remote)."""
        return (self.model, self.device, self.dtype, self.prefill_dtype, self.weights, self.local)

    def decoder_key(self) -> tuple[Any, ...]:
        """Settings whose change means another decoder over the same model."""
        return (self.decoder, self.window, self.ngram, self.verify, self.draft_length, self.kv_slots, self.remote)

    def prompt_settings(self, device_type: str, model: str = "") -> tuple[str, int]:
        """The (layout name, token budget) in force on a device type ("cpu", "cuda", "mps", ... or "remote") for
        the model the ``model`` setting came to (``auto``: the one chosen)."""
        kind = device_type if device_type == "remote" else "cpu" if device_type in ("cpu", "mps") else "gpu"
        layout, budget = DEVICE_PROMPT_DEFAULTS[kind]
        layout = MODEL_CPU_LAYOUTS.get(model, layout) if kind == "cpu" else layout
        return (
            layout if self.prompt_layout == "auto" else self.prompt_layout,
            budget if self.token_budget is None else self.token_budget,
        )

    def idle_budget(self, device_type: str, model: str = "") -> int:
        """The token budget a document's prompt grows to in idle time for the model the ``model`` setting came
        to: the setting, or the model's own on a CPU (``MODEL_CPU_IDLE_BUDGETS``); else the keystrokes' budget
        (no growth)."""
        if self.idle_token_budget is not None:
            return self.idle_token_budget
        budget = self.prompt_settings(device_type, model)[1]
        cpu = device_type in ("cpu", "mps")
        return MODEL_CPU_IDLE_BUDGETS.get(model, budget) if cpu and self.token_budget is None else budget

    def block_end_for(self, model: str) -> BlockEnd:
        """Where a block ends for the model the ``model`` setting came to: the setting, or the model's own."""
        return MODEL_BLOCK_ENDS.get(model, "indent") if self.block_end == "auto" else self.block_end

    def index_key(self) -> tuple[bool, tuple[str, ...], tuple[str, ...]]:
        """Settings whose change means rebuilding the workspace index."""
        return (self.index_enabled, self.include, self.exclude)


Check = Callable[[Any], "tuple[Any, str | None]"]
"""A value's check: (value, None) when valid; (None, why) when invalid; (value, why): its valid part applies."""


def _ok(value: Any) -> tuple[Any, None]:
    return value, None


def _bool(value: Any) -> tuple[Any, str | None]:
    return (value, None) if isinstance(value, bool) else (None, "must be true or false")


def _int_between(low: int, high: int) -> Check:
    def check(value: Any) -> tuple[Any, str | None]:
        if isinstance(value, bool) or not isinstance(value, int):
            return None, f"must be an integer from {low} to {high}"
        if not low <= value <= high:
            return None, f"must be from {low} to {high}, got {value}"
        return _ok(value)

    return check


def _optional(check: Check) -> Check:
    def optional(value: Any) -> tuple[Any, str | None]:
        return (None, None) if value is None else check(value)

    return optional


def _text(value: Any) -> tuple[Any, str | None]:
    if not isinstance(value, str) or not value.strip():
        return None, "must be a non-empty string"
    return _ok(value.strip())


def _one_of(*choices: str) -> Check:
    def check(value: Any) -> tuple[Any, str | None]:
        if value not in choices:
            return None, f"must be one of {', '.join(repr(c) for c in choices)}, got {value!r}"
        return _ok(value)

    return check


def _device(value: Any) -> tuple[Any, str | None]:
    text, error = _text(value)
    if error:
        return None, error
    if text in ("auto", "cpu", "mps") or text == "cuda" or (text.startswith("cuda:") and text[5:].isdigit()):
        return _ok(text)
    return None, f"must be 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps', got {value!r}"


def _patterns(value: Any) -> tuple[Any, str | None]:
    """Gitignore-style patterns; those that cannot be used are dropped (the rest applies, with the reason)."""
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        return None, "must be a list of strings"
    good, bad = split_patterns(value)
    if bad:
        return tuple(good), "; ".join(f"pattern {pattern!r} dropped ({why})" for pattern, why in bad)
    return _ok(tuple(value))


_SETTINGS: dict[str, tuple[str, Check]] = {
    "enabled": ("enabled", _bool),
    "model": ("model", _text),
    "device": ("device", _device),
    "dtype": ("dtype", _one_of("auto", "float32", "float16", "bfloat16")),
    "prefillDtype": ("prefill_dtype", _one_of("auto", "same", "float32", "float16", "bfloat16")),
    "weights": ("weights", _one_of("auto", "gguf", "dense")),
    "decoder": ("decoder", _one_of("lookahead", "greedy", "remote")),
    "window": ("window", _int_between(1, 16)),
    "ngram": ("ngram", _int_between(2, 32)),
    "verify": ("verify", _optional(_int_between(0, 64))),
    "draftLength": ("draft_length", _int_between(1, 64)),
    "maxNewTokens": ("max_new_tokens", _int_between(1, 2048)),
    "kvSlots": ("kv_slots", _int_between(1, 16)),
    "multilineDeadlineMs": ("multiline_deadline_ms", _optional(_int_between(0, 600_000))),
    "lineDeadlineMs": ("line_deadline_ms", _optional(_int_between(0, 600_000))),
    "lineCapMs": ("line_cap_ms", _optional(_int_between(0, 600_000))),
    "progressive": ("progressive", _bool),
    "tokenBudget": ("token_budget", _optional(_int_between(64, 32768))),
    "idleTokenBudget": ("idle_token_budget", _optional(_int_between(64, 32768))),
    "promptLayout": ("prompt_layout", _one_of("auto", "psm", "spm", "psm-short", "psm-line", "psm-lines")),
    "blockEnd": ("block_end", _one_of("auto", "indent", "model")),
    "backgroundPrefill": ("background_prefill", _bool),
    "threads": ("threads", _optional(_int_between(1, 256))),
    "indexEnabled": ("index_enabled", _bool),
    "definitions": ("definitions", _bool),
    "include": ("include", _patterns),
    "exclude": ("exclude", _patterns),
    "logFile": ("log_file", _optional(_text)),
}


def parse_config(raw: Any, previous: Config | None = None) -> tuple[Config, list[str]]:
    """Apply the client's settings on top of ``previous``: ``(config, errors)``, one error per bad value.

    ``raw`` may be ``None`` (nothing changes), the settings themselves or an object holding them under
    ``"lookahead"``; that section ``null`` means the defaults. Unknown keys are reported and ignored; a bad
    value keeps its previous value.
    """
    config, where = previous or Config(), "settings"
    if isinstance(raw, Mapping) and SECTION in raw:
        if raw[SECTION] is None:
            return Config(), []
        raw, where = raw[SECTION], f"settings section {SECTION!r}"
    if raw is None:
        return config, []
    if not isinstance(raw, Mapping):
        return config, [f"{where} must be an object, got {type(raw).__name__}"]
    changes: dict[str, Any] = {}
    errors: list[str] = []
    for key, value in raw.items():
        if key == "remote":
            remote, remote_errors = parse_remote_config(value, config.remote, prefix=f"{SECTION}.remote")
            errors += remote_errors
            changes["remote"] = remote
            continue
        if key not in _SETTINGS:
            errors.append(f"unknown setting {SECTION}.{key}")
            continue
        field_name, check = _SETTINGS[key]
        parsed, error = check(value)
        if error and parsed is None:
            errors.append(f"{SECTION}.{key} {error}; keeping {getattr(config, field_name)!r}")
            continue
        changes[field_name] = parsed
        if error:
            errors.append(f"{SECTION}.{key}: {error}")
    if changes.get("decoder", config.decoder) == "remote" and changes.get("remote", config.remote) is None:
        errors.append(f"{SECTION}.decoder 'remote' needs {SECTION}.remote.url; keeping {config.decoder!r}")
        changes["decoder"] = config.decoder
    return dataclasses.replace(config, **changes), errors


def settings_message(problems: Sequence[str], limit: int = 8) -> str | None:
    """All the problems of one settings change as one message for the user (None: there are none); past
    ``limit`` of them only their number is given."""
    if not problems:
        return None
    if len(problems) == 1:
        return f"{SECTION}: {problems[0]}"
    more = f"; and {len(problems) - limit} more (see the log)" if len(problems) > limit else ""
    return f"{SECTION}: {len(problems)} problems in the settings: {'; '.join(problems[:limit])}{more}"


def to_settings(config: Config) -> dict[str, Any]:
    """The camelCase settings object for a config (what ``lookahead.stats`` reports; no secrets in it)."""
    settings = {key: _jsonable(getattr(config, name)) for key, (name, _) in _SETTINGS.items()}
    settings["remote"] = config.remote.to_settings() if config.remote else None
    return settings


def _jsonable(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value
