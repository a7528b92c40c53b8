"""Prompt layouts with the real tokenizer: valid FIM prompts within budget, and what a keystroke invalidates."""

from __future__ import annotations

from typing import Any

import pytest

from lookahead_lsp.context.prompt import PROMPT_LAYOUTS, SHORT_SUFFIX_TOKENS, PromptBuilder, PromptInput, layout_budget
from lookahead_lsp.context.snippets import Snippet
from lookahead_lsp.decoder.ids import common_prefix_len

SOURCE = "".join(f"def f{i}(x):\n    return x + {i}  # ü {i}\n\n" for i in range(300))
SNIPPETS = [Snippet("util.py", "def helper():\n    return 1\n", 1.0, 0)]


def _build(tokenizer: Any, layout: str, total: int, text: str, offset: int) -> Any:
    order, budget = layout_budget(layout, total)  # type: ignore[arg-type]
    return PromptBuilder(tokenizer, budget, order).build(PromptInput("m.py", text, offset, "repo", SNIPPETS))


@pytest.mark.parametrize("layout", list(PROMPT_LAYOUTS))
@pytest.mark.parametrize("total", [128, 512, 2048])
def test_layouts_are_valid_fim_prompts_within_budget(tokenizer: Any, layout: str, total: int) -> None:
    offset = SOURCE.index("return x + 150")
    built = _build(tokenizer, layout, total, SOURCE, offset)
    assert built.counts["total"] == len(built.token_ids) <= total
    text, middle_part = tokenizer.decode(built.token_ids).split("<|fim_middle|>")
    assert text.startswith("<|repo_name|>repo\n") == bool(built.sections)
    assert (middle_part == "") == (layout not in ("psm-line", "psm-lines"))
    for token in ("<|fim_prefix|>", "<|fim_suffix|>"):
        assert text.count(token) == 1
    prefix_part = text.split("<|fim_prefix|>")[1].split("<|fim_suffix|>")[0]
    suffix_part = text.split("<|fim_suffix|>")[1].split("<|fim_prefix|>")[0]
    if layout == "spm":
        assert text.index("<|fim_suffix|>") < text.index("<|fim_prefix|>")
        prefix_part = text.split("<|fim_prefix|>")[1]
    else:
        assert text.index("<|fim_prefix|>") < text.index("<|fim_suffix|>")
        suffix_part = text.split("<|fim_suffix|>")[1]
    prefix_part += middle_part  # psm-line(s): the cursor's line (last lines) open the middle
    assert prefix_part == built.prefix_text and SOURCE[:offset].endswith(prefix_part)
    assert suffix_part == built.suffix_text and SOURCE[offset:].startswith(suffix_part)
    if layout == "psm-short":
        assert built.counts["suffix"] <= SHORT_SUFFIX_TOKENS


def test_a_keystroke_invalidates_only_the_prefix_tail_in_spm_and_psm_line(tokenizer: Any) -> None:
    offset = SOURCE.index("return x + 150")
    typed = SOURCE[:offset] + "r" + SOURCE[offset:]
    invalidated = {}
    for layout in PROMPT_LAYOUTS:
        before = _build(tokenizer, layout, 1024, SOURCE, offset).token_ids
        after = _build(tokenizer, layout, 1024, typed, offset + 1).token_ids
        invalidated[layout] = len(after) - common_prefix_len(before, after)
    assert invalidated["spm"] <= 3
    assert invalidated["psm-line"] <= 3 and invalidated["psm-lines"] <= 3  # the middle's tail: the suffix is kept
    assert invalidated["psm-short"] <= SHORT_SUFFIX_TOKENS + 4
    assert invalidated["psm"] > invalidated["psm-short"] > invalidated["spm"]
