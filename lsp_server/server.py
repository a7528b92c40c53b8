"""The LSP daemon: a typed pygls ``LanguageServer`` and its thin handlers.

Handlers run on the event loop and never wait for the model: a completion request becomes a job on
the scheduler's single model worker (newest per document wins) and the handler awaits its future.
Everything else lives in pure modules: settings in ``config``, documents and positions in
``documents``, the completion in ``pipeline``, the worker in ``scheduler``, the model and index in
``engine``. Two pygls built-ins are replaced in :class:`LookaheadProtocol`: document sync (this
server keeps its own immutable snapshots, so pygls' copy is not maintained twice) and
``$/cancelRequest`` for completions (answered with an empty result, never an error).

Progressive ghost text: a completion cut by a keystroke deadline is answered at once while its decoding goes
on in the background (``scheduler.submit_progressive``); each longer version is held in the completion cache
(``held``) and announced with ``lookahead/completionReady`` (uri, version, position) while the document is
still at that state (or typed through it). The client asks again and is answered from the cache, with no
model work; a change that does not type through the held text cancels the background decoding.

Background prefill: the server keeps each document's cursor (from completion requests and from where
``didChange`` edits end). Once a document has settled (``SETTLE_S`` with no change, request or context
change), it queues an idle job on the worker that prefills the prompt at that cursor; any real request
cancels it within one prefill chunk (``pipeline.warm``, ``scheduler.submit_idle``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import itertools
import logging
import sys
import threading
from collections import Counter, deque
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.protocol.language_server import lsp_method
from pygls.uris import to_fs_path

from lookahead_lsp.lsp_server import memory, memory_report, pipeline, transport
from lookahead_lsp.lsp_server.cli import configure_logging
from lookahead_lsp.lsp_server.config import Config, parse_config, settings_message, to_settings
from lookahead_lsp.lsp_server.documents import Document, DocumentStore
from lookahead_lsp.lsp_server.engine import Engine
from lookahead_lsp.lsp_server.held import CompletionCache, Held
from lookahead_lsp.lsp_server.model_host import Task
from lookahead_lsp.lsp_server.pipeline import Completion, Edit, Snapshot, Warmed
from lookahead_lsp.lsp_server.protocol import RobustProtocol
from lookahead_lsp.lsp_server.rpc import valid_id
from lookahead_lsp.lsp_server.scheduler import Answer, Scheduler

log = logging.getLogger(__name__)

NAME = "lookahead-lsp"
VERSION = "0.1.0"
STATS_NOTIFICATION = "lookahead/completionStats"
READY_NOTIFICATION = "lookahead/completionReady"
CMD_STATS = "lookahead.stats"
CMD_REINDEX = "lookahead.reindex"
CMD_MEMORY = "lookahead.memory"  # where the resident megabytes go (lsp_server/memory_report.py)
CMD_ACCEPTED = "lookahead.accepted"
TRIM_AFTER_S = 2.0  # free memory is returned to the system this long after the last document closed
SETTLE_S = 0.3  # a document is settled (background prefill starts) once nothing happened to it this long
STOP_WAIT_S = 15.0  # exit waits this long for the stop that shutdown began (the index snapshot's save)


class StatsBook:
    """Totals and the recent completions, for ``lookahead.stats`` and local accept statistics."""

    def __init__(self, keep: int = 50) -> None:
        self.totals: Counter[str] = Counter()
        self.recent: deque[dict[str, Any]] = deque(maxlen=keep)
        self.recent_warm: dict[str, Any] | None = None

    def count(self, event: str) -> None:
        self.totals[event] += 1

    def record(self, completion: Completion) -> None:
        """A model run ended whole (its answer was counted as ``completed`` when it came)."""
        self.totals["newTokens"] += completion.decode.new_tokens
        self.totals["steps"] += completion.decode.steps
        self.recent.append({**completion.stats(), "chars": len(completion.text), "accepted": False})

    def warmed(self, warmed: Warmed) -> None:
        """A background prefill ended (done or preempted)."""
        self.totals["warmRuns"] += 1
        self.totals["warmCancelled"] += warmed.cancelled
        self.totals["warmTokens"] += warmed.prefilled_tokens or 0
        self.recent_warm = warmed.stats()

    def accepted(self, request_id: str) -> bool:
        self.totals["accepted"] += 1
        for entry in self.recent:
            if entry["requestId"] == request_id:
                entry["accepted"] = True
                return True
        return False

    def report(self) -> dict[str, Any]:
        totals: dict[str, Any] = dict(self.totals)
        steps = self.totals["steps"]
        totals["meanAcceptedPerStep"] = round(self.totals["newTokens"] / steps, 3) if steps else 0.0
        return {"totals": totals, "recent": list(self.recent), "lastWarm": self.recent_warm}


@dataclass
class _Bar:
    """One progress bar: created (``open``) once the client answered ``window/workDoneProgress/create``."""

    token: str
    pending: tuple[str, int | None]  # the latest message and percentage, sent with begin
    open: bool = False
    sent: int | None = None  # the last percentage reported
    end: str | None = None  # an end that arrived before the bar opened


class ProgressBars:
    """Server-initiated work-done progress (one bar per task at a time), fed from any thread."""

    TITLES: dict[Task, str] = {"model": "Loading model", "index": "Indexing workspace"}

    def __init__(self, server: LookaheadServer) -> None:
        self._server = server
        self._ids = itertools.count(1)
        self._bars: dict[Task, _Bar] = {}

    def update(self, task: Task, message: str, fraction: float | None) -> None:
        percentage = None if fraction is None else max(0, min(100, int(fraction * 100)))
        self._server.call_soon(self._update, task, message, percentage)

    def end(self, task: Task, message: str) -> None:
        self._server.call_soon(self._end, task, message)

    def _supported(self) -> bool:
        window = self._server.client_capabilities.window
        return bool(window and window.work_done_progress)

    def _update(self, task: Task, message: str, percentage: int | None) -> None:
        if not self._supported():
            return
        bar = self._bars.get(task)
        if bar is None:
            bar = self._bars[task] = _Bar(f"lookahead/{task}/{next(self._ids)}", (message, percentage))
            params = types.WorkDoneProgressCreateParams(token=bar.token)
            future = self._server.window_work_done_progress_create(params)
            future.add_done_callback(functools.partial(self._on_created, task, bar.token))
        elif not bar.open:
            bar.pending = (message, percentage)
        elif percentage != bar.sent or percentage is None:
            bar.sent = percentage
            value = types.WorkDoneProgressReport(message=message, percentage=percentage)
            self._server.work_done_progress.report(bar.token, value)

    def _on_created(self, task: Task, token: str, future: Future[Any]) -> None:
        self._server.call_soon(self._created, task, token, future)

    def _created(self, task: Task, token: str, future: Future[Any]) -> None:
        bar = self._bars.get(task)
        if bar is None or bar.token != token or future.cancelled() or future.exception() is not None:
            self._bars.pop(task, None)
            return
        message, percentage = bar.pending
        begin = types.WorkDoneProgressBegin(title=self.TITLES[task], message=message, percentage=percentage)
        self._server.work_done_progress.begin(token, begin)
        bar.open = True
        if bar.end is not None:
            self._end(task, bar.end)

    def _end(self, task: Task, message: str) -> None:
        bar = self._bars.get(task)
        if bar is None:
            return
        if not bar.open:
            bar.end = message
            return
        del self._bars[task]
        self._server.work_done_progress.end(bar.token, types.WorkDoneProgressEnd(message=message))


class ServerEvents:
    """The engine's events as $/progress and window/showMessage (from the engine's threads)."""

    def __init__(self, server: LookaheadServer) -> None:
        self._server = server
        self._bars = ProgressBars(server)

    def progress(self, task: Task, message: str, fraction: float | None) -> None:
        self._bars.update(task, message, fraction)

    def finished(self, task: Task, message: str) -> None:
        self._bars.end(task, message)

    def failed(self, task: Task, message: str) -> None:
        self._bars.end(task, "failed")
        self._server.call_soon(self._server.show, message, types.MessageType.Error)

    def notice(self, message: str, error: bool) -> None:
        kind = types.MessageType.Error if error else types.MessageType.Info
        self._server.call_soon(self._server.show, message, kind)


class LookaheadProtocol(RobustProtocol):
    """The checked protocol (:mod:`lsp_server.protocol`) with this server's document sync and cancellation."""

    _server: LookaheadServer

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        if not (valid_id(msg_id) and self._server.cancel_completion(msg_id)):
            super()._handle_cancel_notification(msg_id)

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: types.DidOpenTextDocumentParams) -> None:
        self._server.did_open(params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams) -> None:
        self._server.did_change(params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: types.DidCloseTextDocumentParams) -> None:
        self._server.did_close(params)


class LookaheadServer(LanguageServer):
    """The daemon's state: settings, documents, the engine, the model worker and the statistics."""

    protocol: LookaheadProtocol

    def __init__(self) -> None:
        super().__init__(NAME, VERSION, protocol_cls=LookaheadProtocol)
        self.config = Config()
        self.documents = DocumentStore()
        self.scheduler: Scheduler[Completion | Warmed] = Scheduler()
        self.engine: Engine | None = None
        self.book = StatsBook()
        self.held = CompletionCache()
        self.shutdown_requested = False
        self._ids = itertools.count(1)
        self._jobs_by_message: dict[Any, str] = {}
        self.cursors: dict[str, int] = {}  # the last known cursor offset per document URI
        self.active_uri: str | None = None  # the document last typed or completed in (the KV cache is its)
        self._settle: dict[str, asyncio.TimerHandle] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopper: threading.Thread | None = None  # stops the worker and the engine (begun by shutdown)
        self._stopper_lock = threading.Lock()
        self.terminated = False  # SIGTERM ended the session
        self._trim: asyncio.TimerHandle | None = None

    # ---- transport: this server's framing and error path (``transport``, ``protocol``) ---------------

    def start_io(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        """Serve over stdio until the input ends, the output is lost, exit or SIGTERM."""
        self._serve(
            transport.serve_stdio(
                stdin or sys.stdin.buffer,
                stdout or sys.stdout.buffer,
                self.protocol,
                self.protocol.set_writer,
                self._terminate,
            )
        )

    def start_tcp(self, host: str, port: int) -> None:
        """Serve the first client that connects to ``host:port`` until it disconnects, exit or SIGTERM."""
        self._serve(transport.serve_tcp(host, port, self.protocol, self.protocol.set_writer, self._terminate))

    def _serve(self, main: Coroutine[Any, Any, None]) -> None:
        self._stop_event = threading.Event()
        try:
            asyncio.run(main)
        except (KeyboardInterrupt, SystemExit):
            pass
        finally:
            self.shutdown()

    def _terminate(self) -> None:
        self.terminated = True

    def report_server_error(self, error: Exception, source: Any) -> None:
        """Errors in handlers are logged (requests also get them as their error answer); no pop-up."""
        log.error("server error (%s): %s", getattr(source, "__name__", source), error)

    # ---- plumbing ----------------------------------------------------------------------------------

    def call_soon(self, fn: Callable[..., None], *args: Any) -> None:
        """Run ``fn`` on the event loop (safe from any thread; after the loop ended, nothing happens)."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed in between
                loop.call_soon_threadsafe(fn, *args)

    def show(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        self.window_show_message(types.ShowMessageParams(type=kind, message=message))

    @property
    def encoding(self) -> str:
        encoding = self.workspace.position_encoding or types.PositionEncodingKind.Utf16
        return str(getattr(encoding, "value", encoding))

    # ---- lifecycle ---------------------------------------------------------------------------------

    def initialize(self, params: types.InitializeParams) -> None:
        self._loop = asyncio.get_running_loop()
        self.apply_settings(params.initialization_options)
        if not _supports_inline(params.capabilities):
            self.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions())(completion)
        self.engine = Engine(self.config, workspace_roots(params), ServerEvents(self))
        self.engine.on_context_change = lambda path: self.call_soon(self._context_changed, path)
        self.scheduler.start()
        if self.config.enabled:
            self.engine.start()

    def apply_settings(self, raw: Any) -> None:
        """Take new settings; bad values keep their previous values and all of them are shown in one message."""
        previous = self.config
        self.config, problems = parse_config(raw, previous)
        if self.config != previous:
            self.held = CompletionCache()  # held completions were made under the old settings
        if self.config.log_file != previous.log_file and self.config.log_file:
            try:
                configure_logging(logging.getLevelName(logging.getLogger().level), self.config.log_file)
            except OSError as exc:  # a missing folder, a directory, no permission: the rest still applies
                self.config = dataclasses.replace(self.config, log_file=previous.log_file)
                reason = f"{exc.filename!r} cannot be written ({exc.strerror or exc})"
                problems.append(f"logFile {reason}; keeping {previous.log_file!r}")
        message = settings_message(problems)
        if message is not None:
            log.warning("settings: %s", "; ".join(problems))
            self.show(message, types.MessageType.Warning)
        if self.engine is not None:
            start = self.config.enabled and self.engine.state == "idle"
            self.engine.apply_config(self.config)
            if start:
                self.engine.start()

    def begin_stop(self) -> None:
        """Start stopping the worker and the engine (the index snapshot is saved) on a thread of its own, so
        that ``shutdown`` is answered at once whatever the index is doing. Idempotent."""
        with self._stopper_lock:
            if self._stopper is None:
                self._stopper = threading.Thread(target=self._stop_now, name="lsp-stop", daemon=True)
                self._stopper.start()

    def stop(self) -> None:
        """Stop (:meth:`begin_stop`) and wait until it is done, ``STOP_WAIT_S`` at most (the snapshot is written
        atomically: cut off, the previous one stays). Idempotent."""
        self.begin_stop()
        assert self._stopper is not None
        self._stopper.join(STOP_WAIT_S)
        if self._stopper.is_alive():
            log.warning("stopping took more than %.0f s; exiting without waiting for it", STOP_WAIT_S)

    def _stop_now(self) -> None:
        try:
            self.scheduler.stop(timeout=2.0)
            if self.engine is not None:
                self.engine.stop()
        except Exception:
            log.exception("stopping failed")

    # ---- documents ---------------------------------------------------------------------------------

    def did_open(self, params: types.DidOpenTextDocumentParams) -> None:
        self._document_changed(self.documents.open(params.text_document))

    def did_change(self, params: types.DidChangeTextDocumentParams) -> None:
        before = self.documents.get(params.text_document.uri)
        doc = self.documents.change(params, self.encoding)
        if doc is not None:
            if before is not None:
                self.cursors[doc.uri] = pipeline.edit_end(before.text, doc.text)
                self.active_uri = doc.uri
                self._stop_stale_continuation(doc)
            self._document_changed(doc)

    def did_close(self, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        doc = self.documents.close(uri)
        self.held.drop(uri)
        self.cursors.pop(uri, None)
        timer = self._settle.pop(uri, None)
        if timer is not None:
            timer.cancel()
        if doc is not None and self.engine is not None:
            self.engine.document_changed(doc.path, None)
        self._trim_later()

    def _trim_later(self) -> None:
        """Give freed memory back to the system once closing has been quiet for ``TRIM_AFTER_S``."""
        loop = self._loop
        if loop is None:
            return
        if self._trim is not None:
            self._trim.cancel()
        self._trim = loop.call_later(TRIM_AFTER_S, memory.trim)

    def _document_changed(self, doc: Document) -> None:
        if self.engine is not None:
            self.engine.document_changed(doc.path, doc.text)
        self.settle_later(doc.uri)

    # ---- background prefill ------------------------------------------------------------------------

    def settle_later(self, uri: str) -> None:
        """(Re)start the document's settle timer: background prefill once it stays quiet ``SETTLE_S``."""
        loop = self._loop
        if loop is None or not self.config.background_prefill:
            return
        timer = self._settle.pop(uri, None)
        if timer is not None:
            timer.cancel()
        self._settle[uri] = loop.call_later(SETTLE_S, self._settled, uri)

    def _context_changed(self, path: Path) -> None:
        """Another file's text reached the snippet index: the active document's prompt may have changed. Only
        its own: the decoder keeps a few KV caches, one per document (``kvSlots``), and prefilling the prompts
        of other open documents would give up the least recently used one, the file the user was in before."""
        uri = self.active_uri
        doc = self.documents.get(uri) if uri is not None and uri in self.cursors else None
        if doc is not None and doc.path != path:
            self.settle_later(doc.uri)

    def _settled(self, uri: str) -> None:
        self._settle.pop(uri, None)
        doc, offset, engine = self.documents.get(uri), self.cursors.get(uri), self.engine
        config = self.config
        if doc is None or offset is None or engine is None or not engine.ready or not config.local:
            return
        if not config.background_prefill:
            return
        if engine.context_pending(doc.path):  # another file's text lands first, then settles this one again:
            return  # a prefill now would be of a prompt whose snippets are about to change
        snapshot = Snapshot(doc, min(offset, len(doc.text)), f"w{next(self._ids)}")

        def work(cancel: Any, queue_ms: float) -> Warmed:
            warmed = pipeline.warm(snapshot, engine, cancel)
            self.call_soon(self.book.warmed, warmed)
            return warmed

        self.scheduler.submit_idle(uri, work, job_id=snapshot.request_id)

    # ---- completions -------------------------------------------------------------------------------

    async def complete_at(self, uri: str, position: types.Position) -> tuple[Document, Edit, str] | None:
        """The completion at a position as (document, edit, request id), or None for an empty answer."""
        self.book.count("requests")
        doc = self.documents.get(uri)
        offset = doc.offset_at(position, self.encoding) if doc is not None else None
        if doc is None or offset is None or not self.config.enabled:
            self.book.count("invalid" if self.config.enabled else "disabled")
            return None
        self.cursors[uri] = offset
        self.active_uri = uri
        self.settle_later(uri)
        held = self.held.answer(doc, offset)
        if held is not None:
            entry, edit = held
            self.book.count("heldAnswers" if edit is entry.edit else "typedThrough")
            entry.answered = True
            return (doc, edit, entry.request_id) if edit.text else None
        if self.engine is None or not self.engine.ready:
            self.book.count("notReady")
            return None

        completion = await self._run(Snapshot(doc, offset, f"r{next(self._ids)}"))
        self.settle_later(uri)
        if completion is None:
            self.book.count("cancelled")
            return None
        self.book.count("completed")  # a model run answered (its tokens and stats are recorded when it ends)
        if not completion.final:
            self.book.count("shownEarly")
        entry, _ = self.held.hold(completion)  # the latest the run has published: maybe more than its answer
        entry.answered = True
        return (doc, entry.edit, entry.request_id) if entry.edit.text else None

    async def _run(self, snapshot: Snapshot) -> Completion | None:
        engine = self.engine
        assert engine is not None
        progressive = self.config.progressive

        def work(cancel: Any, queue_ms: float, answer: Answer[Completion | Warmed]) -> Completion:
            def publish(partial: Completion) -> None:
                answer(partial)  # the first one answers the request; decoding goes on
                self.call_soon(self._published, partial)

            try:
                completion = pipeline.complete(snapshot, engine, cancel, queue_ms, publish if progressive else None)
                if not cancel.cancelled:
                    self.call_soon(self._published, completion)
                return completion
            finally:
                self.call_soon(self.held.ended, snapshot.request_id, snapshot.doc, snapshot.offset)

        job = self.scheduler.submit_progressive(snapshot.doc.uri, work, job_id=snapshot.request_id)
        message_id = self.protocol.msg_id
        self._jobs_by_message[message_id] = job.job_id
        try:
            result = await asyncio.wrap_future(job.future)
            return result if isinstance(result, Completion) else None
        finally:
            self._jobs_by_message.pop(message_id, None)

    def _published(self, completion: Completion) -> None:
        """A run published (on the event loop): hold it; growth after the answer is announced while the
        document is still at that state (or typed through it); a whole one's stats are recorded and sent last,
        so a client that has the stats has every ``completionReady`` of that run (none follows them)."""
        entry, grew = self.held.hold(completion)
        position = self._still_shown_at(entry) if grew and entry.answered else None
        if position is not None:
            doc, offset = position
            params = {
                "uri": doc.uri,
                "version": doc.version,
                "position": doc.position_at(offset, self.encoding),
                "requestId": entry.request_id,
                "final": entry.final,
            }
            self.book.count("readyNotifications")
            self.protocol.notify(READY_NOTIFICATION, params)
        if completion.final:
            self.book.record(completion)
            self.protocol.notify(STATS_NOTIFICATION, completion.stats())

    def _still_shown_at(self, entry: Held) -> tuple[Document, int] | None:
        """The document and cursor where ``entry`` is still what the user sees: its own state, or one that
        typed through its text; None when the document moved on."""
        doc, cursor = self.documents.get(entry.doc.uri), self.cursors.get(entry.doc.uri)
        if doc is None:
            return None
        if doc.version == entry.doc.version and doc.text == entry.doc.text:
            return doc, entry.offset
        if cursor is not None and pipeline.typed_through(entry.shown(), doc, cursor, whole=entry.running) is not None:
            return doc, cursor
        return None

    def _stop_stale_continuation(self, doc: Document) -> None:
        """A change that does not type through the held text of a running continuation cancels it."""
        entry = self.held.running(doc.uri)
        if entry is not None and self._still_shown_at(entry) is None:
            entry.running = False
            self.scheduler.cancel(entry.request_id)

    def cancel_completion(self, message_id: Any) -> bool:
        """Cancel the completion job of an LSP request; False when that request is no completion."""
        job_id = self._jobs_by_message.get(message_id)
        if job_id is None:
            return False
        self.scheduler.cancel(job_id)
        return True

    def inline_item(self, doc: Document, edit: Edit, request_id: str) -> types.InlineCompletionItem:
        return types.InlineCompletionItem(
            insert_text=edit.text,
            range=self._range(doc, edit),
            command=types.Command(title="Accepted", command=CMD_ACCEPTED, arguments=[request_id]),
        )

    def completion_item(self, doc: Document, edit: Edit, request_id: str) -> types.CompletionItem:
        first_line = edit.text.strip().splitlines()[0] if edit.text.strip() else ""
        lines = edit.text.count("\n") + 1
        return types.CompletionItem(
            label=f"⇥ lookahead: {first_line[:60]}",
            kind=types.CompletionItemKind.Snippet,
            detail=f"lookahead completion ({lines} line{'s' if lines > 1 else ''})",
            documentation=types.MarkupContent(kind=types.MarkupKind.Markdown, value=f"```\n{edit.text}\n```"),
            sort_text="0",
            preselect=True,
            insert_text_format=types.InsertTextFormat.PlainText,
            text_edit=types.TextEdit(range=self._range(doc, edit), new_text=edit.text),
            command=types.Command(title="Accepted", command=CMD_ACCEPTED, arguments=[request_id]),
        )

    def _range(self, doc: Document, edit: Edit) -> types.Range:
        return types.Range(
            start=doc.position_at(edit.start, self.encoding), end=doc.position_at(edit.end, self.encoding)
        )

    # ---- commands ----------------------------------------------------------------------------------

    def stats_report(self) -> dict[str, Any]:
        return {
            **self.book.report(),
            "model": self.engine.describe() if self.engine is not None else {"state": "idle"},
            "settings": to_settings(self.config),
            "openDocuments": len(self.documents),
            "workerBusy": self.scheduler.busy,
            "workerWarming": self.scheduler.idle_running,
        }


def _supports_inline(capabilities: types.ClientCapabilities) -> bool:
    text_document = capabilities.text_document
    return bool(text_document and text_document.inline_completion is not None)


def workspace_roots(params: types.InitializeParams) -> list[Path]:
    """The workspace folders (or the root URI / path) as directories."""
    uris = [folder.uri for folder in params.workspace_folders or []]
    if not uris and params.root_uri:
        uris = [params.root_uri]
    paths = [to_fs_path(uri) for uri in uris]
    if not uris and params.root_path:
        paths = [params.root_path]
    return [Path(p) for p in paths if p and Path(p).is_dir()]


# ---- handlers: thin -----------------------------------------------------------------------------------

SERVER = LookaheadServer()


@SERVER.feature(types.INITIALIZE)
def initialize(ls: LookaheadServer, params: types.InitializeParams) -> None:
    ls.initialize(params)


@SERVER.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
def did_change_configuration(ls: LookaheadServer, params: types.DidChangeConfigurationParams) -> None:
    ls.apply_settings(params.settings)


@SERVER.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
async def inline_completion(ls: LookaheadServer, params: types.InlineCompletionParams) -> types.InlineCompletionList:
    found = await ls.complete_at(params.text_document.uri, params.position)
    return types.InlineCompletionList(items=[ls.inline_item(*found)] if found else [])


async def completion(ls: LookaheadServer, params: types.CompletionParams) -> types.CompletionList:
    """``textDocument/completion``, registered only for clients without inline completion."""
    found = await ls.complete_at(params.text_document.uri, params.position)
    return types.CompletionList(is_incomplete=True, items=[ls.completion_item(*found)] if found else [])


@SERVER.command(CMD_STATS)
def stats_command(ls: LookaheadServer, *args: Any) -> dict[str, Any]:
    return ls.stats_report()


@SERVER.command(CMD_MEMORY)
def memory_command(ls: LookaheadServer, *args: Any) -> dict[str, Any]:
    engine = ls.engine
    model = engine.host.model.model if engine is not None and engine.host.loaded else None
    return memory_report.breakdown(model, engine.workspace.draft_sources() if engine is not None else [])


@SERVER.command(CMD_REINDEX)
def reindex_command(ls: LookaheadServer, *args: Any) -> dict[str, Any]:
    if ls.engine is None or not ls.config.index_enabled:
        return {"started": False}
    ls.engine.reindex()
    return {"started": True}


@SERVER.command(CMD_ACCEPTED)
def accepted_command(ls: LookaheadServer, *args: Any) -> dict[str, Any]:
    request_id = str(args[0]) if args else ""
    return {"known": ls.book.accepted(request_id)}


@SERVER.feature(types.SHUTDOWN)
def shutdown(ls: LookaheadServer, *args: Any) -> None:
    ls.shutdown_requested = True
    ls.begin_stop()  # answered at once; exit waits for the stop


@SERVER.feature(types.EXIT)
def exit_(ls: LookaheadServer, *args: Any) -> None:
    ls.stop()
