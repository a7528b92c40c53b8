import time
from lookahead_lsp.decoder.runtime.model import load_model
from lookahead_lsp.decoder.runtime.footprint import tensor_footprint
from lookahead_lsp.evaluation.stream_read import stream_read_rate
from lookahead_lsp.decoder.forward import timing_cache, masked_pass
for spec in ("embedded-1.5b", "embedded"):
    m = load_model(spec).model
    fp = tensor_footprint(m)
    per_pass = fp["codes"] + fp["head"]
    kv = timing_cache(m, 256)
    best = 9.0
    rates = []
    for _ in range(3):
        rates.append(stream_read_rate())
        for _ in range(4):
            t = time.perf_counter(); masked_pass(m, kv, 1); best = min(best, time.perf_counter() - t)
    r = max(rates)
    print(f"{spec}: footprint {({k: round(v/1e6) for k, v in fp.items()})} MB; read per one-token pass {per_pass/1e6:.0f} MB; "
          f"stream read best {r:.1f} GB/s -> floor {per_pass/r/1e6:.1f} ms; one-token pass best {best*1e3:.1f} ms", flush=True)
    del m
