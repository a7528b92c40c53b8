"""The daemon's I/O: bytes from stdin or a socket through :class:`~lsp_server.framing.FrameParser` into the
protocol, and frames out through a writer that goes quiet when the client is gone.

This replaces pygls' reader loop (``pygls.io_.run_async``), which went deaf after a bad frame and died
on a huge Content-Length. One loop serves stdio and TCP; it ends at the end of the input, when the
output is lost (the client closed the daemon's stdout: no more writes, no traceback per message), or
on SIGTERM. In stdio mode stdin is read with ``os.read`` on a daemon thread that holds no lock of the
interpreter's stdin object, so the process can exit while that read still waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
from collections.abc import Awaitable, Callable
from typing import BinaryIO, Protocol

from lookahead_lsp.lsp_server.framing import BadFrame, FrameParser

log = logging.getLogger(__name__)

CHUNK = 1 << 16
END = b""  # what a reader returns, and what stops the loop


class Receiver(Protocol):
    """What the loop hands frames to (``RobustProtocol``)."""

    def receive(self, body: bytes) -> bool: ...


class Stream(Protocol):
    def write(self, data: bytes, /) -> int: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


class Writer:
    """Writes frames to a binary stream; after the first failure it writes nothing and calls ``lost`` once."""

    def __init__(self, stream: Stream, lost: Callable[[], None]) -> None:
        self._stream = stream
        self._lost = lost
        self._lock = threading.Lock()
        self.broken = False

    def write(self, data: bytes) -> None:
        with self._lock:
            if self.broken:
                return
            try:
                self._stream.write(data)
                self._stream.flush()
            except (OSError, ValueError) as exc:  # BrokenPipeError, or the stream was closed
                self.broken = True
                log.warning("the client closed the connection (%s); no more output", exc)
                self._lost()

    def close(self) -> None:
        with self._lock:
            self.broken = True
            with contextlib.suppress(OSError, ValueError):
                self._stream.close()


async def pump(read: Callable[[], Awaitable[bytes]], receiver: Receiver) -> None:
    """Frames from ``read`` (END at the end) into ``receiver``, until the end; bad frames are logged."""
    parser = FrameParser()
    while chunk := await read():
        for event in parser.feed(chunk):
            if isinstance(event, BadFrame):
                log.warning("bad frame: %s", event.reason)
            elif not receiver.receive(event.body):
                parser.reject(event)
            elif event.cut:
                log.warning("a frame's Content-Length ran into the next frame's header; cut there")
            await asyncio.sleep(0)  # a request's handler starts before the next message (a cancel) is read


class Inbox:
    """Chunks for the loop from another thread (bounded: the reader waits while the loop is behind)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queue: asyncio.Queue[bytes] = asyncio.Queue(maxsize=16)

    def put(self, chunk: bytes) -> None:
        """From a thread: hand over ``chunk`` (END ends the loop); waits while the queue is full."""
        with contextlib.suppress(RuntimeError):  # the loop has ended
            asyncio.run_coroutine_threadsafe(self._queue.put(chunk), self._loop).result()

    def end(self) -> None:
        """From any thread or a signal handler: end the loop without waiting."""
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._queue.put_nowait, END)

    async def get(self) -> bytes:
        return await self._queue.get()


def _read_into(stream: BinaryIO, inbox: Inbox) -> None:
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):
        fd = None
    while True:
        try:
            chunk = os.read(fd, CHUNK) if fd is not None else stream.read1(CHUNK)  # type: ignore[attr-defined]
        except OSError as exc:
            log.warning("reading the input failed: %s", exc)
            chunk = END
        inbox.put(chunk)
        if not chunk:
            return


def on_sigterm(loop: asyncio.AbstractEventLoop, stop: Callable[[], None], terminated: Callable[[], None]) -> None:
    """SIGTERM ends the loop like the end of the input (the caller then saves and exits)."""

    def handler() -> None:
        log.warning("SIGTERM: stopping")
        terminated()
        stop()

    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread
        loop.add_signal_handler(signal.SIGTERM, handler)


async def serve_stdio(
    stdin: BinaryIO,
    stdout: BinaryIO,
    receiver: Receiver,
    set_writer: Callable[[Writer], None],
    terminated: Callable[[], None],
) -> None:
    """Serve over stdin/stdout until stdin ends, stdout is lost, or SIGTERM."""
    loop = asyncio.get_running_loop()
    inbox = Inbox(loop)
    set_writer(Writer(stdout, inbox.end))
    on_sigterm(loop, inbox.end, terminated)
    threading.Thread(target=_read_into, args=(stdin, inbox), name="lsp-stdin", daemon=True).start()
    await pump(inbox.get, receiver)


async def serve_tcp(
    host: str, port: int, receiver: Receiver, set_writer: Callable[[Writer], None], terminated: Callable[[], None]
) -> None:
    """Listen on ``host:port`` and serve the first client until it disconnects (or SIGTERM)."""
    done = asyncio.Event()

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await _serve_connection(reader, writer, receiver, set_writer)
        finally:
            done.set()

    server = await asyncio.start_server(connection, host, port)
    on_sigterm(asyncio.get_running_loop(), done.set, terminated)
    log.info("serving on %s:%d", host, port)
    async with server:
        await done.wait()


async def _serve_connection(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, receiver: Receiver, set_writer: Callable[[Writer], None]
) -> None:
    """One TCP client: frames from the socket, answers to it, until it disconnects."""
    ended = asyncio.Event()
    set_writer(Writer(_SocketStream(writer), ended.set))

    async def read() -> bytes:
        if ended.is_set():
            return END
        try:
            return await reader.read(CHUNK)
        except OSError:
            return END

    await pump(read, receiver)


class _SocketStream:
    """A StreamWriter as a blocking-style binary stream for :class:`Writer` (writes are buffered by asyncio)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    def write(self, data: bytes) -> int:
        if self._writer.is_closing():
            raise BrokenPipeError("the socket is closed")
        self._writer.write(data)
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self._writer.close()
