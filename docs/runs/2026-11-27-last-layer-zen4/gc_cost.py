import gc, sys, time
from lookahead_lsp.decoder.forward import prefill
from lookahead_lsp.decoder.greedy import GreedyDecoder
from lookahead_lsp.decoder.kv import PrefixKV
from lookahead_lsp.decoder.types import DecodeRequest
from lookahead_lsp.decoder.runtime.model import configure_torch_threads, load_model
configure_torch_threads()
lm = load_model(sys.argv[1])
print("tracked objects after load:", len(gc.get_objects()))
for g in (0, 1, 2):
    t = time.perf_counter(); gc.collect(g); print(f"collect({g}): {(time.perf_counter()-t)*1e3:.1f} ms")
spent = {0: [0, 0.0], 1: [0, 0.0], 2: [0, 0.0]}
start = {}
def cb(phase, info):
    if phase == "start": start["t"] = time.perf_counter()
    else:
        s = spent[info["generation"]]; s[0] += 1; s[1] += time.perf_counter() - start["t"]
gc.callbacks.append(cb)
ids = lm.tokenizer(open("./decoder/lookahead.py").read())["input_ids"]
dec = GreedyDecoder(lm.model)
t = time.perf_counter()
for i in range(6):
    dec.generate(DecodeRequest(ids[i*300:i*300+512], max_new_tokens=48))
total = time.perf_counter() - t
print(f"6 completions in {total:.2f} s; gc per generation:", {g: f"{n} runs, {s*1e3:.1f} ms" for g, (n, s) in spent.items()})
