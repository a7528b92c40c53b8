"""A document's last completion as a draft source for its next one (lsp_server/previous.py): offered only near
where it was made, kept for a few documents; through the daemon's completion core with the tiny model, the next
completion a key further on is offered the first one's tokens and still decodes what greedy decodes. (Whether its
drafts are then verified depends on the pass-cost table, timed live: not asserted.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lookahead_lsp.decoder.drafts import DraftSource
from lookahead_lsp.decoder.types import CancelToken, DecodeRequest, DecodeResult
from lookahead_lsp.lsp_server.config import Config
from lookahead_lsp.lsp_server.documents import Document
from lookahead_lsp.lsp_server.engine import Engine
from lookahead_lsp.lsp_server.pipeline import Completion, Snapshot, complete
from lookahead_lsp.lsp_server.previous import SOURCE, PreviousCompletions


def _drafted(source: DraftSource, context: list[int]) -> tuple[int, ...]:
    found = source.lookup(context, 15, 1)
    return found[0].tokens if found else ()


def test_the_last_completion_is_offered_only_within_its_reach() -> None:
    previous = PreviousCompletions()
    previous.remember("a.py", 100, [5, 6, 7, 8, 9], reach=20)
    (source,) = previous.sources("a.py", 100)  # asked again where it was made
    assert source.name == SOURCE and _drafted(source, [1, 5, 6]) == (7, 8, 9)
    assert len(previous.sources("a.py", 120)) == 1  # a line typed, still within the text it covered
    assert previous.sources("a.py", 99) == [] and previous.sources("a.py", 121) == []  # elsewhere in the file
    assert previous.sources("b.py", 110) == []  # another document


def test_a_newer_completion_replaces_it_and_an_empty_one_does_not() -> None:
    previous = PreviousCompletions()
    previous.remember("a.py", 10, [1, 2, 3], reach=5)
    previous.remember("a.py", 40, [7, 8, 9], reach=5)
    assert previous.sources("a.py", 12) == []
    (source,) = previous.sources("a.py", 42)
    assert _drafted(source, [7]) == (8, 9)
    previous.remember("a.py", 42, [], reach=0)  # a run cancelled before its first token
    assert _drafted(previous.sources("a.py", 42)[0], [7]) == (8, 9)


def test_only_the_most_recently_completed_documents_are_kept() -> None:
    previous = PreviousCompletions(keep=2)
    for name in ("a.py", "b.py", "c.py"):
        previous.remember(name, 0, [1, 2], reach=10)
    assert previous.sources("a.py", 0) == []
    assert len(previous.sources("b.py", 0)) == len(previous.sources("c.py", 0)) == 1


TEXT = """def area(width, height):
    return width * height


def volume(width, height, depth):
    return """


@pytest.fixture
def engines(tiny_model_dir: Path, tmp_path: Path) -> Iterator[dict[str, Engine]]:
    """A lookahead engine and a greedy one over the tiny model (no index, no deadlines)."""
    made = {}
    for decoder in ("lookahead", "greedy"):
        config = Config(
            model=str(tiny_model_dir),
            decoder=decoder,
            index_enabled=False,
            max_new_tokens=16,
            multiline_deadline_ms=None,
            line_deadline_ms=None,
        )
        made[decoder] = Engine(config, [tmp_path], watch=False)
        made[decoder].load_now()
    yield made
    for engine in made.values():
        engine.stop()


def test_the_next_completion_a_key_further_on_drafts_from_the_last(
    engines: dict[str, Engine], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = engines["lookahead"]
    backend = engine.backend()
    offered: list[dict[str, DraftSource]] = []
    generate = backend.generate

    def spied(request: DecodeRequest) -> DecodeResult:
        offered.append({source.name: source for source in request.drafts})
        return generate(request)

    monkeypatch.setattr(backend, "generate", spied)
    uri = (tmp_path / "shapes.py").as_uri()

    def at(text: str, offset: int, decoder: str = "lookahead") -> Completion:
        snapshot = Snapshot(Document(uri, text, language_id="python"), offset, "r")
        return complete(snapshot, engines[decoder], CancelToken())

    first = at(TEXT, len(TEXT))
    assert first.token_ids and SOURCE not in offered[0]
    typed = TEXT + "x"  # a key the ghost text did not show: the daemon completes again
    second = at(typed, len(typed))
    source = offered[1].get(SOURCE)
    assert source is not None
    tokens: list[int] = list(first.token_ids)
    drafted = _drafted(source, tokens[:1])  # what followed the first token, wherever it stood in the first completion
    assert any(
        tuple(tokens[j + 1 : j + 1 + len(drafted)]) == drafted for j in range(len(tokens)) if tokens[j] == tokens[0]
    )
    assert second.token_ids == at(typed, len(typed), "greedy").token_ids  # drafts never change what is decoded
    at(typed, 10)  # back in the first line: the last completion is not offered there
    assert SOURCE not in offered[-1]
