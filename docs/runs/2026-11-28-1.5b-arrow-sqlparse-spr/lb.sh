#!/bin/bash
# llama-bench on the 1.5B's GGUF with one CPU backend at a time (run from the repository root after
# scripts/get-engine.sh and scripts/setup.sh --model-1.5b): a copy of the binary beside only that backend's library.
set -e
T=$PWD/.tools/llama
BIN=$T~/usr/bin
LIBS=$T~/usr/lib/x86_64-linux-gnu
for be in sapphirerapids icelake zen4; do
    D=${TMPDIR:-/tmp}/lb-$be
    mkdir -p "$D"
    cp -f "$BIN/llama-bench" "$D/"
    ln -sf "$BIN/libggml-cpu-$be.so" "$D/"
    echo "== $be"
    LD_LIBRARY_PATH=$LIBS:$LIBS/llama:$LIBS/ggml "$D/llama-bench" -m .tools/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \
        -t 2 -r 2 -p 512 -n 32 2>&1 | grep -E "pp|tg" | tail -2
done
