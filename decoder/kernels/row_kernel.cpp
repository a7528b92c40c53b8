// Attention of a decoding pass on a CPU, each query row computed on its own.
//
// A row at position p attends to its keys in position order: the cache's first `prefix` entries, then its own
// ancestors in the pass (storage indices in `extra`). Its scores, softmax and weighted sum of values are one
// fixed sequence of operations over that key sequence, whatever the other rows of the pass and whichever thread
// runs it: a greedy one-token pass and a lookahead row at the same position with the same keys compute the same
// bits (lossless lookahead). The query heads that share a key head are one task (each key read once for them);
// head sizes of 64 and 128 are compiled as constants, so a head's sum of values stays in registers. Plain C++
// with explicit fused multiply-adds (built with -ffp-contract=off): the compiler may vectorize the elementwise
// loops without changing any result.
//
// Built with decoder/woq_kernel.cpp into one library by decoder/woq_native.py.

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <vector>

#include "native_math.h"

static const int LANES = 16;  // partial sums of a dot product
static const int SUMS = 8;    // partial sums of a row's softmax weights

// q . k over dim (a multiple of LANES): LANES partial sums, then a fixed tree
template <int D>
static inline float dot(const float* q, const float* k, int64_t dim) {
    const int64_t n = D > 0 ? D : dim;
    float acc[LANES] = {0};
    for (int64_t d = 0; d < n; d += LANES) {
#pragma omp simd
        for (int l = 0; l < LANES; l++) acc[l] = fmaf(q[d + l], k[d + l], acc[l]);
    }
    float h8[8], h4[4];
    for (int l = 0; l < 8; l++) h8[l] = acc[l] + acc[l + 8];
    for (int l = 0; l < 4; l++) h4[l] = h8[l] + h8[l + 4];
    return (h4[0] + h4[2]) + (h4[1] + h4[3]);
}

// one row's attention for the `groups` query heads of one key head (D: the head size, 0 for dim at run time)
template <int D>
static void attend(const float* q, const float* kh, int64_t k_pos_stride, const float* vh, int64_t v_pos_stride,
                   int64_t first, const int64_t* mine, int64_t count, int64_t groups, int64_t dim, float scale,
                   float* out, std::vector<float>& weights) {
    const int64_t n = D > 0 ? D : dim;
    weights.resize(count * groups);  // head g's scores, then weights, at [g * count, (g + 1) * count)
    for (int64_t i = 0; i < count; i++) {  // each key read once for the group's heads
        const float* key = kh + (i < first ? i : mine[i - first]) * k_pos_stride;
        for (int64_t g = 0; g < groups; g++) weights[g * count + i] = dot<D>(q + g * n, key, n) * scale;
    }
    for (int64_t g = 0; g < groups; g++) {
        float* w = &weights[g * count];
        float top = -INFINITY;
        for (int64_t i = 0; i < count; i++) top = w[i] > top ? w[i] : top;
#pragma omp simd
        for (int64_t i = 0; i < count; i++) w[i] = exp_fixed(w[i] - top);  // lane by lane: the same bits
        float sums[SUMS] = {0};
        for (int64_t i = 0; i < count; i++) sums[i % SUMS] = sums[i % SUMS] + w[i];
        const float total = ((sums[0] + sums[4]) + (sums[2] + sums[6])) + ((sums[1] + sums[5]) + (sums[3] + sums[7]));
        float o[D > 0 ? D : 256];  // head sizes up to 256 at run time
        for (int64_t d = 0; d < n; d++) o[d] = 0.0f;
        for (int64_t i = 0; i < count; i++) {
            const float* vv = vh + (i < first ? i : mine[i - first]) * v_pos_stride;
#pragma omp simd
            for (int64_t d = 0; d < n; d++) o[d] = fmaf(w[i], vv[d], o[d]);
        }
        for (int64_t d = 0; d < n; d++) out[g * n + d] = o[d] / total;
    }
}

extern "C" {

// q: (rows, heads, dim) float32; keys/values: (kv_heads, stored, dim) views with the given strides (elements),
// dim contiguous; row j sees storage entries 0 .. prefix[j]-1, then extra[extra_start[j] .. extra_start[j+1]-1];
// out: (rows, heads, dim). Query head h reads key/value head h / (heads / kv_heads). Returns 0, or -1 for a
// dim that is not a multiple of 16 or above 256.
int row_attention(const float* q, int64_t rows, int64_t heads, int64_t kv_heads, int64_t dim, const float* k,
                  int64_t k_head_stride, int64_t k_pos_stride, const float* v, int64_t v_head_stride,
                  int64_t v_pos_stride, const int64_t* prefix, const int64_t* extra_start, const int64_t* extra,
                  float scale, float* out, int threads) {
    if (dim % LANES != 0 || dim > 256 || heads % kv_heads != 0) return -1;
    const int64_t groups = heads / kv_heads;
#pragma omp parallel num_threads(threads)
    {
        std::vector<float> weights;
#pragma omp for schedule(static)
        for (int64_t task = 0; task < rows * kv_heads; task++) {  // a row's query heads that share a key head
            // key head by key head: a thread's tasks share one head's keys and values in its cache
            const int64_t kvh = task / rows, j = task % rows, at = (j * heads + kvh * groups) * dim;
            const int64_t first = prefix[j], count = first + extra_start[j + 1] - extra_start[j];
            const int64_t* mine = extra + extra_start[j];
            const float *kh = k + kvh * k_head_stride, *vh = v + kvh * v_head_stride;
            if (dim == 64)
                attend<64>(q + at, kh, k_pos_stride, vh, v_pos_stride, first, mine, count, groups, dim, scale, out + at, weights);
            else if (dim == 128)
                attend<128>(q + at, kh, k_pos_stride, vh, v_pos_stride, first, mine, count, groups, dim, scale, out + at, weights);
            else
                attend<0>(q + at, kh, k_pos_stride, vh, v_pos_stride, first, mine, count, groups, dim, scale, out + at, weights);
        }
    }
    return 0;
}
}
