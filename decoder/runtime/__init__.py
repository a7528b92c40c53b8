"""runtime: a model loaded and run: loading, its linear layers on packed weights, attention, the native pass.

Owns loading a model from a spec (model), the model's matrix products on the GGUF's own blocks (packed_model,
packed_linear, woq_layer) or through oneDNN (cpu_linear), attention with a custom mask (attention,
row_attention), the decoding pass written out on the native kernels (native_pass) and the cheaper prefill model
(prefill). May import ``decoder.kernels`` and ``decoder.weights``; never the decoders above it.
"""
