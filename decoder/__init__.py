"""decoder: token ids in, token ids out: plain greedy and lossless lookahead decoding, and what they share.

The decoder is four rooms, each importing only from the rooms below it (tests/test_package_graph.py checks it):

- ``decoder/weights/`` (lowest): model files and what they hold: the cache directory, GGUF blocks and tensor
  names, the conversion of a GGUF into a transformers directory, the embedded models. Imports no other room.
- ``decoder/kernels/``: the native CPU kernels: the C++ sources, their build for the CPU's instruction-set level,
  the ctypes binding and the weight layout they read. Imports weights.
- ``decoder/runtime/``: a model loaded and run: loading, packed and native linear layers, attention, the native
  decoding pass, the prefill model. Imports kernels and weights.
- ``decoder/`` itself (highest): the decoders and what they share: the forward pass and prefill through the
  model's interface (forward), greedy, lookahead, steps, drafts, tree, policy, kv, types, backend, remote.
  Imports any room.

Nothing outside ``lookahead_lsp.decoder`` is imported here except third-party libraries: context, lsp_server
and evaluation build on the decoder, never the reverse.
"""
