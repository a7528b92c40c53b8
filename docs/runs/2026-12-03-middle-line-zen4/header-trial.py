import sys
from lookahead_lsp.evaluation.infill import model_parts, raw_window, fim_prompt_ids
from lookahead_lsp.evaluation.infill_suites import load_suite
from lookahead_lsp.decoder.backend import local_backend
from lookahead_lsp.decoder.runtime.model import configure_torch_threads, load_model, stop_token_ids
from lookahead_lsp.decoder.types import DecodeRequest
configure_torch_threads()
model, suite, ids_arg = sys.argv[1], sys.argv[2], sys.argv[3]
holes = {h.id: h for h in load_suite(suite)}
want = [holes[i] for i in ids_arg.split(",")] if ids_arg != "all" else list(holes.values())
loaded = load_model(model_parts(model).spec)
tok = loaded.tokenizer
eos = stop_token_ids(tok)
dec = local_backend(loaded.model, "greedy")
def line_end(new):
    return len(new) if "\n" in tok.decode(new[-1:]) else None
sp = {t: tok.convert_tokens_to_ids(t) for t in ["<|repo_name|>", "<|file_sep|>"]}
def enc(s): return tok(s, add_special_tokens=False)["input_ids"]
score = {}
for h in want:
    base = fim_prompt_ids(tok, *raw_window(h.line_start, h.suffix))
    variants = {
        "raw": base,
        "repo+file": [sp["<|repo_name|>"], *enc("fresh-0\n"), sp["<|file_sep|>"], *enc(h.file_name + "\n"), *base],
    }
    out = []
    for name, ids in variants.items():
        new = dec.generate(DecodeRequest(ids, 48, eos, stop=line_end)).token_ids
        text = tok.decode(list(new))
        ok = text.strip() == h.middle.strip()
        score[name] = score.get(name, 0) + ok
        out.append(f"{name}:{'Y' if ok else 'n'} {text.strip()[:50]!r}")
    print(h.id.split(":")[1], " | ".join(out), flush=True)
print(score)
