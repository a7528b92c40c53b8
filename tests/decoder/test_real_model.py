"""The embedded real model on real code: lookahead equals greedy token for token, in fewer passes."""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import pytest

from lookahead_lsp.decoder.drafts import SequenceNgrams
from lookahead_lsp.decoder.greedy import GreedyDecoder
from lookahead_lsp.decoder.lookahead import LookaheadConfig, LookaheadDecoder
from lookahead_lsp.decoder.runtime.model import load_model, stop_token_ids
from lookahead_lsp.decoder.types import DecodeRequest, DecodeResult

pytestmark = pytest.mark.real_model


@pytest.fixture(scope="module")
def loaded():
    return load_model("embedded", device="cpu", dtype="float32")


def holes(n: int) -> list[tuple[str, str]]:
    """Fill-in-the-middle holes in a real file none of us wrote (the standard library's argparse)."""
    lines = Path(argparse.__file__).read_text(encoding="utf-8").splitlines(keepends=True)
    rng = random.Random(3)
    out = []
    for _ in range(n):
        i = rng.randrange(100, len(lines) - 100)
        out.append(("".join(lines[i - 30 : i]), "".join(lines[i + 2 : i + 20])))
    return out


def greedy_and_lookahead(
    tok, greedy: GreedyDecoder, lookahead: LookaheadDecoder, hole: tuple[str, str], max_new_tokens: int
) -> tuple[DecodeResult, DecodeResult]:
    """A FIM hole decoded by greedy and by lookahead (with the suffix as a draft source)."""
    prefix, suffix = hole
    suffix_ids = tok(suffix)["input_ids"]
    ids = tok("<|fim_prefix|>" + prefix + "<|fim_suffix|>")["input_ids"] + suffix_ids
    ids += tok("<|fim_middle|>")["input_ids"]
    eos = stop_token_ids(tok)
    want = greedy.generate(DecodeRequest(ids, max_new_tokens, eos_ids=eos))
    drafts = [SequenceNgrams("suffix", suffix_ids)]
    return want, lookahead.generate(DecodeRequest(ids, max_new_tokens, eos_ids=eos, drafts=drafts))


def test_lookahead_equals_greedy_on_real_code(loaded):
    tok = loaded.tokenizer
    greedy, lookahead = GreedyDecoder(loaded.model), LookaheadDecoder(loaded.model, LookaheadConfig())
    total_steps = total_tokens = 0
    for hole in holes(2):
        want, got = greedy_and_lookahead(tok, greedy, lookahead, hole, 32)
        assert got.token_ids == want.token_ids
        assert tok.decode(got.token_ids).strip()
        total_steps += got.stats.steps
        total_tokens += got.stats.new_tokens
    assert total_steps < total_tokens  # drafts were accepted: fewer passes than tokens
