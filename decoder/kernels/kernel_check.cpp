// A test driver for the native kernels' builds (tests/decoder/test_arm_kernels.py): a program that feeds the
// kernels' extern "C" entry points (woq_kernel.cpp, row_kernel.cpp, layer_kernel.cpp, linked in) deterministic
// inputs and writes every output, so that builds for different instruction-set levels and machines (x86-64
// natively, ARM64 under qemu-aarch64) are compared byte for byte.
//
// The inputs are made from integers only (a fixed xorshift sequence, floats as integers times powers of two), so
// every build sees the same bits: the products of every layout and scale mode (Q6_K's layout 6 with its own scale
// mode; the super-block modes over 16 groups, the others over 6) for 1 to 16 rows of a pass and 72 (AMX's tiles of
// 16 rows, whole and not; two weights side by side, of 21 and 16 rows, with and without biases, a row of outliers, a
// group of zeros; tiles in the plain order and in pairs), dequantization, attention at several context lengths and
// head sizes, the residual sum with the RMS norm, RoPE and SwiGLU.
//
// Usage: kernel_check OUT; writes OUT as records `name count\n` then count float32 (or uint16) values, and
// prints the level the build runs (woq_isa). Not part of the library.

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "kernel_api.h"
#include "native_math.h"

static const int THREADS = 2;

struct Numbers {  // xorshift64*: the same sequence on every machine
    uint64_t state;
    uint64_t next() {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        return state * 2685821657736338717ull;
    }
    int64_t below(int64_t n) { return (int64_t)(next() >> 33) % n; }
    // a float in [-1, 1) in steps of 2^-20 (exact), times 2^shift
    float uniform(int shift = 0) {
        float value = (float)(below(1 << 21) - (1 << 20)) * (1.0f / 1048576.0f);
        for (int i = 0; i < shift; i++) value *= 2.0f;
        for (int i = 0; i > shift; i--) value *= 0.5f;
        return value;
    }
    std::vector<float> floats(size_t n, int shift = 0) {
        std::vector<float> out(n);
        for (float& f : out) f = uniform(shift);
        return out;
    }
    // a float16's bits: finite, sign either way, exponents 0 (subnormal) to 17 (magnitudes below 8)
    uint16_t half() { return (uint16_t)((below(2) << 15) | (below(18) << 10) | below(1024)); }
};

struct Output {
    FILE* file;
    template <typename T>
    void record(const std::string& name, const std::vector<T>& values) {
        fprintf(file, "%s %zu %zu\n", name.c_str(), values.size(), sizeof(T));
        fwrite(values.data(), sizeof(T), values.size(), file);
    }
};

// one tile-group stream of a weight: every tile-group's scales (random finite values of the mode) then random
// codes (any byte is a valid code of every layout)
static std::vector<uint8_t> random_tiles(Numbers& rng, int64_t layout, int64_t mode, int64_t rows, int64_t groups) {
    const int64_t codes = layout == 8 ? 256 : layout == 4 ? 128 : layout == 6 ? 192 : 160;
    const int64_t block = woq_block_bytes(layout, mode), head = block - codes;
    const int64_t tiles = (rows + 7) / 8;
    std::vector<uint8_t> data(tiles * groups * block);
    for (int64_t b = 0; b < tiles * groups; b++) {
        uint8_t* p = &data[b * block];
        if (mode == 2) {  // float32 scales and offsets
            for (int j = 0; j < 16; j++) {
                const float value = j < 8 ? rng.uniform(-4) : rng.uniform(-2);
                memcpy(p + 4 * j, &value, 4);
            }
        } else if (mode >= 3) {  // K-quants: packed 6-bit integers, one row's float16 d and -dmin; Q6_K: 16 signed
                                 // sub-block scales, one row's float16 d (any bytes are valid integers)
            const int64_t integers = mode == 3 ? 12 : 16;
            for (int64_t j = 0; j < integers; j++) p[j] = (uint8_t)rng.below(256);
            for (int64_t at = integers; at < head; at += 2) {
                const uint16_t h = rng.half();
                memcpy(p + at, &h, 2);
            }
        } else {
            const int halves = mode == 0 ? 8 : 16;
            for (int j = 0; j < halves; j++) {
                const uint16_t h = rng.half();
                memcpy(p + 2 * j, &h, 2);
            }
        }
        for (int64_t i = head; i < block; i++) p[i] = (uint8_t)rng.below(256);
    }
    return data;
}

// one layout and scale mode: two weights side by side for 1 to 16 rows and 72, and the first one dequantized; the
// same bytes read as tiles in the plain order and in pairs (`paired`)
static void product(Numbers& rng, Output& out, int64_t layout, int64_t mode, int64_t groups, int64_t paired) {
    const int64_t cols = groups * 32, rows[2] = {21, 16};
    std::vector<uint8_t> tiles[2];
    std::vector<float> bias = rng.floats(rows[1], 2);
    Job jobs[2];
    int64_t column = 0;
    for (int w = 0; w < 2; w++) {
        tiles[w] = random_tiles(rng, layout, mode, rows[w], groups);
        jobs[w] = {tiles[w].data(), w == 1 ? bias.data() : nullptr, layout, mode, rows[w], groups, column, paired,
                   mode == 0 ? 8.0f + 0.5f * (float)w : 0.0f};
        column += rows[w];
    }
    const std::string name = "linear layout " + std::to_string(layout) + " mode " + std::to_string(mode) +
                             (paired ? " paired" : "");
    for (int64_t batch : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 72}) {
        std::vector<float> x = rng.floats(batch * cols);
        for (int64_t c = 0; c < cols; c++) x[(batch / 2) * cols + c] *= 1024.0f;  // a row of outliers
        for (int64_t c = 32; c < 64; c++) x[(batch - 1) * cols + c] = 0.0f;       // a group of zeros
        std::vector<float> y(batch * column);
        if (woq_linear(x.data(), batch, jobs, 2, y.data(), column, THREADS) != 0) {
            fprintf(stderr, "woq_linear refused %s\n", name.c_str());
            exit(3);
        }
        out.record(name + " rows " + std::to_string(batch), y);
    }
    std::vector<float> dense(rows[0] * cols);
    std::vector<uint16_t> narrow(rows[0] * cols);
    woq_dequantize(&jobs[0], dense.data(), nullptr, THREADS);
    woq_dequantize(&jobs[0], nullptr, narrow.data(), THREADS);
    out.record("dequantize float32 " + name, dense);
    out.record("dequantize bfloat16 " + name, narrow);
}

static void products(Numbers& rng, Output& out) {
    for (int64_t paired : {0, 1}) {
        for (int64_t layout : {4, 5, 8})
            for (int64_t mode = 0; mode < 4; mode++) product(rng, out, layout, mode, mode == 3 ? 16 : 6, paired);
        product(rng, out, 6, 4, 16, paired);  // K-quants and Q6_K: whole super-blocks of 8 groups
    }
}

// each of `floats` rounded to IEEE half (a half cache's entries)
static std::vector<uint16_t> halves(const std::vector<float>& floats) {
    std::vector<uint16_t> out(floats.size());
    for (size_t e = 0; e < floats.size(); e++) out[e] = float_to_half(floats[e]);
    return out;
}

// rows of a pass over a cache of `stored` entries: row j sees the first prefix[j] entries, then its own
// ancestors (entries after the prefix)
static void attention(Numbers& rng, Output& out) {
    const int64_t heads = 4, kv_heads = 2, stored = 300;
    const int64_t prefix[] = {1, 4, 7, 8, 13, 64, 130, 257};
    const int64_t rows = sizeof(prefix) / sizeof(prefix[0]);
    std::vector<int64_t> start = {0}, extra;
    for (int64_t j = 0; j < rows; j++) {
        for (int64_t a = 0; a < j % 4; a++) extra.push_back(260 + rng.below(40));
        start.push_back((int64_t)extra.size());
    }
    for (int64_t dim : {64, 128, 32}) {
        const float scale = dim == 64 ? 0.125f : dim == 128 ? 0.0883883476f : 0.176776695f;
        std::vector<float> q = rng.floats(rows * heads * dim, 1), k = rng.floats(kv_heads * stored * dim, 1);
        std::vector<float> v = rng.floats(kv_heads * stored * dim), o(rows * heads * dim);
        row_attention(q.data(), rows, heads, kv_heads, dim, k.data(), stored * dim, dim, v.data(), stored * dim, dim,
                      prefix, start.data(), extra.data(), scale, o.data(), THREADS, 0);
        out.record("attention dim " + std::to_string(dim), o);
        const std::vector<uint16_t> k16 = halves(k), v16 = halves(v);  // the same keys and values in a half cache
        row_attention(q.data(), rows, heads, kv_heads, dim, k16.data(), stored * dim, dim, v16.data(), stored * dim,
                      dim, prefix, start.data(), extra.data(), scale, o.data(), THREADS, 1);
        out.record("attention half dim " + std::to_string(dim), o);
    }
}

static void layer_steps(Numbers& rng, Output& out) {
    for (int64_t cols : {160, 896}) {
        const int64_t rows = 5;
        std::vector<float> residual = rng.floats(rows * cols, 3), delta = rng.floats(rows * cols, 2);
        std::vector<float> weight = rng.floats(cols), normed(rows * cols);
        residual_rms_norm(residual.data(), delta.data(), rows, cols, weight.data(), 1e-6f, normed.data());
        out.record("residual " + std::to_string(cols), residual);
        out.record("norm " + std::to_string(cols), normed);
        residual_rms_norm(residual.data(), nullptr, rows, cols, weight.data(), 1e-6f, normed.data());
        out.record("norm without delta " + std::to_string(cols), normed);
    }
    const int64_t rows = 4, heads = 3, dim = 64, stride = heads * dim + 16;
    std::vector<float> x = rng.floats(rows * stride, 2), cos = rng.floats(rows * dim), sin = rng.floats(rows * dim);
    rope_rows(x.data(), rows, heads, dim, stride, cos.data(), sin.data());
    out.record("rope", x);
    for (int64_t inter : {600, 4864}) {
        const int64_t swiglu_rows_count = 3;
        std::vector<float> gate_up = rng.floats(swiglu_rows_count * 2 * inter, 7), y(swiglu_rows_count * inter);
        swiglu_rows(gate_up.data(), swiglu_rows_count, inter, y.data(), THREADS);
        out.record("swiglu " + std::to_string(inter), y);
    }
}

int main(int argc, char** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT\n", argv[0]);
        return 2;
    }
    Output out = {fopen(argv[1], "wb")};
    if (!out.file) {
        perror(argv[1]);
        return 1;
    }
    Numbers rng = {0x9E3779B97F4A7C15ull};
    products(rng, out);
    attention(rng, out);
    layer_steps(rng, out);
    fclose(out.file);
    printf("%s\n", woq_isa());
    return 0;
}
