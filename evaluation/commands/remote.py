"""`lookahead-lsp bench remote`: the local decoder against a remote engine (llama.cpp's server on the embedded
GGUF unless ``--url``), keystroke to completion, through the daemon or the decoder API
(``evaluation/remote_bench.py``)."""

from __future__ import annotations

import argparse

from lookahead_lsp.evaluation import remote_bench
from lookahead_lsp.lsp_server.model_host import chosen_spec


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--via", choices=("lsp", "decoder"), default="lsp", help="through the daemon or the API")
    parser.add_argument("--holes", type=int, default=2, help="holes (typing sessions) to replay (default: 2)")
    parser.add_argument("--corpus", default=None, help="lsp: the workspace (default: the pathspec package)")
    parser.add_argument("--file", default="gitignore.py", help="lsp: the file to type in (default: gitignore.py)")
    parser.add_argument("--pause", type=float, default=2.0, help="lsp: seconds between opening and typing")
    parser.add_argument("--workload", default="fim", help="decoder: workload to cut holes from (default: fim)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keystrokes", type=int, default=6, help="requests (keys) per hole (default: 6)")
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--token-budget", type=int, default=1024)
    parser.add_argument("--backends", default="lookahead,remote", help="lookahead, greedy, remote (comma-separated)")
    parser.add_argument("--url", default=None, help="use this running engine instead of starting llama.cpp's")
    parser.add_argument("--model", default="embedded", help="the embedded model both sides run (or embedded-1.5b)")
    parser.add_argument("--model-name", default="", help="the remote engine's model name (vLLM needs it)")
    parser.add_argument("--threads", type=int, default=1, help="threads of llama-server (default: 1)")
    parser.add_argument("--out", default=None, help="report directory (default: .artifacts/remote-bench)")


def run(args: argparse.Namespace) -> int:
    args.model = chosen_spec(args.model)  # "auto": the embedded model the daemon would load
    return remote_bench.run(args)
