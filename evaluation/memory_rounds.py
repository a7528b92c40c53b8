"""Resident memory of a daemon over rounds of documents opened, typed into and closed (issue 21).

``lookahead-lsp bench-memory --model DIR`` starts ``lookahead-lsp serve``, then in each round opens
``--docs`` documents, types ``--keys`` characters into each (a completion request after every key) and closes
them all, and prints the daemon's resident memory (VmRSS) after each round. A flat curve means closed
documents give back what they held; a bounded benchmark, not a test (it asserts nothing).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from lookahead_lsp.evaluation.lsp_client import LspClient

SOURCE = "import os\n\n\ndef helper_{n}(path):\n    return os.path.join(path, 'x')\n\n\ndef main_{n}():\n    "
TYPED = "value = helper_"


def rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))) / 1024


def one_round(client: LspClient, round_no: int, docs: int, keys: int, complete_every: int) -> None:
    uris = [f"file:///tmp/memory-rounds/r{round_no}/doc{d}.py" for d in range(docs)]
    for d, uri in enumerate(uris):
        client.open(uri, SOURCE.format(n=d))
    for k in range(keys):
        char = TYPED[k % len(TYPED)]
        for d, uri in enumerate(uris):
            line, column = 8, 4 + k
            change = {
                "range": {"start": {"line": line, "character": column}, "end": {"line": line, "character": column}},
                "text": char,
            }
            client.change(uri, k + 2, [change])
            if d % complete_every == 0:
                client.inline(uri, line, column + 1)
    for uri in uris:
        client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})


def run_rounds(model: str, rounds: int, docs: int, keys: int, complete_every: int) -> int:
    """Print the daemon's resident memory when ready and after each round; 1 if the model never got ready."""
    with tempfile.TemporaryDirectory() as tmp:
        client = LspClient(stderr_path=Path(tmp) / "server.log")
        try:
            client.initialize(None, {"model": model, "maxNewTokens": 8, "indexEnabled": False})
            state = client.wait_model()
            if state["state"] != "ready":
                print(f"model not ready: {state}", file=sys.stderr)
                return 1
            print(f"round 0 (ready): {rss_mb(client.process.pid):.0f} MB", flush=True)
            for r in range(1, rounds + 1):
                one_round(client, r, docs, keys, complete_every)
                time.sleep(3)  # closing settles (index updates, memory given back)
                client.command("lookahead.stats")  # everything before it has been handled
                print(f"round {r}: {rss_mb(client.process.pid):.0f} MB", flush=True)
        finally:
            client.close()
    return 0
