"""A deadline cut that shows nothing (a lone closer the trim removes, blanks) is not published: the editor's request
waits for the first text instead of being answered with nothing while the line is still being decoded. Through
the daemon's completion core with the tiny model, every deadline passed at once; the trim of the first cuts is made
to show nothing, as a lone ``}`` on a line that goes on to ``} else {`` does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lookahead_lsp.decoder.types import CancelToken
from lookahead_lsp.lsp_server import pipeline
from lookahead_lsp.lsp_server.completion import Plan
from lookahead_lsp.lsp_server.config import Config
from lookahead_lsp.lsp_server.documents import Document
from lookahead_lsp.lsp_server.engine import Engine
from lookahead_lsp.lsp_server.pipeline import Completion, Snapshot, complete

TEXT = "def area(width, height):\n    return "


@pytest.fixture
def engine(tiny_model_dir: Path, tmp_path: Path) -> Iterator[Engine]:
    config = Config(
        model=str(tiny_model_dir),
        decoder="greedy",
        index_enabled=False,
        max_new_tokens=24,
        multiline_deadline_ms=0,
        line_deadline_ms=0,
        line_cap_ms=0,  # every deadline has passed: each word end is a publish point
    )
    made = Engine(config, [tmp_path], watch=False)
    made.load_now()
    yield made
    made.stop()


def _run(engine: Engine, tmp_path: Path) -> tuple[list[Completion], Completion]:
    published: list[Completion] = []
    snapshot = Snapshot(Document((tmp_path / "a.py").as_uri(), TEXT, language_id="python"), len(TEXT), "r")
    final = complete(snapshot, engine, CancelToken(), publish=published.append)
    return published, final


def test_a_cut_that_shows_nothing_is_not_published(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shown, final = _run(engine, tmp_path)
    assert shown and all(p.edit.text for p in shown), "the tiny model's words are published as they come"
    cuts: list[str] = []

    def nothing_to_show(plan: Plan, visible: str, truncated: bool) -> str:
        cuts.append(visible)
        return ""

    monkeypatch.setattr(pipeline, "trim_visible", nothing_to_show)
    published, again = _run(engine, tmp_path)
    assert cuts, "the same publish points were reached"
    assert published == []  # none of them showed anything: the request waits for the whole run
    assert again.final and again.token_ids == final.token_ids
