import sys
from lookahead_lsp.decoder.forward import prefill, masked_pass
from lookahead_lsp.decoder.kv import PrefixKV
from lookahead_lsp.decoder.kernels.woq_native import native_kernel
from lookahead_lsp.decoder.runtime.model import configure_torch_threads, load_model
from lookahead_lsp.decoder.runtime.native_pass import native_pass
configure_torch_threads(int(sys.argv[4]) if len(sys.argv) > 4 else None)
lm = load_model(sys.argv[1]); native_pass(lm.model, native_kernel())
ids = lm.tokenizer(open("./decoder/lookahead.py").read())["input_ids"][:512]
kv = PrefixKV(); prefill(lm.model, kv, ids)
import time; t = time.perf_counter()
for _ in range(int(sys.argv[3])): masked_pass(lm.model, kv, int(sys.argv[2]))
print("pass ms %.2f" % ((time.perf_counter() - t) * 1e3 / int(sys.argv[3])))
