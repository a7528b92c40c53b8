"""Base models by download, end to end against a local hub stand-in (tests/hub_server.py) serving a real GGUF (the
tiny random Qwen2 written as Q8_0 with the embedded tokenizer: tests/gguf_model.py): ``lookahead-lsp model --get``
prints progress on stderr, resumes a cut connection and refuses a wrong sha256; the downloaded model then loads by
its name and by its hub id on the GGUF's own codes; ``auto`` prefers it; a name not downloaded or unknown is a
clear error; and a larger base model is timed for ``auto`` as the 1.5B is, its figures kept until they expire."""

from __future__ import annotations

import functools
import json
import logging
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from lookahead_lsp.decoder import timing_load
from lookahead_lsp.decoder.runtime.model import ModelLoadError, load_model, resolve_spec
from lookahead_lsp.decoder.weights.base_models import BASE_MODELS, find_base, installed_bases, installed_path
from lookahead_lsp.lsp_server import cli, model_choice, model_figures, model_host
from lookahead_lsp.lsp_server.config import Config
from lookahead_lsp.lsp_server.model_choice import Aim
from lookahead_lsp.lsp_server.model_host import choose
from tests.hub_server import HubServer

SMALL_BASE = "qwen2.5-coder-0.5b-base"
REPO = "ggml-org/Qwen2.5-Coder-0.5B-Q8_0-GGUF"


@pytest.fixture()
def cache(kernel_cache: Path, monkeypatch: pytest.MonkeyPatch, keep_logging: None) -> Iterator[Path]:
    """The module's own cache root, without any downloaded base model at the start of each test."""
    monkeypatch.setenv("LOOKAHEAD_LSP_CACHE", str(kernel_cache))
    shutil.rmtree(kernel_cache / "base-models-v1", ignore_errors=True)
    yield kernel_cache
    shutil.rmtree(kernel_cache / "base-models-v1", ignore_errors=True)


def _get(name: str, hub: HubServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> tuple:
    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
    status = cli.main(["model", "--get", name])
    out, err = capsys.readouterr()
    return status, out, err


def _no_choice_log(_message: str, _fraction: float | None) -> None:
    pass


def test_get_downloads_resumes_and_the_model_loads_by_name_and_id(
    cache: Path, tiny_base_gguf: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with HubServer(REPO, tiny_base_gguf, cut_once=True) as hub:
        status, out, err = _get(SMALL_BASE, hub, monkeypatch, capsys)
    assert status == 0, err
    base = find_base(SMALL_BASE)
    assert base is not None and base.repo == REPO and base.filename == "qwen2.5-coder-0.5b-q8_0.gguf"
    path = installed_path(base)
    assert path.parent == cache / "base-models-v1" and path.read_bytes() == tiny_base_gguf.read_bytes()
    assert f"path: {path}" in out.splitlines() and f"model: {SMALL_BASE}" in out.splitlines()
    lines = err.splitlines()
    assert all(line.startswith("get: ") for line in lines), lines
    assert any("connection lost" in line for line in lines) and any("resuming at" in line for line in lines)
    assert any("(100%)" in line for line in lines) and lines[-1].endswith(f"sha256 checked, at {path}")
    assert len(hub.ranges) == 2 and hub.ranges[1] is not None
    assert installed_bases() == [base]

    loaded = load_model(SMALL_BASE, device="cpu")
    assert loaded.spec == SMALL_BASE and loaded.source.startswith("gguf-") and loaded.weights.startswith("gguf-")
    assert 19_400_000 < loaded.parameters < 19_600_000  # the tiny model's: 151,936 x 64 embedding, two small layers
    ids = loaded.tokenizer("<|fim_prefix|>def add(a, b):\n    return <|fim_suffix|>\n<|fim_middle|>")["input_ids"]
    assert ids[0] == 151659  # the embedded tokenizer's <|fim_prefix|>, from the GGUF's own metadata
    from lookahead_lsp.decoder.greedy import GreedyDecoder
    from lookahead_lsp.decoder.types import DecodeRequest

    result = GreedyDecoder(loaded.model).generate(DecodeRequest(ids, 4))
    assert len(result.token_ids) == 4
    assert resolve_spec(REPO)[0] == resolve_spec(SMALL_BASE)[0]  # the hub id names the same download

    choice, held = choose(Config(model="auto"), _no_choice_log, lambda text: None)
    assert choice.spec == SMALL_BASE and held is None  # the 0.5B size needs no timing
    assert "downloaded base model" in choice.reason and choice.to_json()["size"] == "0.5B"

    with HubServer(REPO, tiny_base_gguf) as hub:  # a second --get finds it there and checks with the hub only
        status, out, err = _get(REPO, hub, monkeypatch, capsys)
    assert status == 0 and hub.ranges == [] and "already downloaded" in err


def test_a_wrong_sha256_is_refused_and_the_model_is_not_served(
    cache: Path, tiny_base_gguf: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with HubServer(REPO, tiny_base_gguf, wrong_sha256=True) as hub:
        status, out, err = _get(SMALL_BASE, hub, monkeypatch, capsys)
    assert status == 1 and out == ""
    assert f"cannot get {SMALL_BASE}" in err and "the download was removed, not kept" in err
    assert installed_bases() == [] and not any((cache / "base-models-v1").iterdir())
    with pytest.raises(ModelLoadError) as raised:
        load_model(SMALL_BASE, device="cpu")
    assert str(raised.value).startswith(f"{SMALL_BASE} is not downloaded: run `lookahead-lsp model --get {SMALL_BASE}`")
    source = cache / "a.py"
    source.write_text("x = 1\n")
    status = cli.main(["complete", str(source), "--line", "0", "--character", "0", "--model", SMALL_BASE, "--no-index"])
    err = capsys.readouterr().err
    assert status == 2 and f"run `lookahead-lsp model --get {SMALL_BASE}`" in err  # never a download of its own


def test_unknown_names_list_the_known_ones(
    cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    status = cli.main(["model", "--get", "qwen2.5-coder-9b-base"])
    err = capsys.readouterr().err
    assert status == 2 and "'qwen2.5-coder-9b-base' is not a downloadable base model" in err
    assert all(model.name in err for model in BASE_MODELS) and "embedded-1.5b" in err
    with pytest.raises(ModelLoadError) as raised:
        resolve_spec("qwen2.5-coder-9b-base")
    assert "model names: auto, embedded, embedded-1.5b, qwen2.5-coder-0.5b-base" in str(raised.value)


def test_a_larger_base_model_is_timed_for_auto_and_timed_again_when_its_figures_expire(
    cache: Path, tiny_base_gguf: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The tiny model installed as the 1.5B base: fast, so ``auto`` takes it once timed (loaded by the timing);
    the next start keeps its stored figures; figures older than the kernel build are timed again."""
    base = find_base("qwen2.5-coder-1.5b-base")
    assert base is not None
    path = installed_path(base)
    path.parent.mkdir(parents=True)
    shutil.copyfile(tiny_base_gguf, path)
    path.with_name(path.name + ".sha256").write_text("0" * 64)
    monkeypatch.setattr(model_figures, "machine_busy", lambda own_threads: 0.0)  # a quiet machine, whatever runs
    monkeypatch.setattr(timing_load, "SPREAD_LIMIT", float("inf"))  # the tiny model's 1-ms passes jitter
    # the tiny model's 151,936-row head makes its passes slow on a busy 2-core host: aims it meets anywhere (the
    # rule itself: tests/lsp_server/test_model_choice.py); and never the 1.5B Instruct timed instead
    generous = (Aim("first ghost text", 60.0), Aim("whole first line", 100.0))
    monkeypatch.setattr(model_host, "carried_base", functools.partial(model_choice.carried_base, aims=generous))
    monkeypatch.setattr(model_host, "large_not_installed", lambda: "not wanted in this test")
    caplog.set_level(logging.INFO, logger="lookahead_lsp.lsp_server.model_host")
    config = Config(model="auto", threads=1)

    choice, held = choose(config, _no_choice_log, lambda text: None)
    assert choice.spec == base.name and held is not None and held[0].spec == base.name
    assert choice.figures is not None and "meets the aims" in choice.reason and choice.to_json()["size"] == "1.5B"
    assert "no figures stored" in caplog.text
    stored = list((cache / "native-v2").glob("figures-*.json"))
    assert len(stored) == 1 and json.loads(stored[0].read_text())["busy"] is not None

    caplog.clear()
    again, held = choose(config, _no_choice_log, lambda text: None)
    record = model_figures.stored(stored[0])
    assert again.spec == base.name and held is None and record is not None and again.figures == record.figures
    assert "timed on a quiet machine" in caplog.text

    caplog.clear()
    monkeypatch.setattr(model_figures, "kernel_mtime", lambda: json.loads(stored[0].read_text())["measured_at"] + 1)
    timed, held = choose(config, _no_choice_log, lambda text: None)
    assert timed.spec == base.name and held is not None  # loaded again to be timed
    assert "older than the kernel build" in caplog.text
