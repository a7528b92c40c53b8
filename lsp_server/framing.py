"""LSP base-protocol framing: bytes in, message bodies out, resynchronising after any bad frame.

:class:`FrameParser` is sans-IO: the transport feeds it whatever bytes arrived and gets back the
complete frames (:class:`Frame`) and the problems (:class:`BadFrame`, to be logged) in order. It is
lenient where clients are sloppy and never deaf after a mistake:

- header lines may end in ``\\r\\n`` or a bare ``\\n``; ``Content-Length:N`` without the space and any
  letter case are accepted; unknown headers (``Content-Type``) are ignored;
- bytes outside a frame (a body without header, the tail of a frame whose length was too short) are
  skipped up to the next ``Content-Length`` header, reported once;
- a header with no, a negative or a non-numeric length, or a length above ``max_body``, is refused (the
  body is then skipped the same way), so a huge length never allocates anything;
- a body whose length was too long ends where the next frame's ``Content-Length: N`` header line starts
  inside it. That cut is safe: a raw line break can only stand between JSON tokens, never inside a
  string, so ``Content-Length: N`` followed by a raw line break cannot belong to valid JSON;
- a body the caller could not parse goes back through :meth:`FrameParser.reject` and is scanned again
  for a header it swallowed (a length too long by a few bytes, ending inside the next header).

Memory is bounded: at most ``max_body`` bytes of a body plus ``MAX_HEADER`` bytes of headers are held.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

MAX_BODY = 128 * 1024 * 1024  # the largest frame accepted (a 20 MB document escapes to well under this)
MAX_HEADER = 8 * 1024  # a header block longer than this is garbage
_LENGTH_NAME = b"content-length"
_NEXT_HEADER = re.compile(rb"content-length", re.IGNORECASE)
_HEADER_END = re.compile(rb"\r?\n\r?\n")
_HEADER_START = re.compile(rb"[A-Za-z][A-Za-z0-9-]*([ \t]*:|[ \t]*$)")
_HEADER_LINE = re.compile(rb"([A-Za-z][A-Za-z0-9-]*)[ \t]*:[ \t]*(.*?)[ \t]*")
_FRAME_IN_BODY = re.compile(rb"content-length[ \t]*:[ \t]*[-+]?\d+[ \t]*\r?\n", re.IGNORECASE)
_SCAN_OVERLAP = 64  # bytes of a body scanned again when more arrives (a header split across reads)


@dataclass(frozen=True)
class Frame:
    """One message body; ``cut`` when its declared length ran into the next frame's header."""

    body: bytes
    cut: bool = False


@dataclass(frozen=True)
class BadFrame:
    """Bytes that were refused or skipped, and why (for the log)."""

    reason: str


Event = Frame | BadFrame


class FrameParser:
    """Incremental Content-Length framing (see the module docstring)."""

    def __init__(self, max_body: int = MAX_BODY) -> None:
        self.max_body = max_body
        self._buf = bytearray()
        self._length: int | None = None  # the body length once its header block was read
        self._scanned = 0  # how much of the pending body was searched for a frame header
        self._skipping = False  # inside bytes that belong to no frame (reported when the run starts)

    def feed(self, data: bytes) -> Iterator[Event]:
        """The frames and problems completed by ``data`` (which may be any slice of the stream).

        A generator: a :meth:`reject` between two events takes effect before the next one is read.
        """
        self._buf += data
        while (step := self._step()) is not False:
            if not isinstance(step, bool):
                yield step

    def reject(self, frame: Frame) -> None:
        """``frame`` was no message: scan its body again, after its first byte, for the next header.

        A length that was too long swallowed the start of the next frame; this finds it again.
        """
        self._buf[:0] = frame.body[1:]
        self._skipping = True

    @property
    def pending(self) -> int:
        """Bytes held, waiting for the rest of a frame."""
        return len(self._buf)

    def _step(self) -> Event | bool:
        """One event, True when bytes were consumed without one, False when more bytes are needed."""
        if self._length is not None:
            return self._body(self._length)
        buf = self._buf
        del buf[: len(buf) - len(buf.lstrip(b" \t\r\n"))]
        if not buf:
            return False
        resumes = _LENGTH_NAME.startswith(bytes(buf[: len(_LENGTH_NAME)]).lower())
        if not _HEADER_START.match(buf) or (self._skipping and not resumes):
            return self._skip(0, "bytes outside any frame", always=False)
        if len(buf) < len(_LENGTH_NAME) and resumes:
            return False  # wait for the whole header name
        end = _HEADER_END.search(buf, 0, MAX_HEADER)
        if end is None:
            return self._skip(1, "a header block without its end") if len(buf) >= MAX_HEADER else False
        length: bytes | None = None
        for line in bytes(buf[: end.start()]).replace(b"\r\n", b"\n").split(b"\n"):
            match = _HEADER_LINE.fullmatch(line)
            if match is None:
                return self._skip(1, f"a bad header line {line[:60]!r}")
            if match.group(1).lower() == _LENGTH_NAME:
                length = match.group(2)
        if length is None:
            return self._skip(1, "a header block without Content-Length")
        if not length.isdigit():
            return self._skip(1, f"Content-Length {length[:40]!r} is no byte count")
        if len(length) > 15 or int(length) > self.max_body:
            return self._skip(1, f"a frame of {length[:40].decode()} bytes refused (the limit is {self.max_body})")
        del buf[: end.end()]
        self._length, self._scanned, self._skipping = int(length), 0, False
        return True

    def _body(self, length: int) -> Event | bool:
        buf = self._buf
        found = _FRAME_IN_BODY.search(buf, max(0, self._scanned - _SCAN_OVERLAP), min(len(buf), length + _SCAN_OVERLAP))
        if found is not None and found.start() < length:
            return self._take(found.start(), cut=True)
        self._scanned = min(length, len(buf))
        return self._take(length, cut=False) if len(buf) >= length else False

    def _take(self, size: int, cut: bool) -> Frame:
        body = bytes(self._buf[:size])
        del self._buf[:size]
        self._length = None
        return Frame(body, cut)

    def _skip(self, offset: int, reason: str, always: bool = True) -> Event | bool:
        """Drop bytes up to the next ``Content-Length`` at or after ``offset``.

        A refused header is always reported; a run of stray bytes once, when it starts.
        """
        buf = self._buf
        found = _NEXT_HEADER.search(buf, offset)
        keep_from = found.start() if found is not None else max(offset, len(buf) - len(_LENGTH_NAME) + 1)
        del buf[:keep_from]
        report = always or not self._skipping
        self._skipping = found is None
        if report:
            return BadFrame(f"{reason}; skipped to the next Content-Length header")
        return keep_from > 0
