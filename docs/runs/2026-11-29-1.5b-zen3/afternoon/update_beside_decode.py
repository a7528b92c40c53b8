"""A greedy decode of the 1.5B alone, and with one document update of a 180 KB file (snippets + tokens + n-grams)
started beside it, as the daemon's document-updates thread runs it: how much longer the decode takes."""
import sys, time, threading, statistics
from pathlib import Path
from lookahead_lsp.decoder.runtime.model import load_model, stop_token_ids
from lookahead_lsp.decoder.greedy import GreedyDecoder
from lookahead_lsp.decoder.types import DecodeRequest
from lookahead_lsp.context.snippets import SnippetIndex
from lookahead_lsp.context.workspace_index import WorkspaceIndex
loaded = load_model(sys.argv[1])
tok = loaded.tokenizer
root = Path(sys.argv[2])  # the arrow 1.4.0 sdist
big = root / "tests/test_locales.py"
text = big.read_text()
snip = SnippetIndex()
ws = WorkspaceIndex.for_tokenizer([root / "tests"], tok)
ws.build()
prompt = tok(text[:3000], add_special_tokens=False)["input_ids"][:480]
dec = GreedyDecoder(loaded.model)
eos = stop_token_ids(tok)
upd = []
def update(i):
    t0 = time.perf_counter()
    snip.add_document("tests/test_locales.py", text + f"#{i}\n")
    ws.update_document(big, text + f"#{i}\n")
    upd.append(time.perf_counter() - t0)
def decode():
    dec.slots.reset()
    dec.generate(DecodeRequest(prompt, max_new_tokens=1, eos_ids=frozenset()))  # prefill, not timed
    t = time.perf_counter()
    dec.generate(DecodeRequest(prompt + [0][:0], max_new_tokens=16, eos_ids=frozenset()))
    return time.perf_counter() - t
t = time.perf_counter(); update(0); print("one update alone: %.0f ms" % ((time.perf_counter() - t) * 1e3))
alone, beside = [], []
for i in range(1, 7):
    alone.append(decode())
    th = threading.Thread(target=update, args=(i,))
    th.start(); beside.append(decode()); th.join()
print("16 tokens alone: median %.0f ms; with an update started beside it: median %.0f ms (%.2fx)" % (
    statistics.median(alone) * 1e3, statistics.median(beside) * 1e3, statistics.median(beside) / statistics.median(alone)))
print("updates: alone %.0f ms, beside the decodes %s ms" % (upd[0]*1e3, [round(u*1e3) for u in upd[1:]]))
