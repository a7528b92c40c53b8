"""The completion cache (pure): keyed by document state, growing with its run, bounded, typed-through."""

from __future__ import annotations

from lookahead_lsp.decoder.types import DecodeStats
from lookahead_lsp.lsp_server.documents import Document
from lookahead_lsp.lsp_server.held import CompletionCache
from lookahead_lsp.lsp_server.pipeline import Completion, Edit, Snapshot


def _doc(text: str, version: int = 1, uri: str = "file:///a.py") -> Document:
    return Document(uri=uri, text=text, version=version)


def _completion(doc: Document, offset: int, text: str, tokens: int, final: bool, request_id: str = "r1") -> Completion:
    snapshot, edit = Snapshot(doc, offset, request_id), Edit(text, offset, offset)
    return Completion(request_id, snapshot, edit, list(range(tokens)), DecodeStats(), {}, final)


def test_an_entry_grows_with_its_run_and_ignores_older_publications() -> None:
    cache = CompletionCache()
    doc = _doc("x = ")
    entry, grew = cache.hold(_completion(doc, 4, "comp", 2, final=False))
    assert grew and entry.running and not entry.final
    assert cache.hold(_completion(doc, 4, "compute(a, b)", 6, final=True)) == (entry, True)
    assert entry.final and not entry.running and entry.edit.text == "compute(a, b)"
    assert cache.hold(_completion(doc, 4, "comp", 2, final=False)) == (entry, False)  # late: changes nothing
    assert cache.answer(doc, 4) == (entry, entry.edit)
    assert cache.answer(_doc("x = ", version=2), 4) is None  # another version: another state


def test_typed_through_the_held_text_and_a_cancelled_run_is_no_answer_at_its_state() -> None:
    cache = CompletionCache()
    doc = _doc("x = ")
    entry, _ = cache.hold(_completion(doc, 4, "compute", 3, final=False))
    typed = _doc("x = co", version=3)
    found = cache.answer(typed, 6)
    assert found is not None and found[0] is entry and found[1].text == "mpute"
    cache.ended("r1", doc, 4)  # cancelled in the background before it was whole
    assert cache.answer(doc, 4) is None  # a new run will do better ...
    assert cache.answer(typed, 6) is not None  # ... but what was shown can still be typed through
    assert cache.running(doc.uri) is None


def test_the_cache_is_bounded_least_recently_used_first() -> None:
    cache = CompletionCache(size=2)
    docs = [_doc("x = ", version=v) for v in range(3)]
    for i, doc in enumerate(docs[:2]):
        cache.hold(_completion(doc, 4, "y", 1, final=True, request_id=f"r{i}"))
    assert cache.answer(docs[0], 4) is not None  # used: now the most recent
    cache.hold(_completion(docs[2], 4, "y", 1, final=True, request_id="r2"))
    assert len(cache) == 2 and cache.answer(docs[1], 4) is None and cache.answer(docs[0], 4) is not None
    cache.drop(docs[0].uri)
    assert len(cache) == 0


def test_typing_all_of_a_growing_entry_waits_for_the_rest() -> None:
    cache = CompletionCache()
    doc = _doc("x = ")
    entry, _ = cache.hold(_completion(doc, 4, "comp", 2, final=False))
    typed = _doc("x = comp", version=2)
    found = cache.answer(typed, 8)
    assert found is not None and found[0] is entry and found[1].text == ""  # the rest is coming
    cache.hold(_completion(doc, 4, "comp", 2, final=True))
    assert cache.answer(typed, 8) is None  # whole and typed: nothing more to give
