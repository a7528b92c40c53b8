#!/usr/bin/env bash
# Builds the kernel as it was at commit 0ad1399 (before Q6_K's own layout and the compact K-quant heads) at the
# level this process runs, and compares it with the current one on every matrix of a GGUF:
#   bash docs/runs/2026-11-26-gguf-own-bytes/run.sh GGUF [ROUNDS] [LEVEL]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
gguf="$1" rounds="${2:-7}" level="${3:-avx2}"
old="$(mktemp -d)"
trap 'rm -rf "$old"' EXIT
for name in woq_kernel.cpp row_kernel.cpp layer_kernel.cpp native_math.h woq_layout.py; do
    git -C "$root" show "0ad1399:decoder/kernels/$name" > "$old/$name"
done
flags="$("$root/.venv/bin/python" -c "
from lookahead_lsp.decoder.kernels.woq_native import compile_flags, library_flags
print(' '.join(compile_flags('$level') + library_flags()))")"
g++ $flags -o "$old/woq-before.so" "$old/woq_kernel.cpp" "$old/row_kernel.cpp" "$old/layer_kernel.cpp"
export LOOKAHEAD_LSP_NATIVE_ISA="$level"
"$root/.venv/bin/python" "$root/docs/runs/2026-11-26-gguf-own-bytes/compare.py" "$gguf" "$old/woq-before.so" "$old/woq_layout.py" "$rounds"
