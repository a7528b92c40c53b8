"""`lookahead-lsp eval infill`: public infilling suites (HumanEval FIM in Python, JavaScript, Java), the daemon as
the editor shows it beside the raw model on the same GGUF (``evaluation/infill.py``), scored by
``evaluation/infill_suites.py``: exact (the Qwen2.5-Coder report's first-line rule), edit similarity, pass@1,
empty answers, first-answer latency. One Markdown table on stdout (a row per suite and side), the holes only
one side gets exactly right, the CPU; progress on stderr; ``--out DIR`` also writes JSON and Markdown."""

from __future__ import annotations

import argparse
import itertools
import json
import shlex
import statistics
import tempfile
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from lookahead_lsp.evaluation.commands.bench import progress
from lookahead_lsp.evaluation.infill import model_parts, run_daemon, run_engine, run_raw
from lookahead_lsp.evaluation.infill_repo import CORPUS_SUITES, copy_workspace
from lookahead_lsp.evaluation.infill_suites import (
    SUITES,
    Answer,
    HoleScore,
    InfillHole,
    load_suite,
    runtime_missing,
    score_answer,
)
from lookahead_lsp.evaluation.report import machine_description, markdown_table
from lookahead_lsp.evaluation.workloads import Corpus
from lookahead_lsp.lsp_server.cli import UsageError

SIDES = ("daemon", "raw", "engine")
REPORT_EXACT = {"embedded": 70.3, "embedded-1.5b": 77.0}
"""The Qwen2.5-Coder report's HumanEval-FIM single-line Python exact match (%), base models 0.5B and 1.5B."""
HEADERS = ["suite", "side", "holes", "exact", "exact %", "edit sim", "pass@1", "pass@1 %", "empty",
           "first answer p50 ms"]  # fmt: skip

Run = tuple[str, str, list[InfillHole], list[Answer], list[HoleScore]]  # suite, side, holes, answers, scores


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--suite",
        default="humaneval-single",
        help=f"comma-separated: {', '.join(SUITES)}, {', '.join(CORPUS_SUITES)} (holes cut from --corpus; xfile: "
        "lines using a name imported from another module, cut before it)",
    )
    parser.add_argument(
        "--corpus", default=None, metavar="DIR", help="--suite repo, xfile: the repository to cut holes from"
    )
    parser.add_argument(
        "--holes", type=int, default=40, help="--suite repo (half whole lines, half mid-line), xfile: holes"
    )
    parser.add_argument("--seed", type=int, default=0, help="--suite repo, xfile: the seed that picks the holes")
    parser.add_argument("--model", default="embedded", help="embedded (0.5B) or embedded-1.5b")
    parser.add_argument("--limit", type=int, default=None, metavar="N", help="the first N problems of each suite")
    parser.add_argument(
        "--only",
        default=None,
        metavar="IDS",
        help="comma-separated hole ids as the report names them (e.g. humaneval-single:HumanEval/16/L0): "
        "those holes only, to look again at a few",
    )
    parser.add_argument(
        "--sides",
        default="daemon,raw",
        help="comma-separated: daemon, raw (llama-server, the report's prompt), engine (our engine, that prompt)",
    )
    parser.add_argument("--fresh", action="store_true", help="the daemon: a fresh one per document, not one for all")
    parser.add_argument(
        "--idle",
        action="store_true",
        help="the daemon: open each file a key before the hole and wait for its background prefill (a user who "
        "reads, then types) instead of typing the key at once",
    )
    parser.add_argument("--out", default=None, metavar="DIR", help="also write infill.json and infill.md here")
    parser.add_argument(
        "--settings",
        default="{}",
        metavar="JSON",
        help='the daemon\'s settings besides the model, as an editor sends them (e.g. \'{"promptLayout": "psm"}\'); '
        "default: none, the defaults",
    )
    parser.add_argument(
        "--daemon-command",
        default=None,
        metavar="CMD",
        help="the daemon to ask instead of this checkout's (a shell-quoted command that serves LSP on stdio: "
        "another build, to compare)",
    )


def _names(value: str, allowed: Sequence[str], what: str) -> list[str]:
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in allowed]
    if unknown or not names:
        raise UsageError(f"{what} {value!r}: comma-separated names among {', '.join(allowed)}")
    return names


def daemon_options(args: argparse.Namespace) -> dict[str, Any]:
    """The daemon's initialization options: ``--settings`` and the model."""
    try:
        settings = json.loads(args.settings)
    except ValueError as exc:
        raise UsageError(f"--settings {args.settings!r}: not JSON ({exc})") from exc
    if not isinstance(settings, dict):
        raise UsageError(f"--settings {args.settings!r}: a JSON object of settings")
    return {**settings, "model": args.model}


def daemon_command(args: argparse.Namespace) -> list[str] | None:
    return shlex.split(args.daemon_command) if args.daemon_command else None


def suite_holes(suite: str, args: argparse.Namespace) -> list[InfillHole]:
    """The holes of a public suite (its first ``--limit`` problems), or of ``--corpus`` for ``repo``; of
    those, the ``--only`` ones where given."""
    holes = _all_holes(suite, args)
    if args.only is None:
        return holes
    wanted = {name.strip() for name in args.only.split(",") if name.strip()}
    return [hole for hole in holes if hole.id in wanted]


def _all_holes(suite: str, args: argparse.Namespace) -> list[InfillHole]:
    if suite not in CORPUS_SUITES:
        return load_suite(suite, args.limit)
    if args.corpus is None:
        raise UsageError(f"--suite {suite} needs --corpus DIR, the repository to cut holes from")
    if args.fresh:
        raise UsageError("--fresh applies to the public suites: a repository's holes share its workspace")
    try:
        return CORPUS_SUITES[suite](Corpus.load(args.corpus), args.holes, args.seed)
    except (FileNotFoundError, ValueError) as exc:
        raise UsageError(str(exc)) from exc


def run(args: argparse.Namespace) -> int:
    suites = _names(args.suite, (*SUITES, *CORPUS_SUITES), "--suite")
    sides = _names(args.sides, SIDES, "--sides")
    try:
        model_parts(args.model)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    if args.only is not None and not any(suite_holes(suite, args) for suite in suites):
        raise UsageError(f"--only {args.only!r}: no hole of {', '.join(suites)} has one of these ids")
    for suite in suites:
        missing = "no tests" if suite in CORPUS_SUITES else runtime_missing(_all_holes(suite, args)[0].language)
        if missing:
            progress(f"{suite}: pass@1 not scored ({missing})")
    runs: list[Run] = []
    for suite in suites:
        for side in sides:
            runs.append(run_side(suite, side, args))
            if args.out:  # after each side: a run stopped later keeps the sides it finished
                write(runs, report(runs, args), Path(args.out))
    print(report(runs, args))
    return 0


def run_side(suite: str, side: str, args: argparse.Namespace) -> Run:
    """One suite on one side: its answers, then (after every model run, so that tests do not load the CPU
    while the daemon is timed) their scores."""
    holes = suite_holes(suite, args)
    with tempfile.TemporaryDirectory(prefix=f"lookahead-infill-{side}-") as tmp:
        if side == "daemon":
            # named as the project, the same every run: the prompt's `<|repo_name|>` line is the folder's name
            if suite in CORPUS_SUITES:
                workspace = copy_workspace(Corpus.load(args.corpus), Path(tmp) / Path(args.corpus).name)
            else:
                workspace = Path(tmp) / suite
                workspace.mkdir()
            answers = run_daemon(
                holes, daemon_options(args), workspace, args.fresh, progress, daemon_command(args), args.idle
            )
        elif side == "engine":
            answers = run_engine(holes, args.model, progress)
        else:
            answers = run_raw(holes, args.model, Path(args.out or tmp) / "llama-server", progress)
    progress(f"{suite} {side}: running the tests")
    scores = [score_answer(hole, answer) for hole, answer in zip(holes, answers, strict=True)]
    ways = [way for way, on in (("fresh", args.fresh), ("idle", args.idle)) if on]
    name = f"daemon ({', '.join(ways)})" if side == "daemon" and ways else side
    return suite, name, holes, answers, scores


def _percent(count: int, total: int) -> str:
    return f"{100.0 * count / total:.1f}" if total else ""


def table_row(suite: str, side: str, answers: list[Answer], scores: list[HoleScore]) -> list[Any]:
    n = len(scores)
    ran = [s.passed for s in scores if s.passed is not None]
    latencies = [a.first_ms for a in answers if a.first_ms is not None]
    return [
        suite,
        side,
        n,
        sum(s.exact for s in scores),
        _percent(sum(s.exact for s in scores), n),
        round(statistics.mean(s.similarity for s in scores), 3) if scores else "",
        f"{sum(ran)}/{len(ran)}" if ran else "not run",
        _percent(sum(ran), len(ran)),
        sum(s.empty for s in scores),
        round(statistics.median(latencies)) if latencies else "",
    ]


def only_one_side(runs: list[Run]) -> list[str]:
    """Per suite, for each two of its sides: the holes only one of them got exactly right, and those one left
    empty where the other gave a line."""
    lines = []
    for suite in dict.fromkeys(run[0] for run in runs):
        for pair in itertools.combinations([run for run in runs if run[0] == suite], 2):
            exact = [{s.hole_id for s in run[4] if s.exact} for run in pair]
            given = [{s.hole_id for s in run[4] if not s.empty} for run in pair]
            for ours, theirs in ((0, 1), (1, 0)):
                side, other = pair[ours][1], pair[theirs][1]
                alone = sorted(exact[ours] - exact[theirs])
                lines.append(f"- {suite}: only {side} exact, not {other} ({len(alone)}): {', '.join(alone) or '-'}")
                empty = sorted(given[theirs] - given[ours])
                lines.append(f"- {suite}: {side} empty where {other} gave a line ({len(empty)}): "
                             f"{', '.join(empty) or '-'}")  # fmt: skip
    return lines


def with_context(runs: list[Run]) -> list[str]:
    """Per daemon run: the holes whose prompt held another file's section (elsewhere a fresh daemon's prompt is
    the same: those are the holes where a shared daemon and a fresh one can differ)."""
    lines = []
    for suite, side, _, answers, scores in runs:
        if any(answer.context is not None for answer in answers):
            held = [score.hole_id for answer, score in zip(answers, scores, strict=True) if answer.context]
            lines.append(f"- {suite}: {side}'s prompt held another file's section ({len(held)}): "
                         f"{', '.join(held) or '-'}")  # fmt: skip
    return lines


def report(runs: list[Run], args: argparse.Namespace) -> str:
    table = markdown_table(HEADERS, [table_row(suite, side, a, s) for suite, side, _, a, s in runs])
    machine = machine_description()
    lines = [
        f"## eval infill: {args.model}, {'first ' + str(args.limit) if args.limit else 'all'} problems per suite, "
        f"the middle hole of each"
        + (
            f"; {args.holes} holes of {args.corpus}, seed {args.seed}"
            if set(CORPUS_SUITES) & set(args.suite.split(","))
            else ""
        ),
        "",
        table,
        "",
        f"Reference (Qwen2.5-Coder report, base models, HumanEval-FIM single-line Python, exact): 0.5B "
        f"{REPORT_EXACT['embedded']}, 1.5B {REPORT_EXACT['embedded-1.5b']} (all holes, not the middle one; "
        f"here the embedded Instruct models in Q4_K_M).",
        "",
        *only_one_side(runs),
        *with_context(runs),
        "",
        f"CPU: {machine['cpu']} ({machine['cpu_flags']}), {machine['logical_cpus']} logical CPUs, {machine['date']}",
    ]
    return "\n".join(lines)


def write(runs: list[Run], text: str, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    rows = [
        {
            "suite": suite,
            "side": side,
            "hole": hole.id,
            "answer": asdict(answer),
            "score": asdict(score),
            "reference": hole.middle,
        }
        for suite, side, holes, answers, scores in runs
        for hole, answer, score in zip(holes, answers, scores, strict=True)
    ]
    (out / "infill.json").write_text(json.dumps({"meta": machine_description(), "holes": rows}, indent=1) + "\n")
    (out / "infill.md").write_text(text + "\n", encoding="utf-8")
    progress(f"wrote {out / 'infill.json'} and {out / 'infill.md'}")
