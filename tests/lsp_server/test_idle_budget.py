"""The idle-time budget end to end: ``lookahead-lsp serve`` over stdio with the tiny model.

Once the daemon has prefilled a document's prompt in idle time on ``idleTokenBudget``, the keystrokes after it
keep that longer prompt and prefill only what they change (a line break: the suffix, no longer than on the
keystrokes' budget); a cursor that leaves the grown prefix's reach gets a prompt on ``tokenBudget`` (a smaller
prefill at the key), and the next idle time grows it again.
"""

from __future__ import annotations

from pathlib import Path

from lookahead_lsp.evaluation.lsp_client import LspClient
from tests.lsp_server.test_background_prefill import _key, _wait_whole_warm
from tests.lsp_server.test_server_e2e import _close_cleanly, _end_of, _start

SMALL, LARGE = 256, 1024
LINES = "".join(f"def f_{i}(x):\n    return x * {i} + {i % 7}\n\n\n" for i in range(300))
HALF = len(LINES) // 2


def test_a_prompt_grows_in_idle_time_and_the_keys_after_it_prefill_only_what_they_change(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    options = {
        "model": str(tiny_model_dir),
        "maxNewTokens": 2,
        "decoder": "greedy",
        "promptLayout": "psm-line",
        "tokenBudget": SMALL,
        "idleTokenBudget": LARGE,
    }
    client = _start(tmp_path, options)
    try:
        assert client.wait_model()["state"] == "ready"
        assert client.command("lookahead.stats")["model"]["idleTokenBudget"] == LARGE
        _grow_then_type(client)
    finally:
        _close_cleanly(client)


def _grow_then_type(client: LspClient) -> None:
    uri = "file:///tmp/lookahead-idle-budget/area.py"
    cut = LINES.index("def ", HALF)
    head = LINES[:cut] + "def area(width, height):\n    return "
    text = head + "\n\n\n" + LINES[cut:]
    client.open(uri, text)
    line, character = _end_of(head)
    first = _key(client, uri, 2, line, character, "w")
    assert first["promptTokens"] <= SMALL, first  # no idle time yet: the keystrokes' budget

    grown = _wait_whole_warm(client, lambda warmed: warmed["promptTokens"] > SMALL)
    assert grown["promptTokens"] <= LARGE and grown["version"] == 2, grown
    typed = _key(client, uri, 3, line, character + 1, "i")
    assert typed["promptTokens"] > SMALL and typed["prefilledTokens"] <= 4, typed  # the grown head, cached

    client.change(uri, 4, [_insert_at(line, character + 2, "\n    ")])
    broken = _key(client, uri, 5, line + 1, 4, "d")
    print(f"first {first}\npause {grown}\nkey {typed}\nline break {broken}")
    assert broken["promptTokens"] > SMALL, broken  # still the grown prompt
    # a line break prefills the suffix again: at most as long as on the keystrokes' budget (16% of it), the
    # new line and the healed tail; the grown budget's own share of the suffix would be 160 tokens
    assert broken["prefilledTokens"] <= SMALL * 0.16 + 24, broken

    above = text[: HALF // 2].count("\n")  # a line far above the grown prefix's start, with a file above it
    jumped = _key(client, uri, 6, above, 0, "#")
    print(f"far above {jumped}")
    assert jumped["promptTokens"] <= SMALL, jumped  # its head would move: the keystrokes' budget


def _insert_at(line: int, character: int, text: str) -> dict[str, object]:
    position = {"line": line, "character": character}
    return {"range": {"start": position, "end": position}, "text": text}


def test_a_file_whose_code_before_the_cursor_fits_is_not_grown(tiny_model_dir: Path, tmp_path: Path) -> None:
    """A grown prompt keeps its suffix as short as on the keystrokes' budget with a cut prefix; where the prefix
    fits that budget whole, its prompt gives the suffix the room left, and that is the prompt kept in idle time."""
    options = {"model": str(tiny_model_dir), "maxNewTokens": 2, "decoder": "greedy", "tokenBudget": SMALL}
    client = _start(tmp_path, {**options, "promptLayout": "psm-line", "idleTokenBudget": LARGE})
    try:
        assert client.wait_model()["state"] == "ready"
        uri = "file:///tmp/lookahead-idle-budget/short.py"
        head = "def area(width, height):\n    return "
        text = head + "\n\n\n" + LINES[:600]  # the whole file fits the keystrokes' budget; its suffix is long
        client.open(uri, text)
        line, character = _end_of(head)
        first = _key(client, uri, 2, line, character, "w")
        warmed = _wait_whole_warm(client, lambda warmed: warmed["version"] == 2)
        print(f"first {first}\npause {warmed}")
        assert first["promptTokens"] > SMALL * 0.16 + 40, first  # more suffix than a grown prompt keeps
        assert warmed["promptTokens"] == first["promptTokens"], (first, warmed)  # the whole file, as at the key
    finally:
        _close_cleanly(client)
