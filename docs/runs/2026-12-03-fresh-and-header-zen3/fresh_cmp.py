"""Shared daemon against a fresh daemon per document, from two `eval infill --out` runs of one suite:
SHARED (every hole, one daemon; its answers name the other files whose sections the prompt held) and
FRESH (`--fresh --only` the holes whose shared prompt held another file's section). Elsewhere a fresh
daemon's prompt is the shared one's, so its answer there is taken as the shared one's.
Usage: python fresh_cmp.py java15.json.gz java15-fresh.json.gz (or the .json of `eval infill --out`)"""
import gzip
import json
import sys


def load(path):
    return json.load((gzip.open if path.endswith(".gz") else open)(path))["holes"]



shared = {h["hole"]: h for h in load(sys.argv[1]) if h["side"] == "daemon"}
fresh = {h["hole"]: h for h in load(sys.argv[2]) if h["side"].startswith("daemon")}
held = [k for k, h in shared.items() if h["answer"].get("context")]
missing = sorted(set(held) - set(fresh))
assert not missing, f"fresh run lacks {missing}"
merged = {k: fresh.get(k, h) if k in held else h for k, h in shared.items()}
n = len(shared)
for name, run in (("shared", shared), ("fresh", merged)):
    exact = sum(h["score"]["exact"] for h in run.values())
    ran = [h["score"]["passed"] for h in run.values() if h["score"]["passed"] is not None]
    empty = sum(h["score"]["empty"] for h in run.values())
    print(f"{name}: exact {exact}/{n} ({100*exact/n:.1f}%), pass@1 {sum(ran)}/{len(ran)} ({100*sum(ran)/max(1,len(ran)):.1f}%), empty {empty}")
print(f"holes whose shared prompt held another file's section: {len(held)}")
for k in held:
    s, f = shared[k], merged[k]
    mark = "" if (s["score"]["exact"], s["score"]["passed"]) == (f["score"]["exact"], f["score"]["passed"]) else "  <- differs"
    print(f"  {k}: context {s['answer']['context']}; shared exact={s['score']['exact']} pass={s['score']['passed']} "
          f"{s['answer']['text'].splitlines()[0] if s['answer']['text'].strip() else '(empty)'!r}; fresh exact={f['score']['exact']} "
          f"pass={f['score']['passed']} {f['answer']['text'].splitlines()[0] if f['answer']['text'].strip() else '(empty)'!r}{mark}")
