import statistics, sys, time
from lookahead_lsp.decoder.forward import prefill
from lookahead_lsp.decoder.kv import PrefixKV
from lookahead_lsp.decoder.runtime.model import configure_torch_threads, load_model
configure_torch_threads()
lm = load_model(sys.argv[1])
ids = lm.tokenizer(open("./decoder/lookahead.py").read())["input_ids"][:512]
sizes = [int(s) for s in sys.argv[2].split(",")]
times = {s: [] for s in sizes}
for rep in range(int(sys.argv[3])):
    for s in (sizes if rep % 2 else sizes[::-1]):
        t = time.perf_counter(); prefill(lm.model, PrefixKV(), ids, chunk_size=s); times[s].append(time.perf_counter() - t)
for s in sizes:
    print(f"chunk {s}: median {statistics.median(times[s])*1e3:.0f} ms")
