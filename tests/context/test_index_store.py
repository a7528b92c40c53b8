"""Snapshots: round trip, atomic writes, the cache location, corrupt and foreign snapshots discarded."""

from __future__ import annotations

import logging
from pathlib import Path

import msgpack
import numpy as np
import pytest

from lookahead_lsp.context.index_store import (
    FORMAT_VERSION,
    Snapshot,
    StoredFile,
    load_snapshot,
    save_snapshot,
    snapshot_path,
    tokenizer_key,
    vocab_limit,
)
from lookahead_lsp.decoder.weights.cache import cache_root

EMBEDDED_LIMIT = 151_665  # the embedded model's real tokens; [PAD151665] onwards only pad its embedding rows


def sample(roots: list[str], key: str = "tok:abc") -> Snapshot:
    snapshot = Snapshot(sorted(roots), key)
    for i, name in enumerate(["a.py", "ü/b.py"]):
        path = f"{roots[0]}/{name}"
        snapshot.files[path] = StoredFile(
            path, 10 + i, 1_700_000_000_123_456_789 + i, np.arange(i, 151_000, 9999, dtype=np.int32)
        )
    return snapshot


def test_round_trip(tmp_path: Path) -> None:
    roots = [str(tmp_path.resolve())]
    target = snapshot_path(roots, "tok:abc", tmp_path / "cache")
    original = sample(roots)
    save_snapshot(target, original)
    loaded = load_snapshot(target, roots, "tok:abc")
    assert loaded is not None and loaded.files.keys() == original.files.keys()
    for path, stored in original.files.items():
        got = loaded.files[path]
        assert (got.size, got.mtime_ns) == (stored.size, stored.mtime_ns)
        assert got.tokens.dtype == np.int32 and np.array_equal(got.tokens, stored.tokens)
        assert got.matches(stored.size, stored.mtime_ns) and not got.matches(stored.size, stored.mtime_ns + 1)
    assert [p.name for p in target.parent.iterdir()] == [target.name]  # no temporary file left behind


def test_location_follows_the_environment_and_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOKAHEAD_LSP_CACHE", str(tmp_path))
    assert cache_root() == tmp_path
    here = snapshot_path([tmp_path / "ws"], "tok:1")
    assert here.parent == tmp_path / f"workspace-index-v{FORMAT_VERSION}"
    assert here != snapshot_path([tmp_path / "other"], "tok:1")
    assert here != snapshot_path([tmp_path / "ws"], "tok:2")


def test_tokenizer_key_changes_with_the_vocabulary() -> None:
    class Tok:
        name_or_path = "/models/qwen"

        def __init__(self, vocab: dict[str, int]) -> None:
            self.vocab = vocab

        def get_vocab(self) -> dict[str, int]:
            return self.vocab

    assert tokenizer_key(Tok({"a": 0, "b": 1})) == tokenizer_key(Tok({"b": 1, "a": 0}))
    assert tokenizer_key(Tok({"a": 0, "b": 1})) != tokenizer_key(Tok({"a": 0, "c": 1}))
    assert tokenizer_key(Tok({"a": 0})).startswith("qwen:")


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) // 2],
        lambda data: b"\xc1 not msgpack at all" + data,
        lambda data: msgpack.packb([1, 2, 3]),
        lambda data: msgpack.packb({"format": FORMAT_VERSION + 1}),
        lambda data: msgpack.packb({**msgpack.unpackb(data), "files": [["x", "not an int", 0, b""]]}),
    ],
    ids=["truncated", "garbage", "not-a-map", "other-format", "malformed-entry"],
)
def test_corrupt_snapshot_is_discarded_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture, damage) -> None:
    roots = [str(tmp_path)]
    target = tmp_path / "snap.msgpack"
    save_snapshot(target, sample(roots))
    target.write_bytes(damage(target.read_bytes()))
    with caplog.at_level(logging.WARNING, logger="lookahead_lsp.context.index_store"):
        assert load_snapshot(target, roots, "tok:abc") is None
    assert "discarded" in caplog.text
    assert not target.exists()


@pytest.mark.parametrize("foreign", ["root", "tokenizer"])
def test_foreign_snapshot_is_discarded(tmp_path: Path, caplog: pytest.LogCaptureFixture, foreign: str) -> None:
    target = tmp_path / "snap.msgpack"
    save_snapshot(target, sample([str(tmp_path / "elsewhere")] if foreign == "root" else [str(tmp_path)]))
    key = "tok:other" if foreign == "tokenizer" else "tok:abc"
    with caplog.at_level(logging.WARNING, logger="lookahead_lsp.context.index_store"):
        assert load_snapshot(target, [tmp_path], key) is None
    assert "other roots or another tokenizer" in caplog.text


def test_missing_snapshot_is_quietly_none(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert load_snapshot(tmp_path / "none.msgpack", [tmp_path], "k") is None
    assert caplog.text == ""


@pytest.mark.parametrize("bad_id", [2**31 - 1, EMBEDDED_LIMIT])
def test_out_of_vocabulary_ids_are_discarded_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, bad_id: int
) -> None:
    roots = [str(tmp_path)]
    snapshot = sample(roots)
    path = tmp_path / "snap.msgpack"
    save_snapshot(path, snapshot)
    assert load_snapshot(path, roots, "tok:abc", EMBEDDED_LIMIT) is not None  # ids up to 150,000: all inside
    entry = next(iter(snapshot.files.values()))
    snapshot.files[entry.path] = StoredFile(entry.path, entry.size, entry.mtime_ns, np.array([1, bad_id], "int32"))
    save_snapshot(path, snapshot)
    with caplog.at_level(logging.WARNING, logger="lookahead_lsp.context.index_store"):
        assert load_snapshot(path, roots, "tok:abc", EMBEDDED_LIMIT) is None
    assert len(caplog.records) == 1 and f"token id {bad_id} outside the vocabulary" in caplog.text
    assert not path.exists()


def test_vocab_limit_leaves_out_the_padding_rows(tokenizer) -> None:
    assert vocab_limit(tokenizer) == EMBEDDED_LIMIT
    ids = tokenizer("<|endoftext|> [PAD151665] x", add_special_tokens=False)["input_ids"]
    assert max(ids) < EMBEDDED_LIMIT  # text never becomes a padding row, whatever it says
