"""Resident memory of a daemon over rounds of documents opened, typed into and closed (issue 21).

``python -m evaluation.memory_rounds --model DIR`` starts ``lookahead-lsp serve``, then in each round opens
``--docs`` documents, types ``--keys`` characters into each (a completion request after every key) and closes
them all, and prints the daemon's resident memory (VmRSS) after each round. A flat curve means closed
documents give back what they held; a bounded benchmark, not a test (it asserts nothing).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from evaluation.lsp_client import LspClient

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
            change = {"range": {"start": {"line": line, "character": column},
                                "end": {"line": line, "character": column}}, "text": char}
            client.change(uri, k + 2, [change])
            if d % complete_every == 0:
                client.inline(uri, line, column + 1)
    for uri in uris:
        client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="embedded", help="model setting (a directory, e.g. the tiny test model)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--docs", type=int, default=20)
    parser.add_argument("--keys", type=int, default=21)
    parser.add_argument("--complete-every", type=int, default=4, help="a completion after each key in every Nth doc")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        client = LspClient(stderr_path=Path(tmp) / "server.log")
        try:
            client.initialize(None, {"model": args.model, "maxNewTokens": 8, "indexEnabled": False})
            model = client.wait_model()
            if model["state"] != "ready":
                print(f"model not ready: {model}", file=sys.stderr)
                return 1
            print(f"round 0 (ready): {rss_mb(client.process.pid):.0f} MB", flush=True)
            for r in range(1, args.rounds + 1):
                one_round(client, r, args.docs, args.keys, args.complete_every)
                time.sleep(3)  # closing settles (index updates, memory given back)
                client.command("lookahead.stats")  # everything before it has been handled
                print(f"round {r}: {rss_mb(client.process.pid):.0f} MB", flush=True)
        finally:
            client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
