"""Our engine (greedy) on the raw prompt of suite holes: as is, with `<|file_sep|>path` in front, and with the
line's typed indentation (less its last token) after `<|fim_middle|>`; the first token ids and text of each.
Args: suite, model, hole-id fragments (comma-separated)."""
import sys
from lookahead_lsp.evaluation.infill import model_parts, raw_window, fim_prompt_ids
from lookahead_lsp.evaluation.infill_suites import load_suite
from lookahead_lsp.decoder.backend import local_backend
from lookahead_lsp.decoder.runtime.model import configure_torch_threads, load_model, stop_token_ids
from lookahead_lsp.decoder.types import DecodeRequest
configure_torch_threads()
holes = [h for h in load_suite(sys.argv[1]) if any(i in h.id for i in sys.argv[3].split(","))]
loaded = load_model(model_parts(sys.argv[2]).spec); tok = loaded.tokenizer
dec = local_backend(loaded.model, "greedy"); eos = stop_token_ids(tok)
sp = {t: tok.convert_tokens_to_ids(t) for t in ["<|repo_name|>", "<|file_sep|>"]}
def enc(s): return tok(s, add_special_tokens=False)["input_ids"]
for h in holes:
    base = fim_prompt_ids(tok, *raw_window(h.line_start, h.suffix))
    for name, ids in {"raw": base, "file_sep": [sp["<|file_sep|>"], *enc(h.file_name + "\n"), *base],
                      "raw+indent": base + enc(h.prefix[len(h.line_start):])[:-1]}.items():
        new = list(dec.generate(DecodeRequest(ids, 24, eos)).token_ids)
        print(h.id.split(":")[1], name, new[:6], repr(tok.decode(new)[:60]), flush=True)
    print("  canonical split of the line:", enc(h.prefix[len(h.line_start):] + h.middle.split("\n")[0])[:4])
