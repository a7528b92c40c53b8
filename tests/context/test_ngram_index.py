"""NgramIndex: lookups equal a brute-force search, ranking and preferences, updates, scale of the layout."""

from __future__ import annotations

import threading

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lookahead_lsp.context.ngram_index import TIER_CURRENT, TIER_OPEN, TIER_OTHER, NgramIndex, build_segment
from lookahead_lsp.decoder.drafts import Draft, DraftSource


def brute_force(
    index: NgramIndex, context: list[int], max_len: int, max_count: int, tiers: dict[str, int]
) -> list[Draft]:
    """The specification: longest match first, then (tier, count, recency), skipping covered drafts."""
    chosen: list[Draft] = []
    for k in range(min(index.depth, len(context)), 0, -1):
        groups: dict[tuple[int, ...], list] = {}
        for path in index.paths():
            stored = index.file_tokens(path)
            assert stored is not None
            tokens = stored.tolist()
            gen = index.generation(path)
            for i in range(k - 1, len(tokens) - 1):
                if tokens[i - k + 1 : i + 1] == context[-k:]:
                    cont = tuple(tokens[i + 1 : i + 1 + max_len])
                    g = groups.setdefault(cont, [0, -1, (-1, -1)])
                    g[0] += 1
                    g[1] = max(g[1], tiers.get(path, TIER_OTHER))
                    g[2] = max(g[2], (gen, i))
        ranked = sorted(groups.items(), key=lambda kv: (kv[1][1], kv[1][0], kv[1][2]), reverse=True)
        for cont, (count, _, _) in ranked:
            if not any(d.tokens[: len(cont)] == cont for d in chosen):
                chosen.append(Draft(cont, "workspace", k, count))
                if len(chosen) == max_count:
                    return chosen
    return chosen


small_tokens = st.lists(st.integers(0, 4), max_size=30)
paths = st.sampled_from(["a", "b", "c", "d"])


@settings(max_examples=150, deadline=None)
@given(
    files=st.dictionaries(paths, small_tokens, max_size=4),
    edits=st.lists(st.tuples(paths, st.none() | small_tokens), max_size=4),
    current=st.none() | paths,
    opened=st.sets(paths, max_size=2),
    context=st.lists(st.integers(0, 5), max_size=9),
    max_len=st.integers(1, 5),
    max_count=st.integers(1, 6),
    depth=st.integers(1, 7),
    overlay_max=st.sampled_from([0, 20, 10_000]),
    few=st.sampled_from([0, 3, 10_000]),  # every level by numpy, the small ones in plain Python, every one so
)
def test_lookup_equals_brute_force(files, edits, current, opened, context, max_len, max_count, depth, overlay_max, few):
    index = NgramIndex(depth=depth, overlay_max_tokens=overlay_max, max_candidates=10_000, few=few)
    index.build(sorted(files.items()))
    index.set_preferences(current, opened)
    for path, tokens in edits:
        if tokens is None:
            index.remove_file(path)
        else:
            index.set_file(path, tokens)
    tiers = {p: TIER_OPEN for p in opened}
    if current is not None:
        tiers[current] = TIER_CURRENT
    expected = brute_force(index, context, max_len, max_count, tiers)
    assert index.lookup(context, max_len, max_count) == expected


def test_is_a_draft_source_named_workspace():
    index = NgramIndex()
    assert isinstance(index, DraftSource)
    assert index.name == "workspace"
    assert index.lookup([1, 2], 4, 4) == []


def test_longest_match_first_then_count_then_recency():
    index = NgramIndex()
    index.build([("old", [1, 2, 3, 7, 7]), ("mid", [9, 2, 3, 8, 8, 0, 2, 3, 8, 8]), ("new", [5, 2, 3, 6])])
    drafts = index.lookup([1, 2, 3], 2, 4)
    assert drafts[0] == Draft((7, 7), "workspace", 3, 1)  # the only 3-token match
    assert [d.tokens for d in drafts[1:]] == [(8, 8), (6,)]  # the more frequent first
    assert [d.match_len for d in drafts[1:]] == [2, 2]
    tie = NgramIndex()
    tie.build([("older", [2, 3, 4]), ("newer", [2, 3, 5])])
    assert [d.tokens for d in tie.lookup([2, 3], 1, 2)] == [(5,), (4,)]  # equal counts: the newer first


def test_preferences_rank_current_then_open_files_first():
    index = NgramIndex()
    index.build([("cur", [1, 2, 10]), ("open", [1, 2, 20]), ("other", [1, 2, 30, 1, 2, 30])])
    assert index.lookup([1, 2], 1, 3)[0].tokens == (30,)  # most frequent without preferences
    index.set_preferences("cur", ["open"])
    assert [d.tokens for d in index.lookup([1, 2], 1, 3)] == [(10,), (20,), (30,)]
    index.set_preferences(None, ["open"])
    assert [d.tokens for d in index.lookup([1, 2], 1, 3)][0] == (20,)
    index.set_file("open", [1, 2, 21])  # an edit of a preferred file shows at once
    assert index.lookup([1, 2], 1, 1)[0].tokens == (21,)


def test_never_reads_across_files():
    index = NgramIndex()
    index.build([("a", [1, 2]), ("b", [3, 4])])
    assert index.lookup([1, 2], 4, 4) == []  # 2 ends its file: no continuation
    assert index.lookup([2, 3], 4, 4) == [Draft((4,), "workspace", 1, 1)]  # "2 3" never occurs as a pair


def test_replace_and_remove_files_and_merge():
    index = NgramIndex(overlay_max_tokens=5)
    index.build([("a", [1, 2, 3]), ("b", [1, 2, 4])])
    index.set_file("a", [1, 2, 5])
    assert {d.tokens for d in index.lookup([1, 2], 1, 5)} == {(5,), (4,)}
    index.remove_file("b")
    assert [d.tokens for d in index.lookup([1, 2], 1, 5)] == [(5,)]
    index.set_file("c", [1, 2, 6, 6, 6, 6])  # overlay past its limit: merged into main
    index.merge()
    assert {d.tokens for d in index.lookup([1, 2], 1, 5)} == {(5,), (6,)}
    assert index.num_files == 2 and index.num_tokens == 9


def test_large_vocabulary_uses_wide_codes():
    rng = np.random.default_rng(1)
    tokens = rng.permutation(151_000)[:70_000].astype(np.int32)  # over 65535 distinct ids
    seg = build_segment([("f", 1, tokens)], depth=7)
    assert seg.codes.dtype == np.uint32
    index = NgramIndex()
    index.build([("f", tokens)])
    ctx = tokens[1000:1010].tolist()
    assert index.lookup(ctx, 3, 2) == [Draft(tuple(tokens[1010:1013].tolist()), "workspace", 7, 1)]
    assert index.lookup([151_999], 3, 2) == []


def test_huge_ranges_are_sampled_but_valid():
    tokens = [1, 2] * 5000 + [1, 3] * 10
    index = NgramIndex(max_candidates=64)
    index.build([("f", tokens)])
    drafts = index.lookup([9, 1], 2, 3)
    assert drafts and all(d.match_len == 1 and d.tokens in {(2, 1), (3, 1)} for d in drafts)


def test_memory_per_token_is_compact():
    rng = np.random.default_rng(0)
    tokens = (rng.zipf(1.3, 200_000) % 40_000).astype(np.int32)
    index = NgramIndex()
    index.build([(f"f{i}", tokens[i * 2000 : (i + 1) * 2000]) for i in range(100)])
    assert index.bytes_per_token <= 24


def test_concurrent_lookups_while_writing():
    index = NgramIndex(overlay_max_tokens=200)
    index.build([(f"f{i}", list(range(i, i + 50))) for i in range(20)])
    errors: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        try:
            while not stop.is_set():
                for d in index.lookup([5, 6, 7], 4, 4):
                    assert d.tokens[0] == 8
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for i in range(60):
        index.set_file(f"f{i % 20}", list(range(i % 7, i % 7 + 40)))
    stop.set()
    for t in threads:
        t.join()
    assert not errors
