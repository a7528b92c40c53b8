"""``FrameParser``: every bad frame is reported and the next good one is read, whatever the read sizes."""

from __future__ import annotations

import json

import pytest

from lookahead_lsp.lsp_server.framing import BadFrame, Frame, FrameParser

FIRST = b'{"a": 1}'
NEXT = b'{"b": 2}'


def framed(body: bytes, length: int | None = None) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % (len(body) if length is None else length) + body


CASES: dict[str, tuple[bytes, bool | None]] = {  # stream, whether FIRST itself is read (None: it depends)
    "good": (framed(FIRST) + framed(NEXT), True),
    "short": (framed(FIRST, 4) + framed(NEXT), False),
    "long by a few bytes": (framed(FIRST, len(FIRST) + 3) + framed(NEXT), None),  # read when NEXT came with it
    "long by more than a header": (framed(FIRST, len(FIRST) + 100) + framed(NEXT) + framed(NEXT), True),
    "counted in characters": (framed('{"a": "ééé"}'.encode(), 12) + framed(NEXT), False),
    "no header": (FIRST + framed(NEXT), False),
    "no space": (b"Content-Length:8\r\n\r\n" + FIRST + framed(NEXT), True),
    "LF only": (b"Content-Length: 8\n\n" + FIRST + framed(NEXT), True),
    "lower case, Content-Type": (b"Content-Type: x\r\ncontent-length: 8\r\n\r\n" + FIRST + framed(NEXT), True),
    "negative": (b"Content-Length: -5\r\n\r\n" + FIRST + framed(NEXT), False),
    "negative, no body": (b"Content-Length: -5\r\n\r\n" + framed(NEXT), False),
    "10^12": (b"Content-Length: 1000000000000\r\n\r\n" + FIRST + framed(NEXT), False),
    "10^20": (b"Content-Length: 100000000000000000000\r\n\r\n" + FIRST + framed(NEXT), False),
    "junk line": (b"hello there\r\n" + framed(FIRST) + framed(NEXT), True),
    "header text in a bad body": (framed(b'{"x": "Content-Length: 5 and more') + framed(NEXT), False),
}


def read_all(stream: bytes, size: int) -> tuple[list[bytes], list[str], int]:
    """The JSON bodies read (bad ones rejected as the daemon does), the problems, the bytes left held."""
    parser = FrameParser()
    bodies: list[bytes] = []
    problems: list[str] = []
    for start in range(0, len(stream), size):
        for event in parser.feed(stream[start : start + size]):
            if isinstance(event, BadFrame):
                problems.append(event.reason)
                continue
            assert isinstance(event, Frame)
            try:
                json.loads(event.body)
            except ValueError:
                problems.append("no JSON")
                parser.reject(event)
                continue
            bodies.append(event.body)
    return bodies, problems, parser.pending


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("size", [1, 3, 7, 1 << 16])
def test_the_next_frame_is_always_read(name: str, size: int) -> None:
    stream, first_read = CASES[name]
    bodies, problems, left = read_all(stream, size)
    assert left == 0
    assert bodies[-1] == NEXT
    if name == "good" or (first_read and size == 1 << 16):  # whole reads: the good and the lenient cases
        assert bodies[0] == FIRST
    if first_read is False:
        assert FIRST not in bodies and problems


def test_a_huge_length_allocates_nothing() -> None:
    parser = FrameParser(max_body=1000)
    events = list(parser.feed(b"Content-Length: 1001\r\n\r\n" + b"x" * 900))
    assert isinstance(events[0], BadFrame) and "1001" in events[0].reason
    assert parser.pending < 20  # the refused body is skipped, not held
