"""Token-id decoding: model loading, plain greedy and lossless lookahead decoding, KV reuse."""
