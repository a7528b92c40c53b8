#!/bin/bash
# Builds the native kernel's library for the avx2, avx2-vnni and avx512 levels (g++) and the neon and i8mm
# levels (aarch64-linux-gnu-g++: scripts/get-arm-tools.sh) with the flags of decoder/kernels/woq_native.py and
# decoder/kernels/isa.py, and prints the instructions of one tile-group of the product loop per level, layout
# (4: nibbles, 8: bytes; k-quant scales) and rows of the pass (loops.py). Usage: run.sh (from anywhere)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$here/../../../decoder/kernels
out=$(mktemp -d)
sources=("$src/woq_kernel.cpp" "$src/row_kernel.cpp" "$src/layer_kernel.cpp")
flags=(-O3 -std=c++17 -ffp-contract=off -fno-trapping-math -fopenmp -shared -fPIC)
g++ "${flags[@]}" -march=haswell -o "$out/avx2.so" "${sources[@]}"
g++ "${flags[@]}" -march=haswell -mavxvnni -o "$out/avx2-vnni.so" "${sources[@]}"
g++ "${flags[@]}" -march=haswell -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -o "$out/avx512.so" "${sources[@]}"
aarch64-linux-gnu-g++ "${flags[@]}" -march=armv8.2-a+dotprod -o "$out/neon.so" "${sources[@]}"
aarch64-linux-gnu-g++ "${flags[@]}" -march=armv8.2-a+dotprod+i8mm -o "$out/i8mm.so" "${sources[@]}"
g++ --version | head -1
aarch64-linux-gnu-g++ --version | head -1
echo
echo "| level | layout | rows | instructions a tile-group | a row | most frequent |"
echo "|---|---|---|---|---|---|"
for layout in 4 8; do
    for rows in 1 2 8; do
        for level in avx2 avx2-vnni avx512; do python3 "$here/loops.py" objdump "$out/$level.so" "$layout" 3 "$rows"; done
        for level in neon i8mm; do python3 "$here/loops.py" aarch64-linux-gnu-objdump "$out/$level.so" "$layout" 3 "$rows"; done
    done
done
rm -rf "$out"
