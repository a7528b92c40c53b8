"""Which holes' snippets change when the relevance bar skips terms most other files hold (new) or not (old),
indexed as a shared daemon has them (the suite's earlier problems). Args: suites (comma-separated), and optionally
hole-id fragments to print the snippets of."""
import sys
from lookahead_lsp.evaluation.infill_suites import load_suite
from lookahead_lsp.context import snippets
from lookahead_lsp.context.snippets import SnippetIndex
lost = set(sys.argv[2].split(",")) if len(sys.argv) > 2 else set()
for suite in sys.argv[1].split(","):
    holes = load_suite(suite)
    idx = SnippetIndex()
    changed = withsnip_old = withsnip_new = 0
    for h in holes:
        text = h.prefix + h.suffix; off = len(h.prefix)
        got = {}
        for name, floor in (("old", 10**9), ("new", 8)):
            snippets.COMMON_MIN_FILES = floor
            got[name] = [(s.path, s.start_line) for s in idx.query_at(text, off, exclude_path=h.file_name)]
        changed += got["old"] != got["new"]; withsnip_old += bool(got["old"]); withsnip_new += bool(got["new"])
        if any(l in h.id for l in lost):
            print(" ", h.id, "old:", got["old"], "new:", got["new"])
        idx.add_document(h.file_name, text)
    print(suite, "holes", len(holes), "changed", changed, "with snippets old", withsnip_old, "new", withsnip_new)
