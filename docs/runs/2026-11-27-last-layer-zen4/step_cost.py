"""Per lookahead step: its whole time against its forward pass's time, by tokens in the pass (bench CLI, patched)."""
import sys, time, atexit, collections
from lookahead_lsp.decoder import lookahead
S = collections.defaultdict(lambda: [0, 0.0, 0.0])
cur = {}
f_forward = lookahead.forward
def fwd(model, kv, tokens, *a, **k):
    t = time.perf_counter(); r = f_forward(model, kv, tokens, *a, **k); r[0, 0].item()
    cur["pass"] = time.perf_counter() - t; cur["n"] = len(tokens); return r
lookahead.forward = fwd
f_plain = lookahead.plain_step
def plain(model, kv, gen):
    t = time.perf_counter(); r = f_plain(model, kv, gen); cur["pass"] = time.perf_counter() - t; cur["n"] = 1; return r
lookahead.plain_step = plain
f_step = lookahead._Run.step
def step(self):
    cur.clear(); t = time.perf_counter(); r = f_step(self); whole = time.perf_counter() - t
    if "n" in cur:
        s = S[(cur["n"], "plain" if len(r) == 1 and cur["n"] == 1 else "drafted")]; s[0] += 1; s[1] += whole; s[2] += cur["pass"]
    return r
lookahead._Run.step = step
@atexit.register
def report():
    for (n, kind), (c, w, p) in sorted(S.items()):
        print(f"n={n:2d} {kind:7s} steps {c:4d}: step {w*1e3/c:6.2f} ms, pass {p*1e3/c:6.2f} ms, outside the pass {(w-p)*1e3/c:5.2f} ms", file=sys.stderr)
from lookahead_lsp.lsp_server.cli import main
sys.argv = ["lookahead-lsp"] + sys.argv[1:]
main()
