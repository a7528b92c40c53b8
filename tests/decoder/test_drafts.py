"""Prompt-lookup tables: a table kept from one generation to the next drafts what a fresh one would."""

from __future__ import annotations

import random

from lookahead_lsp.decoder.drafts import NgramTable, PromptNgrams


def _fresh(tokens: list[int]) -> NgramTable:
    table = NgramTable("prompt", 4)
    table.add_sequence(tokens)
    return table


def test_a_table_aimed_at_each_next_prompt_holds_and_drafts_what_a_fresh_table_would() -> None:
    """Prompts that share a head with the last one (a key on the cursor's line, a line break, a generation's
    tokens written after the prompt, a prompt whose head moved): after :meth:`PromptNgrams.follow` its index
    is a fresh table's, list for list and entry for entry, and every lookup gives the same drafts."""
    rng = random.Random(7)
    kept = PromptNgrams("prompt", 4)
    prompt = [rng.randrange(12) for _ in range(300)]
    for turn in range(40):
        cut = rng.choice([len(prompt) - rng.randrange(1, 12), rng.randrange(len(prompt)), len(prompt)])
        prompt = prompt[:cut] + [rng.randrange(12) for _ in range(rng.randrange(0, 15))]
        kept.follow(prompt)
        written = [rng.randrange(12) for _ in range(rng.randrange(0, 10))]
        kept.write(written)  # what the generation writes after its prompt
        fresh = _fresh(prompt + written)
        assert list(kept.tokens) == prompt + written
        assert kept._where == fresh._where, turn
        for end in range(1, len(prompt), 17):
            context = prompt[:end]
            assert kept.lookup(context, 15, 8) == fresh.lookup(context, 15, 8)
    kept.follow([])
    assert kept._where == {} and list(kept.tokens) == []
