"""The multi-line suite's raw answers cut to the reference's line count (an oracle length the raw side lacks):
what the raw model's block scores when told where to stop."""
import gzip, json, sys
from lookahead_lsp.evaluation.infill_suites import Answer, load_suite, score_answer
path = sys.argv[1]
opener = gzip.open if path.endswith(".gz") else open
data = json.load(opener(path, "rt"))
holes = {h.id: h for h in load_suite("humaneval-multi")}
totals = {}
for row in data["holes"]:
    hole = holes[row["score"]["hole_id"]]
    a = row["answer"]
    text = a["text"]
    if row["side"] == "raw":
        n = len((hole.indent + hole.middle).rstrip("\n").split("\n"))
        text = "\n".join(text.split("\n")[:n])
    s = score_answer(hole, Answer(text, a["at_line_start"]))
    t = totals.setdefault(row["side"], [0, 0, 0])
    t[0] += s.exact; t[1] += bool(s.passed); t[2] += 1
print({k: f"exact {v[0]}, pass@1 {v[1]}/{v[2]}" for k, v in totals.items()})
