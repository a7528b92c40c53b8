"""evaluation/typing_drift.py: typing real files line after line; the anchors cut the keystrokes' re-prefill."""

from __future__ import annotations

import difflib
import inspect
import textwrap
from pathlib import Path
from typing import Any

import pytest

from lookahead_lsp.evaluation.speed import ContextBuilder
from lookahead_lsp.evaluation.typing_drift import CLIFF_TOKENS, merge, type_file, typing_events
from lookahead_lsp.evaluation.workloads import Corpus


def test_typing_events_type_each_line_anew_then_pause() -> None:
    text = "a = 1\nbbbbbbbbbb = 2\nc = 3\n"
    events = list(typing_events(text, 1, 1))
    assert [e[2] for e in events] == [False] * (len(events) - 1) + [True]
    assert events[-1] == (text, text.index(" = 2") + 4, True)
    assert events[0] == ("a = 1\n\nc = 3\n", 6, False)  # Enter: the line is empty
    for doc, offset, _ in events:
        assert doc.startswith("a = 1\n") and doc.endswith("\nc = 3\n")
        assert doc[offset:] == "\nc = 3\n"  # the cursor is at the end of what is typed of the line
        assert "bbbbbbbbbb = 2".startswith(doc[6:offset])


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    """Two modules of Python's standard library: real code none of us wrote, long enough for the prefix to be cut,
    and fixed for a Python version (the project's own modules, typed here before, changed with every edit of
    them, and with them where the prefix's start moved)."""
    root = tmp_path_factory.mktemp("corpus")
    for module in (difflib, textwrap):
        (root / Path(inspect.getfile(module)).name).write_text(inspect.getsource(module))
    return Corpus.load(root)


def test_anchors_cut_the_keystrokes_that_re_prefill_a_moved_head(corpus: Corpus, tokenizer: Any) -> None:
    context = ContextBuilder(corpus, tokenizer, 512, heal=True, layout="psm-short", anchored=True)
    source = max(corpus.files, key=lambda f: len(f.text))
    fresh = merge([type_file(context, source, 80, 60, "fresh")])
    anchored = merge([type_file(context, source, 80, 60, "anchored")])
    assert fresh.lines == anchored.lines == 60 and len(fresh.keystrokes) == len(anchored.keystrokes)
    assert fresh.cliffs >= 4 and anchored.cliffs <= fresh.cliffs // 2
    assert fresh.cliffs <= sum(k > CLIFF_TOKENS for k in fresh.keystrokes)
    assert sum(anchored.keystrokes) < sum(fresh.keystrokes)
    assert sum(anchored.pauses) > 0 == sum(fresh.pauses)  # the moves happen at the pauses instead
    assert sum(anchored.prefix_tokens) >= 0.9 * sum(fresh.prefix_tokens)  # about as much code in view
