"""context/anchors.py: a document's keystrokes keep its last prompt's snippets and prefix line; idle re-chooses."""

from __future__ import annotations

from typing import Any

from lookahead_lsp.context.anchors import PromptAnchors
from lookahead_lsp.context.definitions import CursorContext
from lookahead_lsp.context.prompt import PromptBudget, PromptBuilder
from lookahead_lsp.context.snippets import Snippet

SOURCE = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(200))


class Query:
    """A snippet query that counts its calls and answers what it is told."""

    def __init__(self) -> None:
        self.calls = 0
        self.answer = [Snippet("lib.py", "def helper(x):\n    return x * 2\n", 3.0, 0)]

    def __call__(self) -> CursorContext:
        self.calls += 1
        return CursorContext(tuple(self.answer))


def test_keystrokes_keep_the_snippets_and_line_a_settled_prompt_chooses_again(tokenizer: Any) -> None:
    builder = PromptBuilder(tokenizer, PromptBudget(total=600))
    anchors, query = PromptAnchors(), Query()
    offset = SOURCE.index("return x + 150")
    first = anchors.input_for("m.py", SOURCE, offset, "demo", False, query)
    assert query.calls == 1 and first.anchor_line is None  # no anchor yet: a fresh, stateless prompt
    built = builder.build(first)
    anchors.remember(first, built)

    query.answer = [Snippet("other.py", "def other():\n    pass\n", 9.0, 0)]
    key = anchors.input_for("m.py", SOURCE, offset + 1, "demo", False, query)
    assert query.calls == 1  # a keystroke does not rank the snippets again
    assert list(key.snippets) == list(first.snippets) and key.anchor_line == built.prefix_line
    assert not key.settled

    settled = anchors.input_for("m.py", SOURCE, offset + 1, "demo", True, query)
    assert query.calls == 2 and [s.path for s in settled.snippets] == ["other.py"] and settled.settled
    assert settled.anchor_line == built.prefix_line

    other = anchors.input_for("n.py", SOURCE, offset, "demo", False, query)
    assert other.anchor_line is None and query.calls == 3  # anchors are per document
    anchors.forget("m.py")
    assert anchors.input_for("m.py", SOURCE, offset, "demo", False, query).anchor_line is None


def test_only_the_most_recent_documents_keep_anchors(tokenizer: Any) -> None:
    builder = PromptBuilder(tokenizer, PromptBudget(total=600))
    anchors, query = PromptAnchors(max_documents=2), Query()
    for name in ("a.py", "b.py", "c.py"):
        request = anchors.input_for(name, SOURCE, 100, "", False, query)
        anchors.remember(request, builder.build(request))
    assert anchors.input_for("a.py", SOURCE, 100, "", False, query).anchor_line is None
    assert anchors.input_for("c.py", SOURCE, 100, "", False, query).anchor_line == 0


def test_a_prompt_moves_with_other_snippets_or_another_prefix_line_not_with_new_scores(tokenizer: Any) -> None:
    builder = PromptBuilder(tokenizer, PromptBudget(total=600))
    anchors, query = PromptAnchors(), Query()
    offset = SOURCE.index("return x + 150")
    first = anchors.input_for("m.py", SOURCE, offset, "demo", False, query)
    built = builder.build(first)
    assert not anchors.moves(first, built)  # no anchor yet: nothing to move
    anchors.remember(first, built)
    query.answer = [Snippet("lib.py", "def helper(x):\n    return x * 2\n", 0.5, 0)]  # ranked again, same text
    rescored = anchors.input_for("m.py", SOURCE, offset, "demo", True, query)
    assert not anchors.moves(rescored, builder.build(rescored))
    query.answer = [Snippet("lib.py", "def helper(x):\n    return x * 3\n", 3.0, 0)]  # the file changed
    changed = anchors.input_for("m.py", SOURCE, offset, "demo", True, query)
    assert anchors.moves(changed, builder.build(changed))
    far = anchors.input_for("m.py", SOURCE, SOURCE.index("return x + 190"), "demo", False, query)
    moved = builder.build(far)  # 40 functions on: the prefix no longer fits from the anchor's line
    assert moved.prefix_line != built.prefix_line and anchors.moves(far, moved)


def test_a_settled_prompt_grows_and_the_keystrokes_after_it_stay_grown(tokenizer: Any) -> None:
    """With ``grow`` a prompt built in idle time is on the larger budget, a keystroke's on its anchor's; a
    prompt whose budget differs from its anchor's moves (its head is another)."""
    small, large = PromptBuilder(tokenizer, PromptBudget(total=300)), PromptBuilder(tokenizer, PromptBudget(total=900))
    anchors, query = PromptAnchors(), Query()
    offset = SOURCE.index("return x + 150")
    first = anchors.input_for("m.py", SOURCE, offset, "demo", False, query, grow=True)
    assert not first.grown  # no anchor yet: a keystroke's prompt is on the keystrokes' budget
    anchors.remember(first, small.build(first))
    settled = anchors.input_for("m.py", SOURCE, offset, "demo", True, query, grow=True)
    grown = large.build(settled)
    assert settled.grown and anchors.moves(settled, grown) and grown.prefix_line < small.build(first).prefix_line
    anchors.remember(settled, grown)
    key = anchors.input_for("m.py", SOURCE, offset + 1, "demo", False, query, grow=True)
    assert key.grown and key.anchor_line == grown.prefix_line and not anchors.moves(key, large.build(key))
    assert not anchors.input_for("m.py", SOURCE, offset, "demo", True, query).grown  # without grow: never
