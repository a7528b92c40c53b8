"""A typing session replayed through the real daemon: keystroke-to-completion latency as an editor sees it.

``lookahead-lsp serve`` runs as a subprocess over stdio JSON-RPC, with a copy of the corpus as its workspace
(the hole's file as the user has it before typing). The client initializes, waits until the model is ready,
opens the file and asks for an inline completion at the hole; then, for each character of the hole's code,
it sends ``didChange`` (the whole text) and ``textDocument/inlineCompletion`` and waits for the answer
(one keystroke at a time: a user pausing after each key). A keystroke's latency runs from the ``didChange``
to the answer. An answer with the same request id as the one before is "typed through": the daemon answered
from the completion already shown, without the model.

:func:`compare_sessions` replays the latency a typist feels, in three cases, once per daemon configuration
(background prefill and the cache-aware layout on, then off) so that both are measured in one go: for each
hole in one large file it opens the file, asks for a completion at the cursor as an editor does when the
cursor is placed (Neovim on InsertEnter; not timed), pauses, then types the hole's code key by key (a
newline and the indentation after it are one key, as an editor's auto-indent makes them). Cases: ``open``,
the first keystroke after the pause; ``newline``, the keystroke that starts a new line; ``typing``, the
other keystrokes.

:func:`compare_pauses` measures what a typist sees after a pause (progressive ghost text): for each hole, the
last key before the cursor is typed and the client then only watches, as the editors do: it asks again on
each ``lookahead/completionReady``. Per pause: the time to the first ghost text, until the whole first line
is shown, until the whole block is shown (both: as the deadline-free completion has them), and whether the
text shown 1 s and 3 s after the key equals the removed code; per daemon configuration in
:data:`DEADLINE_MODES` (progressive on and off, deadlines on and off, the word-end cut of before; or the prompt
layouts of :data:`LAYOUT_MODES`), one daemon each, the modes taking turns at each hole.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from lookahead_lsp.evaluation.lsp_client import LspClient
from lookahead_lsp.evaluation.report import markdown_table
from lookahead_lsp.evaluation.workloads import Corpus, Hole, make_holes, statement_spans

READY_TIMEOUT_S = 900.0
ANSWER_TIMEOUT_S = 300.0


def lsp_position(text: str) -> dict[str, int]:
    """The LSP position (UTF-16 code units) at the end of ``text``."""
    line = text.count("\n")
    last = text[text.rfind("\n") + 1 :]
    return {"line": line, "character": len(last.encode("utf-16-le")) // 2}


@dataclass(frozen=True)
class Keystroke:
    typed: int  # characters of the hole typed so far (0: the first request, before typing)
    latency_ms: float
    request_id: str | None  # None: an empty answer
    typed_through: bool
    text: str  # the completion shown


@dataclass
class ReplayResult:
    hole: Hole
    keystrokes: list[Keystroke] = field(default_factory=list)
    ready_s: float = 0.0  # from start to a ready model

    def summary(self) -> dict[str, Any]:
        latencies = [k.latency_ms for k in self.keystrokes]
        later = latencies[1:]
        return {
            "hole": self.hole.id,
            "keystrokes": len(latencies),
            "ready_s": round(self.ready_s, 1),
            "median_ms": round(statistics.median(latencies), 1) if latencies else None,
            "p90_ms": round(_percentile(latencies, 0.9), 1) if latencies else None,
            "first_ms": round(latencies[0], 1) if latencies else None,
            "later_median_ms": round(statistics.median(later), 1) if later else None,
            "typed_through": sum(k.typed_through for k in self.keystrokes),
            "empty": sum(k.request_id is None for k in self.keystrokes),
        }


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _wait_ready(client: LspClient) -> None:
    """Until the model is loaded and the workspace index built (indexing competes for the CPU)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        report = client.command("lookahead.stats", timeout=ANSWER_TIMEOUT_S)
        model = (report or {}).get("model", {})
        state = model.get("state")
        index = model.get("index", {})
        if state == "ready" and (index.get("ready") or not index.get("enabled")):
            return
        if state == "failed":
            raise RuntimeError(f"the daemon's model failed to load: {report['model']}")
        time.sleep(1.0)
    raise TimeoutError("the daemon's model was not ready in time")


def _start_daemon(root: Path, options: dict[str, Any], command: Sequence[str] | None = None) -> LspClient:
    """``lookahead-lsp serve`` (or ``command``: another build's) on the workspace ``root``, initialized with
    ``options``, its model ready."""
    return ready_daemon(LspClient(command, cwd=Path.cwd()), root, options)


ClientT = TypeVar("ClientT", bound=LspClient)


def ready_daemon(client: ClientT, root: Path, options: dict[str, Any]) -> ClientT:
    """``client``'s daemon initialized on the workspace ``root`` with ``options``, its model ready (closed if
    that fails)."""
    try:
        client.initialize(root, options, progress=False)
        _wait_ready(client)
    except BaseException:
        client.close()
        raise
    return client


def _workspace_copy(corpus: Corpus, tmp: str) -> Path:
    root = Path(tmp) / corpus.root.name
    shutil.copytree(corpus.root, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _inline(client: LspClient, uri: str, before_cursor: str) -> tuple[str | None, str]:
    """Ask for an inline completion at the end of ``before_cursor``: (request id or None, text shown)."""
    position = lsp_position(before_cursor)
    answer = client.inline(uri, position["line"], position["character"], timeout=ANSWER_TIMEOUT_S)
    items = (answer or {}).get("items", []) if isinstance(answer, dict) else answer or []
    return (items[0]["command"]["arguments"][0], items[0]["insertText"]) if items else (None, "")


def replay(hole: Hole, corpus: Corpus, model: str, max_new_tokens: int, keystrokes: int = 20) -> ReplayResult:
    """Type the first ``keystrokes`` characters of ``hole.middle`` into the daemon, one at a time."""
    result = ReplayResult(hole)
    with tempfile.TemporaryDirectory(prefix="lookahead-replay-") as tmp:
        root = _workspace_copy(corpus, tmp)
        (root / hole.path).write_text(hole.text_before_typing, encoding="utf-8")
        uri = (root / hole.path).as_uri()
        started = time.perf_counter()
        client = _start_daemon(root, {"model": model, "maxNewTokens": max_new_tokens})
        try:
            result.ready_s = time.perf_counter() - started
            client.notify(
                "textDocument/didOpen",
                {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": hole.text_before_typing}},
            )
            previous: str | None = None
            for typed in range(min(keystrokes, len(hole.middle)) + 1):
                t0 = time.perf_counter()
                before_cursor = hole.prefix + hole.middle[:typed]
                if typed:
                    text = before_cursor + hole.suffix
                    client.notify(
                        "textDocument/didChange",
                        {"textDocument": {"uri": uri, "version": typed + 1}, "contentChanges": [{"text": text}]},
                    )
                request_id, text_shown = _inline(client, uri, before_cursor)
                latency = (time.perf_counter() - t0) * 1000.0
                through = request_id is not None and request_id == previous
                result.keystrokes.append(Keystroke(typed, latency, request_id, through, text_shown))
                previous = request_id
        finally:
            client.close()
    return result


_REPLAY_COLUMNS = {
    "hole": "hole",
    "keystrokes": "keystrokes",
    "median_ms": "median ms",
    "p90_ms": "p90 ms",
    "first_ms": "first ms",
    "later_median_ms": "later median ms",
    "typed_through": "typed through",
    "empty": "empty answers",
}


def replay_markdown(results: list[ReplayResult]) -> str:
    rows = [[r.summary()[key] for key in _REPLAY_COLUMNS] for r in results]
    table = markdown_table(list(_REPLAY_COLUMNS.values()), rows)
    return "\n".join(["## Typing replay through the daemon", "", table, ""])


# ---- the three cases a typist feels, with the latency features on and off -------------------------------

CASES = ("open", "typing", "newline")
MODES: dict[str, dict[str, Any]] = {
    "on": {},  # the defaults: background prefill, the device's layout and budget
    "off": {"backgroundPrefill": False, "promptLayout": "psm"},
    # also without the bf16 prefill and the deadlines: the daemon before those (cancels still stop a pass
    # between layers)
    "plain": {
        "backgroundPrefill": False,
        "promptLayout": "psm",
        "prefillDtype": "same",
        "multilineDeadlineMs": None,
        "lineDeadlineMs": None,
    },
}


def keys_of(middle: str) -> list[str]:
    """The keys that type ``middle``: one character each, but a newline and its indentation are one key."""
    keys: list[str] = []
    i = 0
    while i < len(middle):
        if middle[i] == "\n":
            j = i + 1
            while j < len(middle) and middle[j] in " \t":
                j += 1
            keys.append(middle[i:j])
            i = j
        else:
            keys.append(middle[i])
            i += 1
    return keys


def session_keys(hole: Hole, max_keys: int, after_newline: int = 2) -> list[str]:
    """The keys typed at a hole: through its first newline and ``after_newline`` more, or ``max_keys``."""
    keys = keys_of(hole.middle)
    first_newline = next((i for i, key in enumerate(keys) if key.startswith("\n")), None)
    end = max_keys if first_newline is None else max(max_keys, first_newline + 1 + after_newline)
    return keys[:end]


def case_of(index: int, key: str) -> str:
    return "open" if index == 0 else "newline" if key.startswith("\n") else "typing"


def session_holes(corpus: Corpus, path: str, count: int, seed: int = 0, first_line_max: int = 30) -> list[Hole]:
    """Multi-line statements of one file whose first line is short (so a replay reaches the newline)."""
    spans = [
        span
        for span in statement_spans(corpus)
        if span.path == path and span.kind == "multi-line" and span.end - span.start < 400
    ]
    holes = [span.cut(corpus, "session") for span in spans]
    holes = [h for h in holes if 0 < len(h.middle.split("\n", 1)[0]) <= first_line_max]
    random.Random(seed).shuffle(holes)
    return sorted(holes[:count], key=lambda h: len(h.prefix))


@dataclass(frozen=True)
class CaseKey:
    mode: str
    case: str
    latency_ms: float
    typed_through: bool
    model: dict[str, Any] | None = None  # the model run's completionStats (None: typed through or empty)


def typing_session(
    corpus: Corpus,
    holes: list[Hole],
    options: dict[str, Any],
    mode: str,
    pause_s: float = 2.0,
    max_keys: int = 16,
) -> list[CaseKey]:
    """One daemon; for each hole: open its file, a completion at the cursor, ``pause_s``, then type its keys
    (:func:`session_keys`: at least ``max_keys``, and through the first new line)."""
    latencies: list[CaseKey] = []
    with tempfile.TemporaryDirectory(prefix="lookahead-session-") as tmp:
        root = _workspace_copy(corpus, tmp)
        client = _start_daemon(root, options)
        try:
            for n, hole in enumerate(holes):
                uri = (root / hole.path).as_uri()
                text = hole.text_before_typing
                client.notify(
                    "textDocument/didOpen",
                    {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}},
                )
                opened = time.perf_counter()
                cursor = lsp_position(hole.prefix)  # the editor asks when the cursor is placed (not timed)
                _, placed = client.request_async(
                    "textDocument/inlineCompletion", client.inline_params(uri, cursor["line"], cursor["character"])
                )
                time.sleep(max(0.0, opened + pause_s - time.perf_counter()))
                typed, previous = "", None
                for i, key in enumerate(session_keys(hole, max_keys)):
                    typed += key
                    t0 = time.perf_counter()
                    client.notify(
                        "textDocument/didChange",
                        {
                            "textDocument": {"uri": uri, "version": i + 2},
                            "contentChanges": [{"text": hole.prefix + typed + hole.suffix}],
                        },
                    )
                    request_id, _ = _inline(client, uri, hole.prefix + typed)
                    latency = (time.perf_counter() - t0) * 1000.0
                    through = request_id is not None and request_id == previous
                    model = None if through or request_id is None else client.completion_stats(request_id)
                    latencies.append(CaseKey(mode, case_of(i, key), latency, through, model))
                    previous = request_id
                    if i == 0:
                        placed.result(ANSWER_TIMEOUT_S)
                client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
                print(f"[{mode}] hole {n + 1}/{len(holes)} {hole.id}", file=sys.stderr, flush=True)
        finally:
            client.close()
    return latencies


def compare_sessions(
    corpus: Corpus, holes: list[Hole], model: str, max_new_tokens: int, pause_s: float = 2.0, max_keys: int = 16
) -> list[CaseKey]:
    """:func:`typing_session` once per mode in :data:`MODES` (on, then off)."""
    keys: list[CaseKey] = []
    for mode, options in MODES.items():
        keys += typing_session(
            corpus, holes, {"model": model, "maxNewTokens": max_new_tokens, **options}, mode, pause_s, max_keys
        )
    return keys


def sessions_markdown(keys: list[CaseKey]) -> str:
    """p50 and p90 per case and mode, and the ratio off/on."""
    rows = []
    for case in CASES:
        cells: list[Any] = [case]
        p50s = {}
        for mode in MODES:
            values = [k.latency_ms for k in keys if k.mode == mode and k.case == case]
            through = sum(k.typed_through for k in keys if k.mode == mode and k.case == case)
            p50s[mode] = statistics.median(values) if values else 0.0
            cells += [len(values), through, round(p50s[mode]), round(_percentile(values, 0.9)) if values else None]
        cells.append(f"{p50s['off'] / p50s['on']:.1f}x" if p50s.get("on") else "")
        rows.append(cells)
    headers = ["case"]
    for mode in MODES:
        headers += [f"{mode}: keys", f"{mode}: typed through", f"{mode}: p50 ms", f"{mode}: p90 ms"]
    headers.append("p50 off / on")
    return markdown_table(headers, rows)


# ---- what a typist sees after a pause: progressive ghost text -----------------------------------------

READY = "lookahead/completionReady"
STATS = "lookahead/completionStats"
WATCH_S = 10.0  # a pause is watched this long at most
STATS_GRACE_S = 0.5  # after a run's stats, the wait for its final completionReady (sent after them before 2026-12-02)
SHOWN_AT_S = (1.0, 3.0)
DEADLINE_MODES: dict[str, dict[str, Any]] = {
    "progressive": {},  # the defaults: deadlines at line ends, decoding goes on, the client asks again
    "deadlines": {"progressive": False},  # the deadlines end what is shown: no more without a key
    "no deadlines": {"progressive": False, "lineDeadlineMs": None, "multilineDeadlineMs": None, "lineCapMs": None},
    # before: a first line cut where its word ended 600 ms after the key
    "word cut": {"progressive": False, "lineDeadlineMs": None, "lineCapMs": 600},
}
"""How what is shown ends: the modes a run compares unless it names others."""
LAYOUT_MODES: dict[str, dict[str, Any]] = {
    # against the CPU's defaults (psm-line; psm-lines for the 0.5B; 512 tokens; psm-short before 2026-12-02)
    "psm": {"promptLayout": "psm"},
    "psm 1024": {"promptLayout": "psm", "tokenBudget": 1024},
    "psm-short": {"promptLayout": "psm-short"},
    "psm-line": {"promptLayout": "psm-line"},
    "1024": {"tokenBudget": 1024},  # the device's layout, twice the CPU's budget
    "64 tokens": {"maxNewTokens": 64},  # the daemon's maxNewTokens before 2026-12-03
    "psm-lines": {"promptLayout": "psm-lines"},
    "no definitions": {"definitions": False},  # the context before the definitions of imported names (#76)
}
"""The prompt's layout, budget and context, each progressive (the default delivery): named with ``--modes``."""
PAUSE_MODES: dict[str, dict[str, Any]] = {**DEADLINE_MODES, **LAYOUT_MODES}
BASELINE_MODE = "baseline"  # another build's daemon with its own defaults (``bench pauses --baseline-command``)
REFERENCE_MODE = "no deadlines"  # the deadline-free completion: what "whole line" and "whole block" mean ...
# ... except where a mode's own runs end by themselves (the progressive ones)
RUN_TO_THE_END = ("progressive", "no deadlines", BASELINE_MODE, *LAYOUT_MODES)
# (the same prompt on two daemons can decode differently: their KV caches were filled by different passes)


@dataclass
class Pause:
    mode: str
    hole: Hole
    shown: list[tuple[float, str]] = field(default_factory=list)  # (seconds after the key, text shown)
    prefilled: int | None = None  # prompt tokens the key's model run prefilled (None: no run's stats seen)
    prompt_tokens: int | None = None  # the key's prompt, in tokens (a longer one costs each decoding step more)
    context_files: tuple[str, ...] | None = None  # other files whose sections the key's prompt held (None: unseen)
    run: dict[str, Any] | None = None  # the key's model run: its stages' ms (latencyMs), steps and new tokens

    def at(self, seconds: float) -> str:
        """The text shown ``seconds`` after the key."""
        text = ""
        for t, shown in self.shown:
            if t <= seconds:
                text = shown
        return text

    def first_s(self) -> float | None:
        return next((t for t, text in self.shown if text.strip()), None)

    def when(self, reached: Any) -> float | None:
        """The first time ``reached(text)`` holds for the text shown."""
        return next((t for t, text in self.shown if reached(text)), None)

    @property
    def final(self) -> str:
        return self.shown[-1][1] if self.shown else ""


def pause_holes(corpus: Corpus, count: int, seed: int = 0) -> list[Hole]:
    """Half lines from a random column (``midline``), half multi-line statements (blocks)."""
    lines = make_holes(corpus, "midline", count // 2, seed)
    blocks = [h for h in make_holes(corpus, "fim", 2 * count, seed) if h.kind == "multi-line"]
    return lines + blocks[: count - len(lines)]


def watch_pause(client: LspClient, hole: Hole, uri: str, version: int, mode: str) -> Pause:
    """Type the last key before ``hole``'s cursor, then watch as an editor does: ask again on each
    ``lookahead/completionReady`` for this document, until the run's end (its stats, then its final
    completionReady or :data:`STATS_GRACE_S`) or :data:`WATCH_S`.
    A run still going then is waited for (nothing more recorded): on a small CPU a daemon still decoding
    would slow the next pause, another mode's daemon's included."""
    pause = Pause(mode, hole)
    text = hole.prefix + hole.suffix
    seen = len(client.notifications)
    t0 = time.perf_counter()
    client.notify(
        "textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]}
    )
    request_id, shown = _inline(client, uri, hole.prefix)
    pause.shown.append((time.perf_counter() - t0, shown))
    ended_at: float | None = None
    final = False  # the run's final completionReady was seen
    while request_id is not None and time.perf_counter() - t0 < ANSWER_TIMEOUT_S:
        messages = client.notifications[seen:]
        seen += len(messages)
        stats = [m["params"] for m in messages if m["method"] == STATS and m["params"].get("requestId") == request_id]
        if stats:
            ended_at = time.perf_counter()
            pause.prefilled = stats[0].get("prefilledTokens")
            pause.prompt_tokens = stats[0].get("promptTokens")
            pause.context_files = tuple(stats[0].get("contextFiles") or ())
            pause.run = run_figures(stats[0])
        ready = [m["params"] for m in messages if m["method"] == READY and m["params"].get("uri") == uri]
        final = final or any(p.get("requestId") == request_id and p.get("final") for p in ready)
        if ready and time.perf_counter() - t0 < WATCH_S:
            _, shown = _inline(client, uri, hole.prefix)
            pause.shown.append((time.perf_counter() - t0, shown))
        if ended_at is not None and (final or time.perf_counter() - ended_at > STATS_GRACE_S):
            break
        if not ready:
            time.sleep(0.01)
    return pause


def run_figures(stats: dict[str, Any]) -> dict[str, Any]:
    """Where a model run's time went, from its ``lookahead/completionStats``: each stage's milliseconds, the
    decoding steps (passes) and the tokens they wrote."""
    return {**stats.get("latencyMs", {}), "steps": stats.get("steps"), "newTokens": stats.get("newTokens")}


def _last_warm(client: LspClient) -> dict[str, Any]:
    """The daemon's last background prefill (its request id, document, version, whether cancelled)."""
    return dict(client.command("lookahead.stats", timeout=ANSWER_TIMEOUT_S).get("lastWarm") or {})


def pause_at(client: LspClient, root: Path, hole: Hole, mode: str) -> Pause:
    """Open ``hole``'s file and let the daemon prefill its prompt in idle time (:func:`open_settled`), then
    :func:`watch_pause` types the last key. No completion is asked for before it: every pause is a model run
    (none is typed through an earlier answer)."""
    uri = (root / hole.path).as_uri()
    open_settled(client, uri, hole, "python")
    pause = watch_pause(client, hole, uri, 3, mode)
    client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    return pause


def open_settled(client: LspClient, uri: str, hole: Hole, language: str) -> None:
    """Open ``hole``'s file two keys before the cursor and type one (the daemon learns the cursor and prefills
    its prompt in idle time, as while a typist types, or a user reads before typing), and wait for that
    background prefill (of this version: a prefill left from the last hole, in the same file at the same
    version number, does not count). The document is then at version 2, one key before ``hole``'s cursor."""
    opened = {"uri": uri, "languageId": language, "version": 1, "text": hole.prefix[:-2] + hole.suffix}
    earlier = _last_warm(client).get("requestId")
    client.notify("textDocument/didOpen", {"textDocument": opened})
    one_key = {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": hole.prefix[:-1] + hole.suffix}]}
    client.notify("textDocument/didChange", one_key)
    deadline = time.monotonic() + ANSWER_TIMEOUT_S
    while time.monotonic() < deadline:
        last = _last_warm(client)
        this_one = last.get("requestId") != earlier and (last.get("uri"), last.get("version")) == (uri, 2)
        if this_one and not last.get("cancelled"):
            break
        time.sleep(0.2)


Item = TypeVar("Item")
Outcome = TypeVar("Outcome")
Number = TypeVar("Number", int, float)


def each_in_turn(
    corpus: Corpus,
    items: Sequence[Item],
    options: dict[str, dict[str, Any]],
    run: Callable[[LspClient, Path, Item, str], Outcome],
    what: str,
    commands: dict[str, Sequence[str]] | None = None,
) -> list[Outcome]:
    """One daemon per mode with its ``options`` (and its ``commands`` entry, where it has one: another build's
    daemon), each on its own copy of ``corpus``, all started first; then
    ``run(client, root, item, mode)`` for every item in each mode in turn, the order rotating from item to item,
    so that on a shared CPU the modes meet the same load and compare within an item."""
    modes = list(options)
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix=f"lookahead-{what}-") as tmp, contextlib.ExitStack() as stack:
        daemons: dict[str, tuple[LspClient, Path]] = {}
        for i, (mode, settings) in enumerate(options.items()):
            root = _workspace_copy(corpus, str(Path(tmp) / str(i)))
            client = _start_daemon(root, settings, (commands or {}).get(mode))
            stack.callback(client.close)
            daemons[mode] = (client, root)
        for n, item in enumerate(items):
            for mode in modes[n % len(modes) :] + modes[: n % len(modes)]:
                outcomes.append(run(*daemons[mode], item, mode))
            print(f"{what} {n + 1}/{len(items)}", file=sys.stderr, flush=True)
    return outcomes


def compare_pauses(
    corpus: Corpus,
    holes: list[Hole],
    model: str,
    max_new_tokens: int,
    modes: list[str] | None = None,
    baseline: Sequence[str] | None = None,
) -> list[Pause]:
    """Every hole paused at (:func:`pause_at`) in each mode of ``modes`` (of :data:`PAUSE_MODES`; by default
    :data:`DEADLINE_MODES`) in turn, one daemon each (:func:`each_in_turn`); with ``baseline`` (another build's
    daemon command) also that daemon with its own defaults, as mode :data:`BASELINE_MODE`."""
    chosen = modes or list(DEADLINE_MODES)
    common = {"model": model, "maxNewTokens": max_new_tokens}  # every daemon's, the baseline's too
    options = {mode: {**common, **PAUSE_MODES[mode]} for mode in chosen}
    commands: dict[str, Sequence[str]] = {}
    if baseline is not None:
        options[BASELINE_MODE] = dict(common)
        commands[BASELINE_MODE] = baseline
    return each_in_turn(corpus, holes, options, pause_at, "pause", commands)


def _lower_median(ordered: list[Number]) -> Number:
    """The middle of a sorted list, the lower of the two where its length is even."""
    return ordered[(len(ordered) - 1) // 2]


def _p50(values: list[float | None]) -> str:
    """The median, a missing value counting as never (so a median past the end reads "never")."""
    ordered = sorted(float("inf") if v is None else v for v in values)
    if not ordered:
        return ""
    middle = _lower_median(ordered)
    return "never" if middle == float("inf") else f"{middle:.2f}"


def _first_line(text: str) -> str:
    return text.split("\n", 1)[0].rstrip()


def pauses_markdown(pauses: list[Pause]) -> str:
    """Per mode: p50 seconds to the first ghost text, to the whole line and (blocks) the whole block, how many
    got there, and exact matches of the text shown 1 s, 3 s and at the end against the removed code."""
    reference = {(p.hole.id, p.hole.middle): p.final for p in pauses if p.mode == REFERENCE_MODE}
    rows = []
    for mode in dict.fromkeys(p.mode for p in pauses):
        mine = [p for p in pauses if p.mode == mode]
        whole = [
            p.final if mode in RUN_TO_THE_END else reference.get((p.hole.id, p.hole.middle), p.final) for p in mine
        ]
        line = [
            p.when(lambda t, w=w: _first_line(t) == _first_line(w) and w.strip() != "")
            for p, w in zip(mine, whole, strict=True)
        ]
        blocks = [(p, w) for p, w in zip(mine, whole, strict=True) if "\n" in w.strip()]
        block = [p.when(lambda t, w=w: t.rstrip() == w.rstrip()) for p, w in blocks]
        exact = [sum(p.at(s).rstrip() == p.hole.middle.rstrip() for p in mine) for s in SHOWN_AT_S]
        rows.append(
            [
                mode,
                len(mine),
                _p50([p.first_s() for p in mine]),
                _p50(line),
                sum(v is not None for v in line),
                _p50(block),
                f"{sum(v is not None for v in block)}/{len(blocks)}",
                *exact,
                sum(p.final.rstrip() == p.hole.middle.rstrip() for p in mine),
                _tokens([p.prefilled for p in mine]),
                _tokens([p.prompt_tokens for p in mine]),
                _ms([_stage(p, "prompt") for p in mine]),
                _ms([_stage(p, "decode", per_step=True) for p in mine]),
            ]
        )
    headers = ["mode", "pauses", "first ghost p50 s", "whole line p50 s", "lines whole", "whole block p50 s",
               "blocks whole", "exact at 1 s", "exact at 3 s", "exact at the end",
               "key prefill p50 / max tokens", "prompt p50 / max tokens", "prompt built p50 ms",
               "decoding ms per step p50"]  # fmt: skip
    return markdown_table(headers, rows)


def _stage(pause: Pause, name: str, per_step: bool = False) -> float | None:
    """A stage's milliseconds in the key's model run (``per_step``: divided by its decoding steps), if seen."""
    run = pause.run or {}
    ms, steps = run.get(name), run.get("steps") or 0
    if ms is None or (per_step and not steps):
        return None
    return float(ms) / int(steps) if per_step else float(ms)


def _ms(values: list[float | None]) -> str:
    """The median of the values seen, in milliseconds ("" where none was)."""
    seen = sorted(v for v in values if v is not None)
    return f"{_lower_median(seen):.1f}" if seen else ""


def _tokens(counts: list[int | None]) -> str:
    """The median and the largest of the counts seen ("" where none was)."""
    seen = sorted(c for c in counts if c is not None)
    return f"{_lower_median(seen)} / {seen[-1]}" if seen else ""


def pauses_to_json(pauses: list[Pause]) -> list[dict[str, Any]]:
    return [
        {
            "mode": p.mode,
            "hole": p.hole.id,
            "middle": p.hole.middle,
            "shown": p.shown,
            "prefilled": p.prefilled,
            "prompt_tokens": p.prompt_tokens,
            "run": p.run,
        }
        for p in pauses
    ]


def pauses_from_json(rows: list[dict[str, Any]]) -> list[Pause]:
    """The pauses a ``--pauses --json`` run wrote (each hole rebuilt from its id and removed code)."""
    pauses = []
    for row in rows:
        workload_path, line, column = row["hole"].rsplit(":", 2)
        workload, path = workload_path.split(":", 1)
        prefix = "\n" * (int(line) - 1) + " " * int(column)  # the same id; the table needs no more
        hole = Hole(workload, "", path, prefix, row["middle"], "")
        shown = [(float(t), str(text)) for t, text in row["shown"]]
        # older runs: no "prefilled", no "prompt_tokens", no "run"
        pause = Pause(row["mode"], hole, shown, row.get("prefilled"), row.get("prompt_tokens"), run=row.get("run"))
        pauses.append(pause)
    return pauses
