"""The Neovim plugin in real Neovim against the real daemon (tiny random model): 0.12 shows the ghost text
through vim.lsp.inline_completion (native), 0.11 through the plugin's own extmarks (fallback)."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.editors.support import REPO, daemon_command, editor_tool, wait_for

pynvim = pytest.importorskip("pynvim")

pytestmark = pytest.mark.editor

PLUGIN = REPO / "editors" / "nvim"
LINE = "def add(a, b):"
# the tool in .tools/bin (and get-editors.sh target), the ghost text's extmark namespace, the health line
EDITIONS = {
    "0.12": ("nvim-0.12", "nvim.lsp.inline_completion", "native vim.lsp.inline_completion"),
    "0.11": ("nvim-0.11", "lookahead.ghost", "fallback"),
}


@dataclass
class Editor:
    nv: pynvim.Nvim
    namespace: int
    health_path: str
    log: Path

    def ghost(self) -> tuple[int, int, str] | None:
        """The ghost text as (row, col, text), or None when none is shown."""
        marks = self.nv.api.buf_get_extmarks(0, self.namespace, 0, -1, {"details": True})
        if not marks:
            return None
        _, row, col, details = marks[0]
        lines = [details.get("virt_text", [])] + details.get("virt_lines", [])
        return row, col, "\n".join("".join(chunk[0] for chunk in line) for line in lines)

    def cursor(self) -> tuple[int, int]:
        row, col = self.nv.current.window.cursor
        return row - 1, col

    def reset(self, lines: list[str]) -> None:
        """Normal mode, no ghost, the buffer holding ``lines``."""
        self.nv.input("<Esc>")
        wait_for(lambda: self.nv.api.get_mode()["mode"] == "n", 5, "normal mode")
        self.nv.current.buffer[:] = lines

    def recent(self) -> list[dict]:
        stats = self.nv.exec_lua("return require('lookahead').stats_sync(5000)") or {}
        return stats.get("recent") or []

    def last_request(self) -> str | None:
        recent = self.recent()
        return recent[-1]["requestId"] if recent else None

    def answer_since(self, known: str | None) -> tuple[int, int, str] | str | None:
        """The ghost text; else "empty" once the daemon's newest completion (other than ``known``) is empty."""
        ghost = self.ghost()
        if ghost:
            return ghost
        recent = self.recent()
        return "empty" if recent and recent[-1]["requestId"] != known and recent[-1].get("chars") == 0 else None

    def type_until_ghost(self, keys: list[str]) -> tuple[int, int, str]:
        """Types ``keys`` one at a time until a ghost text shows (the tiny random model's answer to some
        prompts is empty): after each key, waits for the ghost or for the daemon's empty answer to it."""
        for key in keys:
            answered = functools.partial(self.answer_since, self.last_request())
            self.nv.input(key)
            got = wait_for(answered, 60, f"an answer after typing {key!r} (daemon log: {self.log})")
            if got != "empty":
                return got
        raise AssertionError(f"no ghost text after typing {keys!r} (daemon log: {self.log})")


def init_lua(tmp: Path, model_dir: Path) -> Path:
    opts = {
        "cmd": daemon_command(),
        "settings": {"model": str(model_dir), "device": "cpu", "maxNewTokens": 16, "logFile": str(tmp / "d.log")},
    }
    init = tmp / "init.lua"
    init.write_text(
        f"vim.opt.rtp:prepend([==[{PLUGIN}]==])\n"
        f"require('lookahead').setup(vim.json.decode([==[{json.dumps(opts)}]==]))\n"
    )
    return init


@pytest.fixture(scope="module", params=sorted(EDITIONS), ids=lambda v: f"nvim-{v}")
def editor(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path):
    tool, namespace, health_path = EDITIONS[request.param]
    nvim = editor_tool(tool)
    tmp = tmp_path_factory.mktemp(tool) / "project"  # a fixed name: the prompt holds it
    (tmp / ".git").mkdir(parents=True)
    source = tmp / "sample.py"
    source.write_text(LINE + "\n")
    nv = pynvim.attach(
        "child",
        argv=[str(nvim), "--embed", "--headless", "--clean", "-u", str(init_lua(tmp, tiny_model_dir)), str(source)],
    )
    try:
        version = nv.exec_lua("local v = vim.version() return {v.major, v.minor}")
        assert tuple(version) >= tuple(int(p) for p in request.param.split(".")), version
        nv.command("doautocmd FileType")  # the init ran before the buffer existed
        ed = Editor(nv, nv.api.create_namespace(namespace), health_path, tmp / "d.log")
        wait_for(lambda: nv.exec_lua("return require('lookahead').client(0) ~= nil"), 20, "the daemon client")
        wait_for(
            lambda: (
                (nv.exec_lua("return require('lookahead').stats_sync(2000)") or {}).get("model", {}).get("state")
                == "ready"
            ),
            120,
            "the model to load",
        )
        yield ed
    finally:
        nv.close()


TYPED = ["A", "<CR>", *"return a"]  # insert at the end of LINE, then type the body


def test_ghost_text_shown_then_tab_accepts(editor: Editor) -> None:
    nv = editor.nv
    editor.reset([LINE])
    row, col, ghost = editor.type_until_ghost(TYPED)
    assert (row, col) == editor.cursor(), "the ghost text is not at the cursor"
    assert ghost.strip(), "empty ghost text"
    typed = nv.current.buffer[:]
    assert typed[0] == LINE and len(typed) <= 2, f"the ghost text changed the buffer: {typed!r}"
    nv.input("<Tab>")
    line = typed[row]
    expected = typed[:row] + (line[:col] + ghost + line[col:]).split("\n") + typed[row + 1 :]
    wait_for(lambda: nv.current.buffer[:] == expected, 10, f"the buffer to become {expected!r}")
    wait_for(lambda: any(r.get("accepted") for r in editor.recent()), 10, "lookahead.accepted to reach the daemon")


def test_cursor_move_clears_ghost(editor: Editor) -> None:
    nv = editor.nv
    editor.reset([LINE, "", "x = 1"])
    old = editor.type_until_ghost(TYPED[:1] + TYPED[2:])
    nv.input("<Down><Down>")
    # the ghost at the old place goes; a new answer may show one at the new cursor position
    wait_for(
        lambda: (editor.ghost() or (*editor.cursor(), ""))[:2] == editor.cursor(),
        20,
        f"the ghost {old!r} to go when the cursor moved",
    )
    nv.input("<Esc>")
    wait_for(lambda: editor.ghost() is None, 5, "the ghost to go on leaving insert mode")
    assert nv.current.buffer[0].startswith(LINE) and nv.current.buffer[1:] == ["", "x = 1"]


def test_tab_without_ghost_indents(editor: Editor) -> None:
    nv = editor.nv
    editor.reset([""])
    nv.command("LookaheadToggle")  # completions off: nothing to accept
    try:
        nv.input("i<Tab>x")
        wait_for(lambda: nv.current.buffer[0].endswith("x"), 5, "the typed text")
        assert nv.current.buffer[0].strip() == "x" and nv.current.buffer[0] != "x", nv.current.buffer[:]
        assert editor.ghost() is None
    finally:
        nv.command("LookaheadToggle")


def test_checkhealth(editor: Editor) -> None:
    editor.reset([LINE])
    editor.nv.command("checkhealth lookahead")
    report = "\n".join(editor.nv.current.buffer[:])
    editor.nv.command("tabclose")
    assert "daemon command:" in report and "lookahead-lsp" in report, report
    assert "model: " in report and "state=ready" in report, report
    assert f"ghost text: {editor.health_path}" in report, report
    assert "ERROR" not in report, report
