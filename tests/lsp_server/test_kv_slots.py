"""Switching files end to end: ``lookahead-lsp serve`` over stdio with the tiny model keeps a KV cache per document
(``kvSlots``, decoder/slots.py), so back in a file it served lately a keystroke prefills what changed, not the
whole prompt. With ``kvSlots: 1`` the other file's prompt takes the one cache and the same keystroke prefills the
whole prompt again: what the setting is for.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lookahead_lsp.evaluation.lsp_client import LspClient
from tests.lsp_server.test_background_prefill import LINES, _insert
from tests.lsp_server.test_server_e2e import STATS, _close_cleanly, _end_of, _start


@pytest.fixture(scope="module")
def server(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LspClient]:
    tmp = tmp_path_factory.mktemp("slots")
    # no workspace index: one file's text never becomes part of the other's prompt
    options = {"model": str(tiny_model_dir), "maxNewTokens": 6, "tokenBudget": 1024, "indexEnabled": False}
    client = _start(tmp, options)
    assert client.wait_model()["state"] == "ready"
    yield client
    _close_cleanly(client)


def _complete(client: LspClient, uri: str, text: str) -> dict[str, int]:
    before = len(client.notifications)
    client.inline(uri, *_end_of(text))
    return dict(client.wait_notification(STATS, after=before))


def _there_and_back(client: LspClient, name: str) -> dict[str, int]:
    """Complete in file a, then in file b, then type one character in a and complete there: a's stats."""
    a_uri, b_uri = f"file:///tmp/lookahead-slots/{name}_a.py", f"file:///tmp/lookahead-slots/{name}_b.py"
    a_text = LINES[:16_000] + "def area(width, height):\n    return "
    b_text = LINES[30_000:46_000] + "def volume(a, b, c):\n    return "
    client.open(a_uri, a_text)
    first = _complete(client, a_uri, a_text)
    assert first["prefilledTokens"] == first["promptTokens"] > 300, first  # a new file: its whole prompt
    client.open(b_uri, b_text)
    _complete(client, b_uri, b_text)
    _insert(client, a_uri, 2, *_end_of(a_text), "w")
    back = _complete(client, a_uri, a_text + "w")
    assert back["promptTokens"] > 300, back
    for uri in (a_uri, b_uri):
        client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    return back


def test_back_in_a_file_a_keystroke_prefills_only_what_changed(server: LspClient) -> None:
    back = _there_and_back(server, "two")
    assert back["prefilledTokens"] <= 4, back  # the typed character and the healed tail


def test_with_one_slot_the_other_file_takes_the_cache(server: LspClient) -> None:
    server.notify("workspace/didChangeConfiguration", {"settings": {"lookahead": {"kvSlots": 1}}})
    try:
        back = _there_and_back(server, "one")
        assert back["prefilledTokens"] > 300, back
    finally:
        server.notify("workspace/didChangeConfiguration", {"settings": {"lookahead": {"kvSlots": 2}}})
