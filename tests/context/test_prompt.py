"""The Qwen2.5-Coder prompt: exact layout, exact budgets, stable token prefixes across keystrokes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lookahead_lsp.context.prompt import (
    Layout,
    PromptBudget,
    PromptBuilder,
    PromptInput,
    PromptTooSmall,
    layout_budget,
)
from lookahead_lsp.context.snippets import Snippet

SOURCE = "".join(f"def f{i}(x):\n    return x + {i}  # ü {i}\n\n" for i in range(200))


@pytest.fixture(scope="module")
def builder(tokenizer: Any) -> PromptBuilder:
    return PromptBuilder(tokenizer, PromptBudget(total=600))


@pytest.fixture(scope="module")
def anchored(tokenizer: Any) -> PromptBuilder:
    return PromptBuilder(tokenizer, PromptBudget(total=600), anchored=True)


def snippet(path: str, text: str, score: float, line: int = 0) -> Snippet:
    return Snippet(path, text, score, line)


FULL_CONTEXT = [snippet("lib.py", "".join(f"LIMIT_{i} = {i}\n" for i in range(300)), 1.0)]
"""Context that fills its room: the prefix keeps its share (no spare room to take)."""


def test_fim_layout_decodes_to_the_repo_level_format(tokenizer: Any) -> None:
    text = "import os\n\ndef main():\n    print(os.getcwd())\n"
    offset = text.index("os.getcwd")
    request = PromptInput(
        "src/app.py",
        text,
        offset,
        repo_name="demo",
        snippets=[snippet("src/util.py", "def helper():\n    return 1\n", 2.0, 4)],
    )
    built = PromptBuilder(tokenizer).build(request)
    expected = (
        "<|repo_name|>demo\n"
        "<|file_sep|>src/util.py\ndef helper():\n    return 1\n"
        "<|file_sep|>src/app.py\n"
        f"<|fim_prefix|>{text[:offset]}<|fim_suffix|>{text[offset:]}<|fim_middle|>"
    )
    assert tokenizer.decode(built.token_ids) == expected
    assert built.prefix_text == text[:offset] and built.suffix_text == text[offset:]
    assert built.suffix_ids == tokenizer.encode(text[offset:], add_special_tokens=False)
    assert built.token_ids[-1] == tokenizer.convert_tokens_to_ids("<|fim_middle|>")
    assert sum(v for k, v in built.counts.items() if k != "total") == built.counts["total"] == len(built.token_ids)


def test_a_prompt_without_other_files_is_the_plain_fim_format(tokenizer: Any) -> None:
    """No section of another file: no repository header and no path line (the report's own FIM prompt; the 1.5B
    wrote placeholder comments at a function's first line under a header with nothing in it)."""
    text = "def main():\n    print(1)\n"
    offset = text.index("print")
    built = PromptBuilder(tokenizer).build(PromptInput("src/app.py", text, offset, repo_name="demo"))
    expected = f"<|fim_prefix|>{text[:offset]}<|fim_suffix|>{text[offset:]}<|fim_middle|>"
    assert tokenizer.decode(built.token_ids) == expected and not built.sections
    assert built.counts["header"] == 3  # the three FIM tokens
    assert sum(v for k, v in built.counts.items() if k != "total") == len(built.token_ids)


def test_special_token_text_in_code_stays_text(tokenizer: Any) -> None:
    text = 'MARK = "<|fim_middle|>"\n'
    built = PromptBuilder(tokenizer).build(PromptInput("a.py", text, len(text)))
    fim_middle = tokenizer.convert_tokens_to_ids("<|fim_middle|>")
    assert built.token_ids.count(fim_middle) == 1


def test_prefix_is_cut_at_its_start_on_a_line_boundary(builder: PromptBuilder) -> None:
    offset = SOURCE.index("return x + 150")
    built = builder.build(PromptInput("m.py", SOURCE, offset))
    assert built.counts["total"] <= 600
    assert SOURCE[:offset].endswith(built.prefix_text)
    assert len(built.prefix_text) < offset
    start = offset - len(built.prefix_text)
    assert SOURCE[start - 1] == "\n"  # a whole line
    assert SOURCE.count("\n", 0, start) % builder.budget.snap_lines == 0


def test_suffix_is_cut_at_its_end_on_a_line_boundary(builder: PromptBuilder) -> None:
    offset = SOURCE.index("return x + 10")
    built = builder.build(PromptInput("m.py", SOURCE, offset))
    assert SOURCE[offset:].startswith(built.suffix_text)
    assert built.suffix_text.endswith("\n") and len(built.suffix_text) < len(SOURCE) - offset
    available = 600 - built.counts["header"]
    share = int(available * builder.budget.suffix_share)
    # beside a whole prefix (the cursor near the top) the suffix takes the room the context leaves of its share
    assert built.prefix_line == 0 and len(built.prefix_text) == offset
    assert share < built.counts["suffix"] <= available - int(available * builder.budget.prefix_share)
    low = SOURCE.index("return x + 150")
    cut = builder.build(PromptInput("m.py", SOURCE, low))
    assert cut.prefix_line > 0 and SOURCE[low:].startswith(cut.suffix_text)
    assert cut.suffix_text.endswith("\n") and cut.counts["suffix"] <= share  # beside a cut prefix: its share


def test_context_fills_what_is_left_best_snippets_first_in_stable_order(tokenizer: Any) -> None:
    body = "".join(f"value_{i} = compute({i})\n" for i in range(40))
    snippets = [snippet("z.py", body, 9.0), snippet("a.py", body, 1.0), snippet("m.py", body, 5.0)]
    builder = PromptBuilder(tokenizer, PromptBudget(total=700))
    built = builder.build(PromptInput("cur.py", "x = 1\n", 6, snippets=snippets))
    assert built.counts["total"] <= 700
    paths = [s.path for s in built.sections]
    assert "z.py" in paths and "a.py" not in paths  # the best one first, the worst left out
    assert paths == sorted(paths)  # emitted by path
    cut = [s for s in built.sections if s.text != body]
    assert len(cut) <= 1 and all(body.startswith(s.text) and s.text.endswith("\n") for s in cut)


def test_typing_keeps_context_and_prefix_head_tokens(builder: PromptBuilder) -> None:
    snippets = [snippet("lib.py", "def helper(x):\n    return x * 2\n", 3.0)]
    offset = SOURCE.index("return x + 120") + len("return x")
    before = builder.build(PromptInput("m.py", SOURCE, offset, "demo", snippets))
    typed = SOURCE[:offset] + " *" + SOURCE[offset:]
    after = builder.build(PromptInput("m.py", typed, offset + 2, "demo", snippets))
    shared = 0
    for a, b in zip(before.token_ids, after.token_ids, strict=False):
        if a != b:
            break
        shared += 1
    fixed = before.counts["header"] - 3 + before.counts["context"]
    assert shared >= fixed + before.counts["prefix"] - 3  # all but the last tokens before the cursor


def test_healing_drops_the_last_prefix_tokens(tokenizer: Any) -> None:
    text = "import subprocess\np = subprocess.run(cmd, stdout=subpr)\n"
    offset = text.index("subpr)") + len("subpr")
    plain = PromptBuilder(tokenizer).build(PromptInput("a.py", text, offset))
    healed = PromptBuilder(tokenizer, heal=True).build(PromptInput("a.py", text, offset))
    assert healed.healed_text.endswith("subpr")
    assert healed.prefix_text + healed.healed_text == plain.prefix_text
    assert healed.counts["prefix"] < plain.counts["prefix"]
    assert tokenizer.decode(healed.token_ids).endswith("stdout<|fim_suffix|>)\n<|fim_middle|>")


def test_budget_too_small_for_the_fixed_tokens(tokenizer: Any) -> None:
    with pytest.raises(PromptTooSmall):  # fewer than the three FIM tokens
        PromptBuilder(tokenizer, PromptBudget(total=2)).build(PromptInput("a/very/long/path/name.py", "x", 1, "repo"))
    with pytest.raises(PromptTooSmall):  # with a section to choose from, the two header lines count too
        PromptBuilder(tokenizer, PromptBudget(total=5)).build(
            PromptInput("a/very/long/path/name.py", "x", 1, "repo", (snippet("b.py", "y = 1\n", 1.0),))
        )
    with pytest.raises(ValueError):
        PromptBudget(prefix_share=0.9, suffix_share=0.2)
    with pytest.raises(ValueError):
        PromptBuilder(tokenizer, layout="mps")  # type: ignore[arg-type]


LINES = st.lists(
    st.sampled_from(list("abc xyz_()[]{}:=+-.,'\"\t\n日é") + ["    ", "\n\n", "return ", "<|file_sep|>"]),
    max_size=150,
).map("".join)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    total=st.integers(min_value=12, max_value=400),
    prefix_share=st.floats(min_value=0.0, max_value=0.8),
    suffix_share=st.floats(min_value=0.0, max_value=0.2),
    text=LINES,
    cursor=st.floats(min_value=0.0, max_value=1.0),
    snippet_texts=st.lists(LINES, max_size=3),
    layout=st.sampled_from(["psm", "psm-line"]),
    heal=st.booleans(),
)
def test_never_over_budget(
    tokenizer: Any,
    total: int,
    prefix_share: float,
    suffix_share: float,
    text: str,
    cursor: float,
    snippet_texts: list[str],
    layout: Layout,
    heal: bool,
) -> None:
    budget = PromptBudget(total=total, prefix_share=prefix_share, suffix_share=suffix_share)
    offset = int(len(text) * cursor)
    snippets = [snippet(f"s{i}.py", t, float(i)) for i, t in enumerate(snippet_texts)]
    request = PromptInput("p.py", text, offset, "r", snippets)
    built = PromptBuilder(tokenizer, budget, layout, heal=heal).build(request)
    assert len(built.token_ids) <= total
    assert built.counts["total"] == len(built.token_ids)
    kept = text[:offset][: offset - len(built.healed_text)]
    assert kept.endswith(built.prefix_text) and text[offset:].startswith(built.suffix_text)
    fixed = built.counts["header"]
    prefix_cap, suffix_cap = int((total - fixed) * prefix_share), int((total - fixed) * suffix_share)
    context_room = total - fixed - prefix_cap - suffix_cap
    # beyond its share, the prefix holds only room the context sections and a whole suffix left
    whole_suffix = len(built.suffix_text) == len(text) - offset
    lent = suffix_cap - built.counts["suffix"] if whole_suffix else 0
    assert built.counts["prefix"] - prefix_cap <= max(0, context_room - built.counts["context"]) + lent + 1  # healing
    assert built.counts["total"] <= total
    if built.counts["suffix"] > suffix_cap:  # only beside a whole prefix, in room the context sections left
        assert kept == built.prefix_text
        assert built.counts["suffix"] - suffix_cap <= context_room - built.counts["context"]


def test_a_cut_prefix_takes_the_room_the_context_leaves(tokenizer: Any) -> None:
    text = "".join(f"value_{i} = compute_{i}(value_{i - 1})\n" for i in range(200))
    budget = PromptBudget(total=512)
    alone = PromptBuilder(tokenizer, budget).build(PromptInput("p.py", text, len(text), "r"))
    cap = int((512 - alone.counts["header"]) * budget.prefix_share)
    assert alone.counts["prefix"] > cap  # no context: the prefix has its room
    assert alone.counts["total"] <= 512
    helper = snippet("helpers.py", "".join(f"def compute_{i}(x):\n    return x + {i}\n" for i in range(60)), 1.0)
    crowded = PromptBuilder(tokenizer, budget).build(PromptInput("p.py", text, len(text), "r", [helper]))
    lent = int((512 - alone.counts["header"]) * budget.suffix_share) % budget.context_quantum  # the empty suffix's
    assert crowded.counts["context"] > 0 and crowded.counts["prefix"] <= cap + lent < alone.counts["prefix"]


def _shared(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _line_ends(text: str, first: int, last: int) -> list[int]:
    """Offsets of the ends of lines ``first .. last - 1`` (before their newline)."""
    ends = [i for i, c in enumerate(text) if c == "\n"]
    return ends[first:last]


def test_an_anchored_prefix_start_stays_while_it_fits_then_moves_ahead_of_need(
    anchored: PromptBuilder, builder: PromptBuilder
) -> None:
    """Typing line after line: the stateless start moves every few lines; the anchored one stays on its line
    until the prefix no longer fits, then moves so that a share of the cap is free (fewer moves), and every
    prompt stays within the budget."""
    cap = int(
        (600 - anchored.build(PromptInput("m.py", SOURCE, 0, snippets=FULL_CONTEXT)).counts["header"])
        * anchored.budget.prefix_share
    )
    anchor: int | None = None
    anchored_starts, stateless_starts = [], []
    for end in _line_ends(SOURCE, 200, 320):
        stateless = builder.build(PromptInput("m.py", SOURCE, end, snippets=FULL_CONTEXT))
        built = anchored.build(PromptInput("m.py", SOURCE, end, snippets=FULL_CONTEXT, anchor_line=anchor))
        assert built.counts["total"] <= 600 and built.counts["prefix"] <= cap
        assert SOURCE[:end].endswith(built.prefix_text)
        assert SOURCE.count("\n", 0, end - len(built.prefix_text)) == built.prefix_line
        if anchor is not None and built.prefix_line != anchor:  # moved: only because the old start overflowed
            whole = SOURCE[:end]
            from_anchor = whole[sum(len(x) + 1 for x in whole.split("\n")[:anchor]) :]
            assert len(anchored.encode(from_anchor)) > cap
            assert built.counts["prefix"] <= cap - int(cap * anchored.budget.headroom_share)
        anchor = built.prefix_line
        anchored_starts.append(built.prefix_line)
        stateless_starts.append(stateless.prefix_line)
    moves = sum(a != b for a, b in zip(anchored_starts, anchored_starts[1:], strict=False))
    stateless_moves = sum(a != b for a, b in zip(stateless_starts, stateless_starts[1:], strict=False))
    assert 0 < moves < stateless_moves


def test_a_settled_prompt_moves_a_nearly_full_prefix_that_a_keystroke_keeps(anchored: PromptBuilder) -> None:
    cap = int(
        (600 - anchored.build(PromptInput("m.py", SOURCE, 0, snippets=FULL_CONTEXT)).counts["header"])
        * anchored.budget.prefix_share
    )
    anchor: int | None = None
    for end in _line_ends(SOURCE, 200, 320):  # find a line where the anchored prefix is nearly full
        built = anchored.build(PromptInput("m.py", SOURCE, end, snippets=FULL_CONTEXT, anchor_line=anchor))
        anchor = built.prefix_line
        if built.counts["prefix"] > cap - int(cap * anchored.budget.settled_free_share):
            break
    else:
        pytest.fail("no nearly full prefix in 120 lines")
    keystroke = anchored.build(PromptInput("m.py", SOURCE, end, snippets=FULL_CONTEXT, anchor_line=anchor))
    settled = anchored.build(PromptInput("m.py", SOURCE, end, snippets=FULL_CONTEXT, anchor_line=anchor, settled=True))
    assert keystroke.prefix_line == anchor and keystroke.token_ids == built.token_ids
    assert settled.prefix_line > anchor
    assert settled.counts["prefix"] <= cap - int(cap * anchored.budget.headroom_share)
    # the next keystroke keeps the settled start: what the pause prefilled is the head of its prompt
    nxt = anchored.build(PromptInput("m.py", SOURCE, end + 1, snippets=FULL_CONTEXT, anchor_line=settled.prefix_line))
    assert nxt.prefix_line == settled.prefix_line
    assert _shared(settled.token_ids, nxt.token_ids) >= len(settled.token_ids) - settled.counts["suffix"] - 3


def test_an_anchor_below_the_cursor_or_past_the_text_gives_a_fresh_start(anchored: PromptBuilder) -> None:
    end = _line_ends(SOURCE, 300, 301)[0]
    fresh = anchored.build(PromptInput("m.py", SOURCE, end, anchor_line=10_000))
    moved_up = anchored.build(PromptInput("m.py", SOURCE, end, anchor_line=298))
    assert fresh.prefix_line == moved_up.prefix_line < 298
    assert fresh.counts["prefix"] >= anchored.build(PromptInput("m.py", SOURCE, end)).counts["prefix"] * 0.6


def test_context_room_comes_only_from_an_uncut_prefix(tokenizer: Any) -> None:
    """The cut prefix's slack (which changes as the user types) lends the context nothing; an uncut one does."""
    body = "".join(f"value_{i} = compute({i})\n" for i in range(200))
    snippets = [snippet("lib.py", body, 9.0)]
    builder = PromptBuilder(tokenizer, PromptBudget(total=600, context_quantum=16, snap_lines=16))
    short = "x = 1\n"
    small = builder.build(PromptInput("cur.py", short, len(short), snippets=snippets))
    available = 600 - small.counts["header"]
    prefix_cap = int(available * builder.budget.prefix_share)
    suffix_cap = int(available * builder.budget.suffix_share)
    for lines in range(100, 140):  # a text whose snapped prefix leaves slack
        text = "".join(f"result_{i} = transform(value_{i}, factor={i})\n" for i in range(lines))
        cut = builder.build(PromptInput("cur.py", text, len(text), snippets=snippets))
        if prefix_cap - cut.counts["prefix"] >= 32:
            break
    else:
        pytest.fail("no text left slack")
    assert cut.prefix_line > 0 and small.counts["context"] > cut.counts["context"]
    lent = suffix_cap // 16 * 16  # ... but only the whole (empty) suffix lends its room
    assert cut.counts["context"] <= available - prefix_cap - suffix_cap + lent


def test_a_builder_not_anchored_ignores_anchors(builder: PromptBuilder) -> None:
    end = _line_ends(SOURCE, 300, 301)[0]
    stateless = builder.build(PromptInput("m.py", SOURCE, end))
    for line in (0, stateless.prefix_line - 3, 10_000):
        assert builder.build(PromptInput("m.py", SOURCE, end, anchor_line=line, settled=True)) == stateless


def test_a_document_s_first_anchored_prompt_leaves_the_next_keys_room(anchored: PromptBuilder) -> None:
    """A document's first prompt (no anchor yet) in an anchored builder leaves ``settled_free_share`` of the
    prefix's cap free, so the key after it keeps the start whatever the cursor: a first prompt that filled the
    cap would move at the next key and re-prefill the prefix there (a stateless builder still fills it)."""
    header = anchored.build(PromptInput("m.py", SOURCE, 0, snippets=FULL_CONTEXT)).counts["header"]
    cap = int((600 - header) * anchored.budget.prefix_share)
    room = int(cap * anchored.budget.settled_free_share)
    for end in range(SOURCE.index("def f150"), SOURCE.index("def f160")):  # every cursor over ten functions
        first = anchored.build(PromptInput("m.py", SOURCE, end, snippets=FULL_CONTEXT, settled=True))
        assert cap - room - 16 < first.counts["prefix"] <= cap - room  # from the earliest line that fits: unsnapped
        typed = SOURCE[:end] + "z" + SOURCE[end:]
        key = anchored.build(PromptInput("m.py", typed, end + 1, snippets=FULL_CONTEXT, anchor_line=first.prefix_line))
        assert key.prefix_line == first.prefix_line, end


def test_a_file_that_fits_the_budget_is_whole_in_its_first_prompt(anchored: PromptBuilder) -> None:
    """With no context sections, a document whose code fits the budget (its fixed tokens, the first prompt's free
    share and a step of rounding aside) is whole in the prompt: the room its suffix leaves goes to the prefix, not
    lost to the context's quanta, and the prefix starts at the top, not at a snapped line below it."""
    tokenizer = anchored.tokenizer
    method = "    // Returns whether the value {i} at position {i} is in the list of longs given.\n"
    longest = 0
    for lines in range(10, 40):
        text = "import java.util.*;\nclass Problem {\n" + "".join(method.format(i=i) for i in range(lines))
        text += "    public static long f(long n) {\n        return n;\n    }\n}\n"
        offset = text.index("        return n;")
        length = len(tokenizer.encode(text))
        if length > 0.85 * 600:
            break
        built = anchored.build(PromptInput("Problem.java", text, offset))
        assert built.prefix_line == 0 and built.suffix_text == text[offset:], lines
        longest = length
    assert longest > 0.8 * 600  # texts longer than the prefix's and the context's quantised shares together


def test_with_no_section_the_header_lines_take_no_room(anchored: PromptBuilder) -> None:
    """The repository's name and the file's path are written only around other files' sections: a request with
    none to choose from gives their room to the code, so a long name cuts no line of the prefix."""
    text = "".join(f"def function_number_{i}(value):\n    return value * {i} + {i * 7}\n\n\n" for i in range(80))
    offset = text.index("def function_number_60")
    short = anchored.build(PromptInput("m.py", text, offset))
    named = anchored.build(PromptInput("src/a_package/a_module_with_a_long_name.py", text, offset, "a-repository"))
    assert named.prefix_line == short.prefix_line > 0 and named.token_ids == short.token_ids
    with_section = anchored.build(
        PromptInput("src/a_package/a_module_with_a_long_name.py", text, offset, "a-repository", FULL_CONTEXT)
    )
    assert with_section.prefix_line > short.prefix_line  # there the header lines are written (and the context)


def test_psm_line_writes_what_is_typed_of_the_cursor_s_line_after_the_middle_token_so_typing_keeps_the_suffix(
    tokenizer: Any,
) -> None:
    """ "psm-line": the prompt sees the whole suffix (up to its share), its prefix ends at the cursor's line start
    as the report's protocol asks, and it still re-prefills only what is typed: the cursor's line opens the
    middle, written after ``<|fim_middle|>``, so a key on it changes nothing before it; a line break moves
    that start."""
    order, budget = layout_budget("psm-line", 600)
    assert order == "psm-line" and budget.middle_lines == 1
    builder = PromptBuilder(tokenizer, budget, order, heal=True)
    middle_id = tokenizer.convert_tokens_to_ids("<|fim_middle|>")
    offset = SOURCE.index("return x + 10")  # line 31, its indentation typed
    built = builder.build(PromptInput("m.py", SOURCE, offset))
    head = built.token_ids[: built.token_ids.index(middle_id) + 1]
    assert tokenizer.decode(built.token_ids[len(head) :]) + built.healed_text == "    "
    assert tokenizer.decode(built.suffix_ids) == built.suffix_text and SOURCE[offset:].startswith(built.suffix_text)
    suffix_start = built.token_ids.index(tokenizer.convert_tokens_to_ids("<|fim_suffix|>"))
    assert tokenizer.decode(built.token_ids[:suffix_start]).endswith("def f10(x):\n")  # the prefix: to the line start

    def head_after(typed: str) -> list[int]:
        text = SOURCE[:offset] + typed + SOURCE[offset:]
        ids = builder.build(PromptInput("m.py", text, offset + len(typed))).token_ids
        return ids[: ids.index(middle_id) + 1]

    assert head_after("ret") == head  # keys on the line: the prompt up to the middle is kept
    assert head_after("return x\n    ") != head  # a line break: the middle starts on the new line
    text = SOURCE[:offset] + "return x\n    y = 1"
    built = builder.build(PromptInput("m.py", text + SOURCE[offset:], len(text)))
    assert tokenizer.decode(built.token_ids[built.token_ids.index(middle_id) + 1 :]) + built.healed_text == "    y = 1"


def test_psm_lines_writes_the_cursor_s_last_lines_after_the_middle_token_so_typing_keeps_the_suffix(
    tokenizer: Any,
) -> None:
    """ "psm-lines": the last lines before the cursor (from a line whose number is a multiple of
    ``PromptBudget.middle_lines``, 4) open the middle, written after ``<|fim_middle|>``, so a key there changes
    nothing before them; a line break moves that start once every 4 lines."""
    order, budget = layout_budget("psm-lines", 600)
    assert order == "psm-line" and budget.middle_lines == 4
    builder = PromptBuilder(tokenizer, budget, order, heal=True)
    middle_id = tokenizer.convert_tokens_to_ids("<|fim_middle|>")
    offset = SOURCE.index("return x + 10")  # line 31: its middle starts on line 28
    built = builder.build(PromptInput("m.py", SOURCE, offset))
    head = built.token_ids[: built.token_ids.index(middle_id) + 1]
    written = tokenizer.decode(built.token_ids[len(head) :]) + built.healed_text
    assert written == "".join(SOURCE.splitlines(keepends=True)[28:31]) + "    "
    offset = SOURCE.index("return x + 9 ")  # line 28: the middle is the line's own indentation
    built = builder.build(PromptInput("m.py", SOURCE, offset))
    head = built.token_ids[: built.token_ids.index(middle_id) + 1]
    assert tokenizer.decode(built.token_ids[len(head) :]) + built.healed_text == "    "
    assert tokenizer.decode(built.suffix_ids) == built.suffix_text and SOURCE[offset:].startswith(built.suffix_text)

    def head_after(typed: str) -> list[int]:
        text = SOURCE[:offset] + typed + SOURCE[offset:]
        ids = builder.build(PromptInput("m.py", text, offset + len(typed))).token_ids
        return ids[: ids.index(middle_id) + 1]

    assert head_after("ret") == head  # keys on the line: the prompt up to the middle is kept
    assert head_after("x\n    y = 1\n    ") == head  # a line break within the same lines: kept too
    assert head_after("x\n    y = 1\n    z = 2\n    w = 3\n    ") != head  # line 32: the middle starts there


class _Recording(PromptBuilder):
    """A builder that records each text it tokenizes without its cache."""

    encoded: list[str]

    def encode(self, text: str) -> list[int]:
        self.encoded.append(text)
        return super().encode(text)


def test_a_key_on_an_anchored_psm_line_prompt_tokenizes_only_the_cursor_s_line_again(tokenizer: Any) -> None:
    """The code from the anchor to the cursor's line is tokenized once (cached) and kept while the user types
    within the line; the prompt's ids are those of a builder that tokenizes it all at every key."""
    order, budget = layout_budget("psm-line", 600)
    builder = _Recording(tokenizer, budget, order, heal=True, anchored=True)
    builder.encoded = []
    offset = SOURCE.index("return x + 150")
    first = builder.build(PromptInput("m.py", SOURCE, offset, settled=True))
    assert first.prefix_line > 0  # cut: the prefix starts on its anchor
    for typed in ("r", "re", "ret"):
        text = SOURCE[:offset] + typed + SOURCE[offset:]
        request = PromptInput("m.py", text, offset + len(typed), anchor_line=first.prefix_line)
        builder.encoded.clear()
        built = builder.build(request)
        above = "def f150(x):\n    "  # the line above and the cursor's: no text tokenized at the key spans them
        assert not any(above in part for part in builder.encoded), typed
        assert built.prefix_line == first.prefix_line
        fresh = PromptBuilder(tokenizer, budget, order, heal=True, anchored=True).build(request)
        assert built.token_ids == fresh.token_ids
