// Attention of a decoding pass on a CPU, each query row computed on its own.
//
// A row at position p attends to its keys in position order: the cache's first `prefix` entries, then its own
// ancestors in the pass (storage indices in `extra`). Its scores, softmax and weighted sum of values are one
// fixed sequence of operations over that key sequence, whatever the other rows of the pass and whichever thread
// runs it: a greedy one-token pass and a lookahead row at the same position with the same keys compute the same
// bits (lossless lookahead). Plain C++ with explicit fused multiply-adds (built with -ffp-contract=off): the
// compiler may vectorize the elementwise loops without changing any result.
//
// Built with decoder/woq_kernel.cpp into one library by decoder/woq_native.py.

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <vector>

#include "native_math.h"

static const int LANES = 16;

// q . k over dim (a multiple of LANES): LANES partial sums, then a fixed tree
static inline float dot(const float* q, const float* k, int64_t dim) {
    float acc[LANES] = {0};
    for (int64_t d = 0; d < dim; d += LANES)
        for (int l = 0; l < LANES; l++) acc[l] = fmaf(q[d + l], k[d + l], acc[l]);
    for (int width = LANES / 2; width > 0; width /= 2)
        for (int l = 0; l < width; l++) acc[l] = acc[l] + acc[l + width];
    return acc[0];
}

extern "C" {

// q: (rows, heads, dim) float32; keys/values: (kv_heads, stored, dim) views with the given strides (elements),
// dim contiguous; row j sees storage entries 0 .. prefix[j]-1, then extra[extra_start[j] .. extra_start[j+1]-1];
// out: (rows, heads, dim). Query head h reads key/value head h / (heads / kv_heads). Returns 0, or -1 for a
// dim that is not a multiple of 16.
int row_attention(const float* q, int64_t rows, int64_t heads, int64_t kv_heads, int64_t dim, const float* k,
                  int64_t k_head_stride, int64_t k_pos_stride, const float* v, int64_t v_head_stride,
                  int64_t v_pos_stride, const int64_t* prefix, const int64_t* extra_start, const int64_t* extra,
                  float scale, float* out, int threads) {
    if (dim % LANES != 0 || heads % kv_heads != 0) return -1;
    const int64_t groups = heads / kv_heads;
#pragma omp parallel num_threads(threads)
    {
        std::vector<float> weights;
#pragma omp for schedule(static)
        for (int64_t task = 0; task < rows * heads; task++) {
            const int64_t j = task / heads, h = task % heads, kvh = h / groups;
            const int64_t first = prefix[j], count = first + extra_start[j + 1] - extra_start[j];
            const int64_t* mine = extra + extra_start[j];
            const float* qv = q + task * dim;
            const float* kh = k + kvh * k_head_stride;
            const float* vh = v + kvh * v_head_stride;
            weights.resize(count);
            float top = -INFINITY;
            for (int64_t i = 0; i < count; i++) {
                const int64_t at = i < first ? i : mine[i - first];
                weights[i] = dot(qv, kh + at * k_pos_stride, dim) * scale;
                top = weights[i] > top ? weights[i] : top;
            }
            float total = 0.0f;
            for (int64_t i = 0; i < count; i++) {
                weights[i] = exp_fixed(weights[i] - top);
                total = total + weights[i];
            }
            float* o = out + task * dim;
            for (int64_t d = 0; d < dim; d++) o[d] = 0.0f;
            for (int64_t i = 0; i < count; i++) {
                const int64_t at = i < first ? i : mine[i - first];
                const float* vv = vh + at * v_pos_stride;
                const float w = weights[i];
                for (int64_t d = 0; d < dim; d++) o[d] = fmaf(w, vv[d], o[d]);
            }
            for (int64_t d = 0; d < dim; d++) o[d] = o[d] / total;
        }
    }
    return 0;
}
}
