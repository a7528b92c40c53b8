"""`lookahead-lsp serve`: run the LSP daemon over stdio (default) or TCP on 127.0.0.1.

In stdio mode the protocol gets a private duplicate of file descriptor 1, and descriptor 1 itself (and
``sys.stdout``) is pointed at stderr: a stray ``print`` or a library writing to stdout cannot corrupt
the protocol stream.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import BinaryIO

from lookahead_lsp.lsp_server import memory
from lookahead_lsp.lsp_server.server import SERVER


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stdio", action="store_true", help="speak LSP over stdin/stdout (the default)")
    parser.add_argument("--tcp", action="store_true", help="listen on 127.0.0.1 instead of stdio")
    parser.add_argument("--port", type=int, default=2087, help="TCP port (default 2087)")


def _protocol_stdout() -> BinaryIO:
    """A private stream onto the real stdout; fd 1 and sys.stdout now go to stderr."""
    sys.stdout.flush()
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(protocol_fd, "wb")


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    memory.bound_kernel_caches()  # before the model's first pass: a long session's kernels stay bounded
    memory.bound_allocator()  # before threads start: glibc's slack stays small
    # The model worker runs Python between torch calls; hand the GIL back to the event loop sooner.
    sys.setswitchinterval(0.001)
    try:
        if args.tcp:
            SERVER.start_tcp("127.0.0.1", args.port)
        else:
            SERVER.start_io(sys.stdin.buffer, _protocol_stdout())
    except SystemExit:  # the exit notification in TCP mode
        pass
    finally:
        SERVER.stop()
    return 0 if SERVER.shutdown_requested or SERVER.terminated else 1
