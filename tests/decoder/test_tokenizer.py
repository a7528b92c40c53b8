"""decoder/runtime/tokenizer.py: a converted directory's tokenizer read from its tokenizer.json alone is transformers'
Qwen2 tokenizer in every way the daemon uses one, and other sources keep AutoTokenizer."""

from __future__ import annotations

import shutil
from pathlib import Path

from transformers import AutoTokenizer, PreTrainedTokenizerFast

from lookahead_lsp.decoder.runtime.tokenizer import CONVERTED_SOURCES, load_tokenizer

ROOT = Path(__file__).resolve().parents[2]
ODD = [
    "<|fim_prefix|>def f(x):\n<|fim_suffix|>\n    return y<|fim_middle|>",
    "<|repo_name|>a/b\n<|file_sep|>src/x.py\n<|endoftext|>",
    " héllo wörld 日本語 \t\r\n  x = 1e-3  # ✓ \u200b",
    "\n\n\n    \t\t  \n",
    "",
]


def test_a_converted_tokenizer_read_from_its_file_is_the_same_tokenizer(embedded_hf_dir: Path) -> None:
    lean = load_tokenizer(str(embedded_hf_dir), "embedded-cache")
    full = AutoTokenizer.from_pretrained(str(embedded_hf_dir), local_files_only=True)
    assert type(lean) is PreTrainedTokenizerFast and type(lean) is not type(full)
    texts = [p.read_text(encoding="utf-8") for p in sorted(ROOT.glob("*/*.py"))] + ODD
    assert len(texts) > 50
    for text in texts:
        ids = full(text).input_ids
        assert lean(text).input_ids == ids
        assert lean.decode(ids) == full.decode(ids)
        assert lean.convert_ids_to_tokens(ids[:64]) == full.convert_ids_to_tokens(ids[:64])
    assert lean.get_vocab() == full.get_vocab() and len(lean) == len(full)
    assert lean.added_tokens_decoder == full.added_tokens_decoder
    for name in ("eos_token_id", "pad_token_id", "bos_token_id", "all_special_ids"):
        assert getattr(lean, name) == getattr(full, name), name


def test_other_sources_keep_auto_tokenizer(embedded_hf_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "hf-dir"
    shutil.copytree(embedded_hf_dir, copy, ignore=shutil.ignore_patterns("*.safetensors"))
    for source in ("hf-dir", "hf-id"):
        assert source not in CONVERTED_SOURCES
        assert type(load_tokenizer(str(copy), source)) is not PreTrainedTokenizerFast
    assert type(load_tokenizer(str(copy), "gguf-cache")) is PreTrainedTokenizerFast
