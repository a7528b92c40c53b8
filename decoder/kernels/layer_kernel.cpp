// The small per-row steps of a decoding layer on a CPU (decoder/native_pass.py): the residual sum with the
// RMS norm after it, the rotary embedding, SwiGLU.
//
// Each row's values are one fixed sequence of float32 operations, whatever the number of rows in the pass:
// a lookahead row computes the bits a one-token greedy pass computes (lossless lookahead). Plain C++ built
// with -ffp-contract=off (a multiply and an add stay two roundings unless written as fmaf); the compiler may
// vectorize the elementwise loops without changing any result.
//
// Built with decoder/woq_kernel.cpp into one library by decoder/woq_native.py.

#include <math.h>
#include <stdint.h>

#include "kernel_api.h"
#include "native_math.h"

static const int NORM_LANES = 16;

extern "C" {

// residual (rows, cols) += delta (skipped where delta is null), then
// out = residual / sqrt(mean(residual^2) + eps) * weight, row by row (the sum of squares in NORM_LANES partial
// sums, then a fixed tree). Returns 0, or -1 for cols that are not a multiple of NORM_LANES.
int residual_rms_norm(float* residual, const float* delta, int64_t rows, int64_t cols, const float* weight,
                      float eps, float* out) {
    if (cols % NORM_LANES != 0) return -1;
    for (int64_t j = 0; j < rows; j++) {
        float* h = residual + j * cols;
        if (delta)
            for (int64_t c = 0; c < cols; c++) h[c] = h[c] + delta[j * cols + c];
        float acc[NORM_LANES] = {0};
        for (int64_t c = 0; c < cols; c += NORM_LANES)
            for (int l = 0; l < NORM_LANES; l++) acc[l] = fmaf(h[c + l], h[c + l], acc[l]);
        for (int width = NORM_LANES / 2; width > 0; width /= 2)
            for (int l = 0; l < width; l++) acc[l] = acc[l] + acc[l + width];
        const float inverse = 1.0f / sqrtf(acc[0] / (float)cols + eps);
        float* o = out + j * cols;
        for (int64_t c = 0; c < cols; c++) o[c] = h[c] * inverse * weight[c];
    }
    return 0;
}

// x: rows of `heads` heads of `dim` values (a row starts row_stride floats after the one before), rotated in
// place by the row's cos and sin (rows, dim) as transformers' rotate_half does: x[i] * cos[i] - x[i + dim/2] *
// sin[i] for i < dim/2, x[i] * cos[i] + x[i - dim/2] * sin[i] after. Returns 0, or -1 for an odd dim.
int rope_rows(float* x, int64_t rows, int64_t heads, int64_t dim, int64_t row_stride, const float* cos,
              const float* sin) {
    if (dim % 2 != 0) return -1;
    const int64_t half = dim / 2;
    for (int64_t j = 0; j < rows; j++) {
        const float *c = cos + j * dim, *s = sin + j * dim;
        for (int64_t h = 0; h < heads; h++) {
            float* v = x + j * row_stride + h * dim;
            for (int64_t i = 0; i < half; i++) {
                const float a = v[i], b = v[i + half];
                v[i] = a * c[i] - b * s[i];
                v[i + half] = b * c[i + half] + a * s[i + half];
            }
        }
    }
    return 0;
}

// gate_up (rows, 2 * inter), each row its gate then its up values: out (rows, inter) = silu(gate) * up with
// silu(g) = g / (1 + exp(-g)).
int swiglu_rows(const float* gate_up, int64_t rows, int64_t inter, float* out, int threads) {
    const int64_t width = 256, pieces = (inter + width - 1) / width;  // a task: up to `width` columns of a row
#pragma omp parallel for schedule(static) num_threads(threads) if (rows * inter >= 16384)
    for (int64_t task = 0; task < rows * pieces; task++) {
        const int64_t j = task / pieces, first = task % pieces * width, last = first + width < inter ? first + width : inter;
        const float *gate = gate_up + j * 2 * inter, *up = gate + inter;
        float* o = out + j * inter;
#pragma omp simd
        for (int64_t c = first; c < last; c++) o[c] = gate[c] / (1.0f + exp_fixed(-gate[c])) * up[c];
    }
    return 0;
}
}
