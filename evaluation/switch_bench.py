"""Back in a file after working in another, through the real daemon: the first ghost text with one KV cache per
document (``kvSlots``) against one shared cache.

For each pair of holes in two different files, each daemon in turn (the order rotating from pair to pair, so
that on a shared CPU both meet the same load): open file a at its hole and ask there (as an editor does when the
cursor is placed), wait for the run's end; the same in file b; then back in a, one backspace before the cursor
(a change that no completion already shown can be typed through) and the timed request: from the ``didChange``
to the first answer, with the run's prefilled tokens from its ``lookahead/completionStats``. Both files are then
closed. Each mode is one daemon on its own copy of the corpus, all started first (``kvSlots`` in
:data:`SWITCH_MODES`; everything else at its default).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lookahead_lsp.evaluation.lsp_client import LspClient
from lookahead_lsp.evaluation.lsp_replay import ANSWER_TIMEOUT_S, STATS, _inline, each_in_turn
from lookahead_lsp.evaluation.report import markdown_table
from lookahead_lsp.evaluation.workloads import Corpus, Hole

SWITCH_MODES: dict[str, dict[str, Any]] = {"kvSlots 2": {"kvSlots": 2}, "kvSlots 1": {"kvSlots": 1}}


@dataclass(frozen=True)
class Return:
    """The timed request back in file a."""

    mode: str
    pair: str
    latency_ms: float
    prompt_tokens: int | None  # None: an empty answer (no run)
    prefilled_tokens: int | None


def hole_pairs(holes: list[Hole], count: int) -> list[tuple[Hole, Hole]]:
    """Up to ``count`` pairs of holes in two different files, each hole in one pair at most, in order."""
    pairs: list[tuple[Hole, Hole]] = []
    left = list(holes)
    while left and len(pairs) < count:
        first = left.pop(0)
        other = next((h for h in left if h.path != first.path), None)
        if other is not None:
            left.remove(other)
            pairs.append((first, other))
    return pairs


def _run_to_end(client: LspClient, request_id: str | None) -> dict[str, Any] | None:
    """The completion stats of ``request_id`` once its run has ended (None: no run)."""
    if request_id is None:
        return None
    ended = client.wait_notification(STATS, lambda params: str(params.get("requestId")) == request_id, ANSWER_TIMEOUT_S)
    return dict(ended)


def _open_and_ask(client: LspClient, root: Path, hole: Hole) -> str:
    uri = (root / hole.path).as_uri()
    opened = {"uri": uri, "languageId": "python", "version": 1, "text": hole.prefix + hole.suffix}
    client.notify("textDocument/didOpen", {"textDocument": opened})
    request_id, _ = _inline(client, uri, hole.prefix)
    _run_to_end(client, request_id)
    return uri


def switch_back(client: LspClient, root: Path, pair: tuple[Hole, Hole], mode: str) -> Return:
    """File a, file b, then back in a: the timed request (see the module docstring)."""
    a, b = pair
    a_uri = _open_and_ask(client, root, a)
    b_uri = _open_and_ask(client, root, b)
    prefix = a.prefix[:-1]
    change = {"textDocument": {"uri": a_uri, "version": 2}, "contentChanges": [{"text": prefix + a.suffix}]}
    t0 = time.perf_counter()
    client.notify("textDocument/didChange", change)
    request_id, _ = _inline(client, a_uri, prefix)
    latency = (time.perf_counter() - t0) * 1000.0
    stats = _run_to_end(client, request_id) or {}
    for uri in (a_uri, b_uri):
        client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    return Return(mode, f"{a.id} | {b.id}", latency, stats.get("promptTokens"), stats.get("prefilledTokens"))


def compare_switches(corpus: Corpus, pairs: list[tuple[Hole, Hole]], model: str, max_new_tokens: int) -> list[Return]:
    """Every pair (:func:`switch_back`) in each mode of :data:`SWITCH_MODES` in turn, one daemon each."""
    options = {mode: {"model": model, "maxNewTokens": max_new_tokens, **extra} for mode, extra in SWITCH_MODES.items()}
    return each_in_turn(corpus, pairs, options, switch_back, "pair")


def switches_markdown(returns: list[Return]) -> str:
    """Per mode: the returns, those answered by a run, p50/p90 of the first answer, p50 prompt and prefilled
    tokens; then the p50 ratio of each mode to the first."""
    rows: list[list[Any]] = []
    p50s: dict[str, float] = {}
    for mode in dict.fromkeys(r.mode for r in returns):
        mine = [r for r in returns if r.mode == mode]
        runs = [r for r in mine if r.prefilled_tokens is not None]
        latencies = sorted(r.latency_ms for r in mine)
        p50s[mode] = statistics.median(latencies)
        p90 = latencies[min(len(latencies) - 1, round(0.9 * (len(latencies) - 1)))]
        rows.append(
            [
                mode,
                len(mine),
                len(runs),
                f"{p50s[mode]:.0f}",
                f"{p90:.0f}",
                statistics.median(r.prompt_tokens or 0 for r in runs) if runs else "",
                statistics.median(r.prefilled_tokens or 0 for r in runs) if runs else "",
            ]
        )
    header = ["mode", "returns", "runs", "first answer p50 ms", "p90 ms", "prompt tokens p50", "prefilled p50"]
    lines = [markdown_table(header, rows)]
    first = next(iter(p50s), None)
    for mode, p50 in p50s.items():
        if first is not None and mode != first:
            lines.append(f"- {mode} / {first}, first answer p50: {p50 / p50s[first]:.2f}x")
    return "\n".join(lines)
