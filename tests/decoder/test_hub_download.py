"""Downloads from the hub (decoder/weights/hub_download.py) against a local stand-in serving a real GGUF: progress
lines, a connection cut half-way resumed by a range request, a part left by an earlier run resumed, a wrong sha256
refused with nothing kept, and the hub's tree listing read for the sha256 and size of LFS files only."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest

from lookahead_lsp.decoder.weights.hub_download import DownloadError, ProgressLines, fetch, lfs_entry, part_path
from tests.hub_server import HubServer

REPO = "ggml-org/Qwen2.5-Coder-0.5B-Q8_0-GGUF"


def test_a_download_cut_half_way_resumes_and_is_checked(tmp_path: Path, tiny_base_gguf: Path) -> None:
    dest = tmp_path / "models" / tiny_base_gguf.name
    lines: list[str] = []
    with HubServer(REPO, tiny_base_gguf, cut_once=True) as hub:
        sha256 = fetch(REPO, tiny_base_gguf.name, dest, lines.append, endpoint=hub.endpoint)
    size = tiny_base_gguf.stat().st_size
    assert dest.read_bytes() == tiny_base_gguf.read_bytes()
    assert sha256 == hashlib.sha256(tiny_base_gguf.read_bytes()).hexdigest()
    assert dest.with_name(dest.name + ".sha256").read_text().strip() == sha256
    assert not part_path(dest).exists()
    assert hub.ranges[0] is None and hub.ranges[1] == f"bytes={size // 2}-"  # the rest, after the cut
    assert len(hub.ranges) == 2
    assert any("connection lost" in line for line in lines)
    assert any(f"resuming at {size // 2 / 1e6:,.1f} MB" in line for line in lines)
    progress = [line for line in lines if " MB (" in line and "MB/s" in line]
    assert len(progress) >= 5 and "(100%)" in progress[-1] and f"of {size / 1e6:,.1f} MB" in progress[-1]
    assert lines[-1].endswith(f"sha256 checked, at {dest}")


def test_a_part_left_by_an_earlier_run_is_resumed(tmp_path: Path, tiny_base_gguf: Path) -> None:
    dest = tmp_path / tiny_base_gguf.name
    data = tiny_base_gguf.read_bytes()
    part_path(dest).write_bytes(data[:1000])
    with HubServer(REPO, tiny_base_gguf) as hub:
        fetch(REPO, tiny_base_gguf.name, dest, lambda _line: None, endpoint=hub.endpoint)
        assert hub.ranges == ["bytes=1000-"]
        assert dest.read_bytes() == data
        fetch(REPO, tiny_base_gguf.name, dest, lambda _line: None, endpoint=hub.endpoint)  # there: no transfer
        assert hub.ranges == ["bytes=1000-"]


def test_a_wrong_sha256_is_refused_and_nothing_is_kept(tmp_path: Path, tiny_base_gguf: Path) -> None:
    dest = tmp_path / tiny_base_gguf.name
    with HubServer(REPO, tiny_base_gguf, wrong_sha256=True) as hub, pytest.raises(DownloadError) as raised:
        fetch(REPO, tiny_base_gguf.name, dest, lambda _line: None, endpoint=hub.endpoint)
    assert "the download was removed, not kept" in str(raised.value) and hub.sha256() in str(raised.value)
    assert not dest.exists() and not part_path(dest).exists() and not dest.with_name(dest.name + ".sha256").exists()


def test_the_tree_listing_gives_an_lfs_file_s_sha256_and_size() -> None:
    tree = [{"path": "README.md", "size": 5}, {"path": "m.gguf", "lfs": {"oid": "AB" * 32, "size": 7}}]
    assert lfs_entry(tree, "m.gguf") == ("ab" * 32, 7)
    with pytest.raises(DownloadError, match="not an LFS file"):
        lfs_entry(tree, "README.md")
    with pytest.raises(DownloadError, match=r"other.gguf is not in the repository \(it holds: README.md, m.gguf\)"):
        lfs_entry(tree, "other.gguf")
    with pytest.raises(DownloadError, match="not a list"):
        lfs_entry({"error": "Repository not found"}, "m.gguf")


def test_a_repository_the_hub_does_not_have_is_a_clear_error(tmp_path: Path, tiny_base_gguf: Path) -> None:
    with HubServer(REPO, tiny_base_gguf) as hub, pytest.raises(DownloadError, match="the hub answered 404"):
        fetch("ggml-org/nothing", tiny_base_gguf.name, tmp_path / "x.gguf", lambda _line: None, endpoint=hub.endpoint)


def test_progress_comes_each_tenth_and_at_least_every_ten_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    lines: list[str] = []
    progress = ProgressLines("m.gguf", 1_000_000, lines.append)
    for done in range(0, 1_000_001, 20_000):  # 2% a chunk, no time passing: a line each tenth
        progress.update(done)
    assert len(lines) == 11 and lines[0].startswith("m.gguf: 0.0 of 1.0 MB (0%)") and "(100%)" in lines[-1]
    slow = ProgressLines("m.gguf", 1_000_000, lines.append)
    lines.clear()
    for done in range(1, 30):  # a byte a step, 4 s apart: no tenth reached, a line every 10 s
        clock[0] += 4.0
        slow.update(done)
    # the first at 4 s, then the first step 10 s or more after the last line: 16, 28, ... 112 s
    assert len(lines) == 10 and all("(0%)" in line for line in lines)
