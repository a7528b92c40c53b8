"""Token healing with the real Qwen2.5-Coder tokenizer: what is backed up, and what the constraint allows."""

from __future__ import annotations

from typing import Any

import pytest

from lookahead_lsp.context.healing import (
    HealingConstraint,
    VocabIndex,
    heal,
    heal_ids,
    healing_constraint,
    strip_healed,
    vocab_index,
)


def token_texts(tokenizer: Any, ids: Any) -> list[str]:
    return [tokenizer.decode([i]) for i in ids]


def test_cursor_inside_a_word_backs_up_to_the_word_start(tokenizer: Any) -> None:
    healing = heal(tokenizer, "p = run(cmd, stdout=subpr")
    assert healing.removed_text.endswith("subpr")  # "=sub" + "pr": both tokens split the word
    assert healing.kept_text is not None
    assert healing.kept_text + healing.removed_text == "p = run(cmd, stdout=subpr"


def test_constraint_allows_only_tokens_agreeing_with_the_removed_text(tokenizer: Any) -> None:
    healing = heal(tokenizer, "p = run(cmd, stdout=subpr")
    constraint = healing_constraint(tokenizer, healing)
    assert constraint is not None
    first = constraint.allowed([])
    assert first is not None and len(first) > 0
    removed = healing.removed_text
    for text in token_texts(tokenizer, first):
        assert text.startswith(removed) or removed.startswith(text), text
    natural = tokenizer.encode(removed + "ocess.PIPE", add_special_tokens=False)
    assert natural[0] in first
    assert tokenizer.encode(" subprocess", add_special_tokens=False)[0] not in first


def test_constraint_follows_partial_progress_then_lets_go(tokenizer: Any) -> None:
    healing = heal(tokenizer, "x = subpr")
    constraint = healing_constraint(tokenizer, healing)
    assert constraint is not None
    assert healing.removed_text == " subpr"  # " sub" + "pr"
    step = tokenizer.encode(" sub", add_special_tokens=False)
    assert len(step) == 1
    allowed = constraint.allowed(step)
    assert allowed is not None and tokenizer.encode("pr", add_special_tokens=False)[0] in allowed
    assert all(t.startswith("pr") or "pr".startswith(t) for t in token_texts(tokenizer, allowed))
    done = tokenizer.encode(healing.removed_text + "ocess", add_special_tokens=False)
    assert constraint.allowed(done) is None


@pytest.mark.parametrize(
    ("prefix", "line"),
    [
        ("def f():\n    x = 1\n        ", "return x"),  # Python, 8 spaces typed after Enter
        ("function f(a) {\n  if (a) {\n    g();\n      ", "}"),  # JavaScript: a closing brace
        ("class A {\n    int f() {\n\t\t", "return 1;"),  # Java with tabs
        ("x = ", "1"),  # a space after an operator
    ],
)
def test_trailing_whitespace_keeps_the_tokenizers_own_split(tokenizer: Any, prefix: str, line: str) -> None:
    """The prompt keeps the whitespace tokens the tokenizer gives that line when it is typed whole, and the
    model re-types only what the tokenizer joins to the next word (never the whole indentation)."""
    ids = tokenizer.encode(prefix, add_special_tokens=False)
    healing = heal_ids(tokenizer, ids)
    assert healing.kept_ids is not None
    whole = tokenizer.encode(prefix + line, add_special_tokens=False)
    kept = list(healing.kept_ids)
    assert whole[: len(kept)] == kept  # the natural split, up to the word
    assert tokenizer.decode(kept) + healing.removed_text == prefix
    assert 0 < len(healing.removed_text) < 2  # one space or tab: the one joined to the word
    constraint = healing_constraint(tokenizer, healing)
    assert constraint is not None
    assert whole[len(kept)] in set(constraint.allowed([]) or ())  # the natural next token is allowed


def test_no_healing_after_a_line_break(tokenizer: Any) -> None:
    healing = heal(tokenizer, "x = 1\n")
    assert not healing.healed and healing.kept_text == "x = 1\n"
    assert healing_constraint(tokenizer, healing) is None


def test_a_whole_word_is_not_extended_past_punctuation(tokenizer: Any) -> None:
    healing = heal(tokenizer, "foo(a, b")
    assert healing.removed_text == " b"


def test_heal_ids_drops_the_same_tokens(tokenizer: Any) -> None:
    ids = tokenizer.encode("p = run(cmd, stdout=subpr", add_special_tokens=False)
    healing = heal_ids(tokenizer, ids)
    assert healing.kept_ids is not None
    assert list(healing.kept_ids) == ids[: len(healing.kept_ids)]
    assert tokenizer.decode(list(healing.kept_ids)) + healing.removed_text == "p = run(cmd, stdout=subpr"


def test_split_character_is_healed_whole(tokenizer: Any) -> None:
    healing = heal(tokenizer, 'a = "日本語')
    assert healing.removed_text.endswith("語")
    assert healing.kept_text is not None and healing.kept_text + healing.removed_text == 'a = "日本語'


def test_vocab_index_is_cached_per_tokenizer(tokenizer: Any) -> None:
    assert vocab_index(tokenizer) is vocab_index(tokenizer)


def test_vocab_index_prefix_search() -> None:
    index = VocabIndex([b"a", b"ab", b"abc", b"abd", b"b", b"", b"\xe6\x97", b"\xe6\x97\xa5"])
    assert index.compatible(b"ab") == (0, 1, 2, 3)
    assert index.compatible(b"abc") == (0, 1, 2)
    assert index.compatible(b"\xe6\x97\xa5") == (6, 7)
    constraint = HealingConstraint(index, "abd")
    assert constraint.allowed([]) == (0, 1, 3)
    assert constraint.allowed([1]) == ()  # "ab" leaves "d": no token of this vocabulary starts with it
    assert constraint.allowed([3]) is None


def test_strip_healed() -> None:
    assert strip_healed(" subprocess.run", " subpr") == "ocess.run"
    assert strip_healed(" sub", " subpr") == ""
    assert strip_healed("xyz", "") == "xyz"


def test_typed_indentation_is_not_deepened(tokenizer: Any) -> None:
    """After a typed indentation the model may not add whitespace: a deeper indentation would have been one
    longer whitespace token in the tokenizer's own split, not the typed one plus more."""
    ids = tokenizer.encode("def f():\n    x = 1\n    ", add_special_tokens=False)
    healing = heal_ids(tokenizer, ids)
    constraint = healing_constraint(tokenizer, healing)
    assert constraint is not None and healing.removed_text == " "
    first = set(constraint.allowed([]) or ())
    space, four = (tokenizer.encode(t, add_special_tokens=False)[0] for t in (" ", "    "))
    assert tokenizer.encode(" return", add_special_tokens=False)[0] in first
    assert space in first and four not in first
    after_space = set(constraint.allowed([space]) or ())
    assert space not in after_space and tokenizer.encode("return", add_special_tokens=False)[0] in after_space
    assert constraint.allowed([space, tokenizer.encode("return", add_special_tokens=False)[0]]) is None
