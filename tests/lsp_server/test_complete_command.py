"""``lookahead-lsp complete``: the daemon's pipeline from the command line; bad input is a one-line error, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lookahead_lsp.lsp_server.cli import main
from lookahead_lsp.lsp_server.commands.complete import repo_root

pytestmark = pytest.mark.usefixtures("keep_logging")  # main() points the root logger at stderr
SOURCE = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return "


@pytest.fixture()
def source(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "pkg").mkdir()
    path = tmp_path / "pkg" / "ops.py"
    path.write_text(SOURCE)
    return path


def test_repo_root(source: Path) -> None:
    assert repo_root(source) == source.parent.parent


@pytest.mark.parametrize(
    ("line", "character", "message"),
    [(6, 0, "outside"), (5, 12, "outside"), (-1, 0, "outside")],
)
def test_position_outside_the_file(
    source: Path, line: int, character: int, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["complete", str(source), "--line", str(line), "--character", str(character)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_unreadable_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["complete", str(tmp_path / "missing.py"), "--line", "0", "--character", "0"]) == 2
    assert "cannot read" in capsys.readouterr().err
    binary = tmp_path / "blob.py"
    binary.write_bytes(b"\xff\xfe\x00bad")
    assert main(["complete", str(binary), "--line", "0", "--character", "0"]) == 2


def test_bad_model_spec(source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["complete", str(source), "--line", "5", "--character", "11", "--model", str(tmp_path / "nope")]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "cannot load the model" in err and len(err.splitlines()) == 1


def test_json_output(source: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["complete", str(source), "--line", "5", "--character", "11", "--model", str(tiny_model_dir)]
    assert main([*args, "--json", "--max-new-tokens", "6", "--decoder", "greedy"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"text", "token_ids", "stats"}
    assert len(out["token_ids"]) == 6  # the tiny model's continuation never stops by itself (tests/tiny_model.py)
    stats = out["stats"]
    assert stats["new_tokens"] == len(out["token_ids"]) and "hits_by_source" in stats
    assert set(stats["latency_ms"]) >= {"prompt", "prefill", "decode", "postprocess", "total"}

    assert main([*args, "--max-new-tokens", "6", "--no-index"]) == 0  # plain text, lookahead
    assert capsys.readouterr().out.endswith("\n")


def test_the_cli_returns_the_whole_completion_unless_asked_to_emulate_deadlines(
    source: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.slow_passes import slow_down

    args = ["complete", str(source), "--line", "5", "--character", "11", "--model", str(tiny_model_dir), "--json"]
    args += ["--max-new-tokens", "40", "--decoder", "greedy", "--no-index"]
    undo = slow_down(80.0)  # 40 passes: past every deadline of the daemon, the runaway-line cap (2.5 s) too
    try:
        assert main(args) == 0
        whole = json.loads(capsys.readouterr().out)
        assert main([*args, "--deadline-ms"]) == 0  # the daemon's deadlines: what it shows first
        first = json.loads(capsys.readouterr().out)
    finally:
        undo()
    # whole: to the token limit, as the tiny model's continuation (one line of words) never stops by itself
    assert len(whole["token_ids"]) == 40 and whole["stats"]["finish_reason"] == "length"
    assert first["stats"]["finish_reason"] == "stop" and len(first["token_ids"]) < 40
    assert whole["text"].startswith(first["text"]) and len(first["text"]) < len(whole["text"])


def test_one_shot_completion_starts_no_watcher_and_warns_of_nothing(
    source: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a checkout with a virtualenv and node_modules, a one-shot completion indexes the code but watches
    nothing (it ends before any change could matter) and prints only the completion."""
    from lookahead_lsp.context.watcher import WorkspaceWatcher

    root = source.parent.parent
    for n in range(200):
        (root / ".venv" / "lib" / f"p{n}").mkdir(parents=True)
        (root / "node_modules" / f"m{n}").mkdir(parents=True)
    (root / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    started: list[object] = []
    real_start = WorkspaceWatcher.start
    monkeypatch.setattr(WorkspaceWatcher, "start", lambda self: (started.append(self), real_start(self)))
    args = ["complete", str(source), "--line", "5", "--character", "11", "--model", str(tiny_model_dir)]
    assert main(["--log-level", "info", *args, "--max-new-tokens", "4"]) == 0
    captured = capsys.readouterr()
    assert started == []
    assert "WARNING" not in captured.err and "workspace index" in captured.err.lower()
    assert captured.out.endswith("\n") and len(captured.out.strip()) > 0
