"""The last completion as a draft source in the daemon itself, with the embedded 0.5B: the daemon's engine and
completion pipeline (lsp_server/pipeline.py: complete, no deadlines), a lookahead engine beside a greedy one, on
arrow's bench holes. At each hole whose first completion's first line is wrong, the real line is typed and both
engines complete again; prints what each second completion's drafts committed by source and whether it equals
greedy's. argv: the corpus (`<sdist>/arrow-1.4.0/arrow`)."""

import argparse
import sys
from pathlib import Path

from replay import retyped  # this folder's

from lookahead_lsp.decoder.types import CancelToken
from lookahead_lsp.evaluation.commands import bench
from lookahead_lsp.lsp_server.config import Config
from lookahead_lsp.lsp_server.documents import Document
from lookahead_lsp.lsp_server.engine import Engine
from lookahead_lsp.lsp_server.pipeline import Snapshot, complete

root = Path(sys.argv[1])
p = argparse.ArgumentParser()
bench.add_arguments(p)
a = p.parse_args(["--corpus", str(root), "--workload", "fim,repo", "--holes", "10"])
corpus, holes = bench.load_holes(a)
engines = {}
for dec in ("lookahead", "greedy"):
    cfg = Config(
        model="embedded",
        decoder=dec,
        index_enabled=False,
        max_new_tokens=48,
        multiline_deadline_ms=None,
        line_deadline_ms=None,
        line_cap_ms=None,
    )
    engines[dec] = Engine(cfg, [root], watch=False)
    engines[dec].load_now()


def at(h, dec):
    """The daemon's completion of hole ``h`` (its middle not yet typed) on engine ``dec``."""
    doc = Document((root / h.path).as_uri(), h.prefix + h.suffix, language_id="python")
    return complete(Snapshot(doc, len(h.prefix), "r"), engines[dec], CancelToken())


hits = tokens = same = n = 0
for hole in holes:
    second = retyped(hole)
    if second is None:
        continue
    first = at(hole, "lookahead")
    at(hole, "greedy")  # each engine keeps its own last completion
    typed = hole.middle[: len(hole.middle) - len(second.middle)]
    if first.text.startswith(typed):
        continue
    s_l, s_g = at(second, "lookahead"), at(second, "greedy")
    n += 1
    same += s_l.token_ids == s_g.token_ids
    hits += s_l.decode.hits_by_source.get("previous", 0)
    tokens += s_l.decode.tokens_by_source.get("previous", 0)
    print(second.id, dict(s_l.decode.tokens_by_source), s_l.token_ids == s_g.token_ids, flush=True)
print(f"second completions {n}, identical to greedy {same}, steps won by 'previous' {hits}, tokens {tokens}")
