import time, sys
from lookahead_lsp.decoder.forward import prefill
from lookahead_lsp.decoder.kv import PrefixKV
from lookahead_lsp.decoder.kernels.woq_native import native_kernel
from lookahead_lsp.decoder.runtime.model import configure_torch_threads, load_model
from lookahead_lsp.decoder.runtime.native_pass import native_pass
configure_torch_threads()
lm = load_model(sys.argv[1])
native = native_pass(lm.model, native_kernel())
ids = lm.tokenizer(open("./decoder/lookahead.py").read())["input_ids"][:512]
for i in range(int(sys.argv[2])):
    kv = PrefixKV()
    t=time.perf_counter(); prefill(lm.model, kv, ids); print("prefill 512: %.0f ms" % ((time.perf_counter()-t)*1e3), flush=True)
