"""The VS Code extension's settings against the daemon's: the extension sends every daemon setting it declares,
defaults included (``editors/vscode/src/settings.ts``), so each declared default must be the daemon's own, or a
user who never touched a setting gets another daemon than the README describes."""

from __future__ import annotations

import json
import re
from typing import Any, Literal, get_args, get_origin, get_type_hints

from lookahead_lsp.decoder.remote import _CHECKS as _REMOTE_CHECKS
from lookahead_lsp.decoder.remote import PromptFormat
from lookahead_lsp.lsp_server.config import _SETTINGS, Config, to_settings
from tests.editors.support import REPO

EXTENSION = REPO / "editors" / "vscode"


def _sent_keys() -> list[str]:
    """The keys ``daemonSettings()`` sends, as ``settings.ts`` lists them."""
    source = (EXTENSION / "src" / "settings.ts").read_text(encoding="utf-8")
    listed = re.search(r"const DAEMON_KEYS = \[(.*?)\] as const", source, re.S)
    assert listed is not None, "settings.ts no longer lists DAEMON_KEYS"
    return re.findall(r"'([A-Za-z]+)'", listed.group(1))


def test_every_setting_the_extension_sends_defaults_to_the_daemon_s_own() -> None:
    declared = json.loads((EXTENSION / "package.json").read_text(encoding="utf-8"))
    properties = declared["contributes"]["configuration"]["properties"]
    defaults = to_settings(Config())  # every setting the daemon knows, as it reports them, by its defaults
    keys = _sent_keys()
    assert "tokenBudget" in keys and len(keys) > 10
    for key in keys:
        assert key in defaults, f"the extension sends {key!r}, which the daemon does not know"
        declaration = properties[f"lookahead.{key}"]
        sent = declaration["default"]
        sent = None if sent == "" else sent  # settings.ts sends an empty string as null
        own = defaults[key]
        assert sent == own, f"lookahead.{key}: the extension's default {sent!r}, the daemon's {own!r}"
        if own is None:  # null must be a value the setting may hold, or VS Code flags the default itself
            assert "null" in declaration["type"] or declaration["type"] == "string", key


def test_the_extension_sends_every_setting_the_daemon_has() -> None:
    """A VS Code user can set each daemon setting from the Settings UI, with the values the daemon accepts."""
    declared = json.loads((EXTENSION / "package.json").read_text(encoding="utf-8"))
    properties = declared["contributes"]["configuration"]["properties"]
    hints = get_type_hints(Config)
    assert set(_sent_keys()) == set(to_settings(Config()))
    for key, (attribute, _) in _SETTINGS.items():
        allowed = sorted(_literals(hints[attribute]))
        if allowed:
            assert sorted(properties[f"lookahead.{key}"].get("enum", [])) == allowed, key
    remote = properties["lookahead.remote"]["properties"]  # the engine's keys, each as the daemon names it
    assert set(remote) == set(_REMOTE_CHECKS)
    assert sorted(remote["promptFormat"]["enum"]) == sorted(get_args(PromptFormat))


def _literals(hint: Any) -> set[str]:
    """The strings a ``Literal`` type hint (or a union holding some) allows."""
    if get_origin(hint) is Literal:
        return {value for value in get_args(hint) if isinstance(value, str)}
    return set().union(*(_literals(arg) for arg in get_args(hint))) if get_args(hint) else set()
