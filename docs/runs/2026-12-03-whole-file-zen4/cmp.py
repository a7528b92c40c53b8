"""Compare a new daemon run against the recorded raw side (and the old daemon) hole by hole."""
import gzip, json, sys
def load(path):
    op = gzip.open if path.endswith(".gz") else open
    return json.load(op(path))["holes"]
new_path, raw_paths, old_paths, suite = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(","), sys.argv[4]
new = {h["hole"]: h for h in load(new_path) if h["suite"] == suite and h["side"].startswith("daemon")}
raw = {h["hole"]: h for p in raw_paths for h in load(p) if h["suite"] == suite and h["side"] == "raw"}
old = {h["hole"]: h for p in old_paths for h in load(p) if h["suite"] == suite and h["side"] == "daemon"}
def tot(d, key): return sum(bool(h["score"][key]) for h in d.values())
print(suite, "new daemon", tot(new, "exact"), "/", tot(new, "passed"), "empty", tot(new, "empty"), "| old daemon", tot(old, "exact"), "/", tot(old, "passed"), "| raw", tot(raw, "exact"), "/", tot(raw, "passed"), "n", len(new), len(old), len(raw))
for key in ("exact", "passed"):
    lost = [k.split(":")[1] for k in new if k in raw and raw[k]["score"][key] and not new[k]["score"][key]]
    won = [k.split(":")[1] for k in new if k in raw and new[k]["score"][key] and not raw[k]["score"][key]]
    print(f"  {key}: raw only {len(lost)} {lost}\n  {key}: daemon only {len(won)} {won}")
