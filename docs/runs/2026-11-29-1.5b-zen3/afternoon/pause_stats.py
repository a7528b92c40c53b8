"""One daemon, chosen pause holes, print each completion's stats."""
import sys, json, tempfile
from pathlib import Path
from lookahead_lsp.evaluation import lsp_replay as R
from lookahead_lsp.evaluation.workloads import Corpus
corpus = Corpus.load(sys.argv[1]); model = sys.argv[2]; want = sys.argv[3].split(",") if len(sys.argv) > 3 else None
holes = R.pause_holes(corpus, 20)
if want: holes = [h for h in holes if any(w in h.id for w in want)]
with tempfile.TemporaryDirectory() as tmp:
    root = R._workspace_copy(corpus, tmp)
    client = R._start_daemon(root, {"model": model, "maxNewTokens": 64})
    try:
        for h in holes:
            seen = len(client.notifications)
            p = R.pause_at(client, root, h, "progressive")
            st = [m["params"] for m in client.notifications[seen:] if m["method"] == R.STATS]
            for s in st:
                print(h.id, [ (round(t,2), len(x)) for t,x in p.shown], json.dumps({k: s.get(k) for k in ("prefilledTokens","newTokens","steps","acceptedPerStep","latencyMs","tokensBySource","finishReason")}), flush=True)
    finally:
        client.close()
