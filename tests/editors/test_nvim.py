"""The Neovim plugin in real Neovim against the real daemon (the tiny model, its continuation forced to one line
of words: tests/tiny_model.py): 0.12 shows the ghost text through vim.lsp.inline_completion (native), 0.11 through
the plugin's own extmarks (fallback). With the tiny model slowed (the slow-pass hook) and every deadline passed at
once, the ghost text grows without a keystroke (progressive ghost text), and its next word and line are accepted
with the plugin's keys."""

from __future__ import annotations

import contextlib
import functools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import slow_passes
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

    def totals(self) -> dict:
        return (self.nv.exec_lua("return require('lookahead').stats_sync(5000)") or {}).get("totals") or {}

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

    def whole_ghost(self, accepted: str) -> tuple[int, int, str]:
        """The ghost text once it shows all that is left of the whole completion after ``accepted`` was taken
        from it: the run has ended (its stats are the daemon's newest) and ``accepted`` plus the ghost is all of
        its text. A continuation still streaming grows the ghost until then."""

        def whole() -> tuple[int, int, str] | None:
            ghost, recent = self.ghost(), self.recent()
            done = ghost is not None and recent and recent[-1]["chars"] == len(accepted) + len(ghost[2])
            return ghost if done else None

        return wait_for(whole, 60, f"the rest of the whole completion after {accepted!r} (daemon log: {self.log})")

    def type_until_ghost(self, keys: list[str]) -> tuple[int, int, str]:
        """Types ``keys`` one at a time until a ghost text shows (the answer where a completion is all trimmed
        away is empty): after each key, waits for the ghost or for the daemon's empty answer to it."""
        for key in keys:
            answered = functools.partial(self.answer_since, self.last_request())
            self.nv.input(key)
            got = wait_for(answered, 60, f"an answer after typing {key!r} (daemon log: {self.log})")
            if got != "empty":
                return got
        raise AssertionError(f"no ghost text after typing {keys!r} (daemon log: {self.log})")


def init_lua(tmp: Path, cmd: list[str], settings: dict) -> Path:
    opts = {"cmd": cmd, "settings": {"device": "cpu", "logFile": str(tmp / "d.log"), **settings}}
    init = tmp / "init.lua"
    init.write_text(
        f"vim.opt.rtp:prepend([==[{PLUGIN}]==])\n"
        f"require('lookahead').setup(vim.json.decode([==[{json.dumps(opts)}]==]))\n"
    )
    return init


@contextlib.contextmanager
def running(edition: str, tmp: Path, cmd: list[str], settings: dict) -> Iterator[Editor]:
    """Neovim ``edition`` with the plugin, its daemon ready, editing ``tmp/project/sample.py``."""
    tool, namespace, health_path = EDITIONS[edition]
    nvim = editor_tool(tool)
    tmp = tmp / "project"  # a fixed name: the prompt holds it
    (tmp / ".git").mkdir(parents=True)
    source = tmp / "sample.py"
    source.write_text(LINE + "\n")
    init = init_lua(tmp, cmd, settings)
    nv = pynvim.attach("child", argv=[str(nvim), "--embed", "--headless", "--clean", "-u", str(init), str(source)])
    try:
        version = nv.exec_lua("local v = vim.version() return {v.major, v.minor}")
        assert tuple(version) >= tuple(int(p) for p in edition.split(".")), version
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


@pytest.fixture(scope="module", params=sorted(EDITIONS), ids=lambda v: f"nvim-{v}")
def editor(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path):
    settings = {"model": str(tiny_model_dir), "maxNewTokens": 16}
    tmp = tmp_path_factory.mktemp(EDITIONS[request.param][0])
    with running(request.param, tmp, daemon_command(), settings) as ed:
        yield ed


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
    assert "(?): named by the model setting" in report, report  # the choice line (a directory: no size)
    assert f"ghost text: {editor.health_path}" in report, report
    assert "ERROR" not in report, report


PASS_MS = 60  # the slow-pass hook: 40 tokens take 2.4 s or more
GROWING = {
    "maxNewTokens": 40,
    "decoder": "greedy",
    "indexEnabled": False,
    "backgroundPrefill": False,
    "lineDeadlineMs": 0,
    "multilineDeadlineMs": 0,
    "lineCapMs": 0,  # every deadline passed at once: the first word end shows, the rest streams in
}
BLANK = " \t\n\r\f\v"


def next_word(text: str) -> str:
    """What the plugin's accept-word key takes (Lua patterns: ASCII classes)."""
    found = re.match(f"[{BLANK}]*[A-Za-z0-9_]+", text) or re.match(f"[{BLANK}]*[^A-Za-z0-9_{BLANK}]+", text)
    return found.group(0) if found else text


@pytest.mark.parametrize("edition", sorted(EDITIONS), ids=lambda v: f"nvim-{v}")
def test_ghost_text_grows_without_a_keystroke_then_word_and_line_accepts(
    edition: str, tmp_path: Path, tiny_model_dir: Path
) -> None:
    settings = {**GROWING, "model": str(tiny_model_dir)}
    with running(edition, tmp_path, [*slow_passes.command(PASS_MS), "serve"], settings) as editor:
        nv = editor.nv
        editor.reset([LINE])
        row, col, first = editor.type_until_ghost(TYPED)
        before = nv.current.buffer[row]
        grown = wait_for(
            lambda: (ghost := editor.ghost()) is not None and len(ghost[2]) > len(first) and ghost,
            60,
            f"the ghost text {first!r} to grow without a keystroke (daemon log: {editor.log})",
        )
        assert grown[:2] == (row, col) and grown[2].startswith(first), (first, grown)
        assert nv.current.buffer[row] == before  # nothing was typed
        ran = editor.totals()["completed"]

        word = next_word(grown[2])  # the same in any later ghost: ``first`` ends where its first word does
        nv.input("<M-Right>")
        wait_for(lambda: nv.current.buffer[row] == before + word, 10, f"the next word {word!r} accepted")
        rest = editor.whole_ghost(word)  # the continuation may have grown since ``grown`` was read: it extends it
        assert rest[0] == row and rest[2].startswith(grown[2][len(word) :]), (grown, word, rest)
        line = rest[2].split("\n")[0]
        nv.input("<M-C-Right>")
        wait_for(lambda: nv.current.buffer[row] == before + word + line, 10, f"the rest of the line {line!r} accepted")
        assert editor.totals()["completed"] == ran  # the rest came from what the daemon held: no model run
