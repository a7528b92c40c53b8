"""The benchmarks complete what the daemon completes: the same prompt (token ids) and, through the shared
completion core, the same completion for the same document state (every workspace file open)."""

from __future__ import annotations

import time
from pathlib import Path

from lookahead_lsp.decoder.greedy import GreedyDecoder
from lookahead_lsp.decoder.types import CancelToken
from lookahead_lsp.evaluation.speed import ContextBuilder
from lookahead_lsp.evaluation.workloads import Corpus, Hole
from lookahead_lsp.lsp_server.completion import Cursor, Limits, decode_completion, plan_completion
from lookahead_lsp.lsp_server.config import Config
from lookahead_lsp.lsp_server.documents import Document
from lookahead_lsp.lsp_server.engine import Engine
from lookahead_lsp.lsp_server.pipeline import Snapshot, complete, prompt_for

PRICES = """\
def unit_price(item, catalogue):
    return catalogue[item.sku].price


def discounted_price(item, catalogue, discount):
    return unit_price(item, catalogue) * (1 - discount)
"""

TAXES = """\
VAT_RATE = 0.2


def with_vat(amount, rate=VAT_RATE):
    return amount * (1 + rate)
"""

SHIPPING = """\
def shipping_fee(count):
    return 4.5 + 0.5 * count
"""

CART_HEAD = """\
from prices import discounted_price, unit_price
from taxes import with_vat


class Cart:
    def __init__(self, catalogue):
        self.catalogue = catalogue
        self.items = []

    def add(self, item):
        self.items.append(item)

    def total(self, discount=0.0):
        amount = sum(discounted_price(i, self.catalogue, discount) for i in self.items)
        amount += shipping_fee(len(self.items))
        return """
CART_MIDDLE = "with_vat(amount)"
CART_TAIL = "\n\n    def count(self):\n        return len(self.items)\n"


def _workspace(root: Path) -> Hole:
    root.mkdir()
    (root / "prices.py").write_text(PRICES)
    (root / "taxes.py").write_text(TAXES)
    (root / "shipping.py").write_text(SHIPPING)
    (root / "cart.py").write_text(CART_HEAD + CART_MIDDLE + CART_TAIL)
    return Hole("fim", "single-line", "cart.py", CART_HEAD, CART_MIDDLE, CART_TAIL)


def _open_all(engine: Engine, root: Path, hole: Hole) -> None:
    """Open every file (the hole's as the user has it) and wait until the snippet index has them."""
    texts = {path.name: path.read_text() for path in root.iterdir()}
    texts[hole.path] = hole.text_before_typing
    applied: set[Path] = set()
    engine.workspace.on_context_change = applied.add
    for name, text in texts.items():
        engine.workspace.document_changed(root / name, text)
    deadline = time.monotonic() + 30
    while len(applied) < len(texts) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(applied) == len(texts)


def test_bench_and_daemon_build_the_same_prompt_and_completion(tiny_model_dir: Path, tmp_path: Path) -> None:
    root = tmp_path / "shop"
    hole = _workspace(root)
    config = Config(
        model=str(tiny_model_dir),
        decoder="greedy",
        token_budget=512,
        prompt_layout="psm",
        index_enabled=False,
        max_new_tokens=12,
        multiline_deadline_ms=None,
        line_deadline_ms=None,
    )
    engine = Engine(config, [root])
    engine.load_now()
    try:
        _open_all(engine, root, hole)
        doc = Document((root / hole.path).as_uri(), hole.text_before_typing, language_id="python")
        snapshot = Snapshot(doc, len(hole.prefix), "r1")
        daemon = prompt_for(snapshot, engine)
        daemon_completion = complete(snapshot, engine, CancelToken())

        bench = ContextBuilder(Corpus.load(root), engine.tokenizer, 512, heal=True, layout="psm")
        built = bench.prompt(hole)
        # snippets from the other files, ranked against the lines before the cursor's block of 8 lines: the
        # block itself (where shipping_fee is called) does not move them while the user types in it
        assert {s.path for s in daemon.sections} == {"prices.py", "taxes.py"}
        assert built.token_ids == daemon.token_ids
        assert built.counts == daemon.counts and built.healed_text == daemon.healed_text

        cursor = Cursor(hole.text_before_typing, len(hole.prefix), hole.path)
        limits = Limits(config.max_new_tokens, engine.stop_ids)
        plan = plan_completion(bench.tokenizer, built, cursor, limits)
        decoded = decode_completion(GreedyDecoder(engine.host.model.model), plan)
        assert decoded.result.token_ids == daemon_completion.token_ids
        assert decoded.text == daemon_completion.text
    finally:
        engine.stop()
