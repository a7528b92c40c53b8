"""Usage: python prompts-cut.py humaneval-java,humaneval-js,humaneval-single (the tokenizer: this machine's cache of the embedded model).
First prompts at 512 tokens as the daemon's CPU builder makes them (psm-line, healing, anchored, the workspace
named as eval infill names it, no other file's section): how many hold their file whole."""
import glob
import sys
from transformers import AutoTokenizer
from lookahead_lsp.evaluation.infill_suites import load_suite
from lookahead_lsp.context.prompt import layout_builder, PromptInput
tok = AutoTokenizer.from_pretrained(glob.glob("/root/.cache/lookahead-lsp/converted-v2/*/")[0])
for suite in sys.argv[1].split(","):
    holes = load_suite(suite)
    b = layout_builder(tok, "psm-line", 512, True, anchored=True)
    whole = cut = 0
    for h in holes:
        text = h.prefix + h.suffix
        p = b.build(PromptInput(h.file_name, text, len(h.prefix), suite))
        if p.prefix_line == 0 and len(p.suffix_text) == len(h.suffix): whole += 1
        else: cut += 1
    print(suite, "whole", whole, "cut", cut)
