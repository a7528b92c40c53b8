"""Which other files' windows pass the relevance bar at a hole, indexed as the shared daemon had them (the
suite's earlier problems), and whether by defining a name the cursor's code uses (``wanted``, as ``_scores``)."""
import sys
from lookahead_lsp.evaluation.infill_suites import load_suite
from lookahead_lsp.context.snippets import SnippetIndex, query_bounds, code_only, terms, defined_names
suite, target = sys.argv[1], sys.argv[2]
holes = load_suite(suite)
idx = SnippetIndex()
for h in holes:
    if h.id == target:
        break
    idx.add_document(h.file_name, h.prefix + h.suffix)
text = h.prefix + h.suffix; off = len(h.prefix)
snips = idx.query_at(text, off, exclude_path=h.file_name)
start, end = query_bounds(text, off)
code = code_only(text, h.file_name, start, end)
wanted = set(terms(code)) - defined_names(code)
print(target, "docs before:", len(idx._by_path), "snippets:", len(snips))
for s in snips:
    ch = [c for c in idx._chunks.values() if c.path == s.path and c.start_line == s.start_line]
    defs = ch[0].defines & wanted if ch else None
    print(" ", s.path, s.start_line, round(s.score,2), "defines wanted:", defs)
