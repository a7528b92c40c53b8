"""`lookahead-lsp model`: prepare (assemble, convert, cache) and load a model, then describe it.

Progress goes to stderr; the description (or ``--json``: one JSON object a model) to stdout. ``--prepare-only``
stops after the conversion cache, the packed codes and the native kernel (decoder/woq_native.py) are built, which
is what ``scripts/setup.sh`` runs, and removes the model's caches of older layouts (every matrix dequantized:
decoder/weights/embedded.py ``prune_legacy``; older packed formats: decoder/runtime/packed_model.py
``prune_older_packed``); ``--prepare SPEC`` is ``--spec SPEC --prepare-only``
(``lookahead-lsp model --prepare embedded-1.5b``), and repeated prepares each model in one process (torch and
transformers imported once). ``--get NAME`` downloads a Qwen2.5-Coder base GGUF from the Hugging Face hub
(``decoder/weights/base_models.py``, ``decoder/weights/hub_download.py``: resumable, sha256-checked, progress on
stderr) into the cache, where the ``model`` setting NAME then finds it; the only command that downloads.
``--spec auto`` loads the model the daemon's ``auto`` setting comes to on this machine, and says why.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TextIO

from lookahead_lsp.decoder.kernels.woq_native import native_kernel
from lookahead_lsp.decoder.runtime.model import ModelLoadError, load_model, resolve_spec
from lookahead_lsp.decoder.runtime.packed_model import prune_older_packed
from lookahead_lsp.decoder.weights.base_models import BASE_MODELS, find_base, installed_path, known_names
from lookahead_lsp.decoder.weights.cache import cache_root
from lookahead_lsp.decoder.weights.embedded import prune_legacy
from lookahead_lsp.lsp_server.cli import UsageError
from lookahead_lsp.lsp_server.model_choice import AUTO


class StderrProgress:
    """A ``progress(message, fraction)`` callback printing to stderr: each new message, then every 10%."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.message = ""
        self.shown = -1.0
        self.started = time.perf_counter()

    def __call__(self, message: str, fraction: float | None) -> None:
        if message != self.message:
            self.message, self.shown = message, -1.0
        elif fraction is None or fraction <= self.shown or (fraction < min(self.shown + 0.1, 1.0)):
            return
        elapsed = time.perf_counter() - self.started
        percent = "" if fraction is None else f" {fraction:4.0%}"
        print(f"[{elapsed:5.1f} s] {message}{percent}", file=self.stream, flush=True)
        self.shown = fraction if fraction is not None else self.shown


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--spec",
        default="embedded",
        help="embedded (default), embedded-1.5b, auto (as the daemon chooses on this machine, and why), a downloaded "
        "base model (--get), a transformers directory, a .gguf file, or a locally cached HF id",
    )
    parser.add_argument("--device", default="auto", help="auto (cuda, mps, cpu), cpu, cuda, cuda:N, mps")
    parser.add_argument("--dtype", default="auto", help="auto (bf16 on cuda, else fp32), float32, bfloat16, ...")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    parser.add_argument(
        "--prepare-only",
        action="store_true",
        help="only assemble and convert (build the cache); do not load the model",
    )
    parser.add_argument(
        "--prepare",
        metavar="SPEC",
        action="append",
        default=None,
        help="prepare SPEC only (same as --spec SPEC --prepare-only); repeated: each in turn, one process",
    )
    parser.add_argument(
        "--get",
        metavar="NAME",
        help="download a Qwen2.5-Coder base GGUF from the Hugging Face hub ($HF_ENDPOINT): "
        + ", ".join(f"{model.name} (~{model.approx_bytes / 1e9:.1f} GB)" for model in BASE_MODELS)
        + "; or its hub id",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")


def run(args: argparse.Namespace) -> int:
    if args.get is not None:
        return get(args.get, quiet=args.quiet, as_json=args.json)
    progress = None if args.quiet else StderrProgress()
    specs = args.prepare or [args.spec]
    if (args.prepare or args.prepare_only) and AUTO in specs:
        raise UsageError("auto is chosen when a model loads (model --spec auto); prepare embedded or embedded-1.5b")
    try:
        if args.prepare or args.prepare_only:
            described = [prepare(spec, progress) for spec in specs]
        else:
            described = [loaded_description(args.spec, args.device, args.dtype, progress)]
    except ModelLoadError as exc:
        raise UsageError(str(exc)) from exc
    for info in described:
        if args.json:
            print(json.dumps(info))
            continue
        for key, value in info.items():
            print(f"{key}: {value:,}" if isinstance(value, int) and not isinstance(value, bool) else f"{key}: {value}")
    return 0


def loaded_description(spec: str, device: str, dtype: str, progress: StderrProgress | None) -> dict[str, object]:
    """Load ``spec`` and describe it; ``auto`` is chosen as the daemon chooses (``lsp_server/model_host.py``
    ``load_setting``: the stored or freshly timed figures of this machine), and the description says why."""
    choice = None
    if spec == AUTO:
        from lookahead_lsp.lsp_server.config import Config
        from lookahead_lsp.lsp_server.model_host import load_setting

        def warn(line: str) -> None:
            print(f"warning: {line}", file=sys.stderr, flush=True)

        choice, loaded, _ = load_setting(Config(model=AUTO, device=device, dtype=dtype), progress or _silent, warn)
    else:
        loaded = load_model(spec, device, dtype, progress)
    info: dict[str, object] = {} if choice is None else {"setting": AUTO, "reason": choice.reason}
    return {
        "spec": loaded.spec,
        **info,
        "source": loaded.source,
        "path": loaded.path,
        "device": str(loaded.device),
        "dtype": str(loaded.dtype).removeprefix("torch."),
        "parameters": loaded.parameters,
        "weights": loaded.weights,
        "load_seconds": round(loaded.load_seconds, 2),
    }


def _silent(message: str, fraction: float | None) -> None:
    """A progress callback that shows nothing (``--quiet``)."""


def prepare(spec: str, progress: StderrProgress | None) -> dict[str, object]:
    """Build ``spec``'s caches (conversion, packed codes, the native kernel), remove its older-layout cache."""
    started = time.perf_counter()
    where, source = resolve_spec(spec, progress, pack=True)
    info: dict[str, object] = {"spec": spec, "source": source, "path": where}
    info["native_kernel"] = native_kernel() is not None  # built now, once per machine (decoder/woq_native.py)
    if source.startswith(("embedded", "gguf")):
        sha256 = Path(where).name
        info["older_cache_removed_bytes"] = prune_legacy(sha256) + prune_older_packed(cache_root(), sha256)
    info["prepare_seconds"] = round(time.perf_counter() - started, 2)
    return info


def get(name: str, quiet: bool = False, as_json: bool = False) -> int:
    """``--get NAME``: the base model downloaded and checked (quick where it is already); its path on stdout."""
    from lookahead_lsp.decoder.weights.hub_download import DownloadError, fetch

    model = find_base(name)
    if model is None:
        raise UsageError(f"{name!r} is not a downloadable base model; model names: {known_names()}")
    dest = installed_path(model)

    def say(line: str) -> None:
        if not quiet:
            print(f"get: {line}", file=sys.stderr, flush=True)

    say(f"{model.describe()} into {dest.parent}")
    try:
        sha256 = fetch(model.repo, model.filename, dest, say)
    except DownloadError as exc:
        print(f"get: cannot get {model.name}: {exc}", file=sys.stderr, flush=True)
        return 1
    info = {"model": model.name, "repo": model.repo, "path": str(dest), "sha256": sha256}
    if as_json:
        print(json.dumps(info))
    else:
        for key, value in info.items():
            print(f"{key}: {value}")
    return 0
