import sys, json, statistics
for f in sys.argv[1:]:
    firsts, per_step, per_tok = [], [], []
    for line in open(f):
        hole, rest = line.split(" [", 1)
        shown, js = rest.split("] ", 1)
        t = eval("[" + shown + "]")
        d = json.loads(js)
        firsts.append(t[0][0])
        if d["steps"]: per_step.append(d["latencyMs"]["decode"] / d["steps"])
    s = sorted(firsts)
    print(f, "n", len(s), "first ghost p50(lower) %.2f" % s[(len(s)-1)//2], "mean %.2f" % statistics.mean(s), "decode ms/step median %.0f" % statistics.median(per_step))
