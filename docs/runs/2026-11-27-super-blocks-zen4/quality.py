"""Next-token accuracy and mean negative log-likelihood of real code under two kernel builds (same model, same
tokens): whether quantizing K-quant activations per super-block costs prediction quality. argv: old lib, new lib,
model, files..."""
import sys, statistics
from pathlib import Path
import torch
from lookahead_lsp.decoder.kv import PrefixKV
from lookahead_lsp.decoder.kernels.woq_native import WoqKernel
from lookahead_lsp.decoder.runtime.model import configure_torch_threads, load_model
from lookahead_lsp.decoder.runtime.native_pass import NativePass
from lookahead_lsp.decoder.runtime.row_attention import plan_keys
configure_torch_threads()
lm = load_model(sys.argv[3])
kerns = {"per-group": WoqKernel(Path(sys.argv[1])), "per-super-block": WoqKernel(Path(sys.argv[2]))}
passes = {k: NativePass(lm.model, v) for k, v in kerns.items()}
stats = {k: [0, 0, 0.0] for k in passes}  # correct, total, nll
agree = [0, 0]
for f in sys.argv[4:]:
    ids = lm.tokenizer(Path(f).read_text())["input_ids"][:512]
    tops = {}
    for k, native in passes.items():
        kv = PrefixKV(); logits = []
        for s in range(0, len(ids), 256):
            chunk = ids[s:s + 256]; past = kv.cache.get_seq_length(); rows = list(range(past, past + len(chunk)))
            plan = plan_keys(kerns[k], past, rows, None)
            with torch.inference_mode():
                logits.append(native(kv.cache, chunk, rows, plan))
            kv.append(chunk)
        lg = torch.cat(logits)[:-1]; target = torch.tensor(ids[1:])
        top = lg.argmax(-1); tops[k] = top
        stats[k][0] += int((top == target).sum()); stats[k][1] += len(target)
        stats[k][2] += float(torch.nn.functional.cross_entropy(lg.double(), target, reduction="sum"))
    agree[0] += int((tops["per-group"] == tops["per-super-block"]).sum()); agree[1] += len(tops["per-group"])
    print(Path(f).name, {k: f"{v[0]}/{v[1]}" for k, v in stats.items()}, flush=True)
for k, (c, n, nll) in stats.items():
    print(f"{k}: next token right {c}/{n} ({c / n:.4f}), mean NLL {nll / n:.4f}")
print(f"same top-1 under both: {agree[0]}/{agree[1]} ({agree[0] / agree[1]:.4f})")
