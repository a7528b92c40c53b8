"""Scratch A/B in one process: the native pass's cache room by GrowingCache.make_room (views widened) against
cache.update (the room copied in), interleaved, median of 40 passes of 1 and 2 tokens after a 512-token prefill."""
import statistics, sys, time
from lookahead_lsp.decoder.forward import prefill, masked_pass
from lookahead_lsp.decoder.kv import GrowingCache, PrefixKV
from lookahead_lsp.decoder.runtime.model import configure_torch_threads, load_model
configure_torch_threads()
grow = GrowingCache.make_room
for spec in sys.argv[1].split(","):
    lm = load_model(spec)
    ids = lm.tokenizer(open("/work/main/decoder/lookahead.py").read())["input_ids"][:512]
    kv = PrefixKV(); prefill(lm.model, kv, ids)
    for k in (1, 2):
        times = {"update": [], "make_room": []}
        for rep in range(40):
            for name in (("update", "make_room") if rep % 2 else ("make_room", "update")):
                if name == "update":
                    GrowingCache.make_room = None
                else:
                    GrowingCache.make_room = grow
                t = time.perf_counter(); masked_pass(lm.model, kv, k); times[name].append(time.perf_counter() - t)
        GrowingCache.make_room = grow
        u, m = statistics.median(times["update"]) * 1e3, statistics.median(times["make_room"]) * 1e3
        print(f"{spec} k={k}: update {u:.2f} ms, make_room {m:.2f} ms, speed {u / m:.3f}x")
