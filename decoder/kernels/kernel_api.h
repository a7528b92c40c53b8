// The native library's entry points (woq_kernel.cpp, row_kernel.cpp, layer_kernel.cpp, pass_kernel.cpp), declared
// once for the sources that define or call them and for the test driver (kernel_check.cpp). decoder/woq_native.py
// declares the same to ctypes.
#pragma once

#include <stdint.h>

extern "C" {

// One weight of a product (decoder/kernels/woq_layout.py: WoqJob mirrors it): its tiles, their layout and scale
// mode, and the output columns column .. column + rows - 1 its results go to. paired: the tiles lie two by two,
// group by group (woq_kernel.cpp: tile_at), else tile after tile.
struct Job {
    const uint8_t* tiles;
    const float* bias;  // rows float32, or null
    int64_t layout, mode, rows, groups, column, paired;
    float zero;
};

// Weights that multiply one input, side by side in one output (woq_layout.py: WoqProduct): `count` jobs, the
// output `rows` wide.
struct Product {
    const Job* jobs;
    int64_t count, rows;
};

// One decoder layer's weights and shape as pass_kernel.cpp's native_layer reads them (decoder/kernels/
// woq_native.py: LayerWeights mirrors it). next_norm: the next layer's input norm, or the model's final norm
// after the last layer.
struct Layer {
    Product qkv, o, gate_up, down;
    const float *post_norm, *next_norm;
    int64_t hidden, heads, kv_heads, dim;
    float eps, scale;
};

int woq_linear(const float* x, int64_t batch, const Job* jobs, int count, float* out, int64_t out_cols, int threads);
int woq_dequantize(const Job* job, float* out32, uint16_t* out16, int threads);
int64_t woq_block_bytes(int64_t layout, int64_t mode);
const char* woq_isa(void);
// Passes of n = 1 to 4 rows whose bit n - 1 is set in `mask` take AVX-512's two-tile loop (decoder/tile_pairs.py
// times both; all until set); mask < 0 only asks. The mask in force before, or -1 at a level without the two-tile
// loop.
int64_t woq_pair_rows(int64_t mask);
// keys and values float32, or IEEE half where kv_half (native_math.h's half_to_float: read exactly as float32)
int row_attention(const float* q, int64_t rows, int64_t heads, int64_t kv_heads, int64_t dim, const void* k,
                  int64_t k_head_stride, int64_t k_pos_stride, const void* v, int64_t v_head_stride,
                  int64_t v_pos_stride, const int64_t* prefix, const int64_t* extra_start, const int64_t* extra,
                  float scale, float* out, int threads, int kv_half);
int residual_rms_norm(float* residual, const float* delta, int64_t rows, int64_t cols, const float* weight,
                      float eps, float* out);
int rope_rows(float* x, int64_t rows, int64_t heads, int64_t dim, int64_t row_stride, const float* cos,
              const float* sin);
int swiglu_rows(const float* gate_up, int64_t rows, int64_t inter, float* out, int threads);
int64_t layer_scratch_floats(const Layer* layer, int64_t rows);
// the cache's keys and values float32, or IEEE half where kv_half (written rounded to nearest, ties to even)
int native_layer(const Layer* layer, float* residual, float* x, int64_t rows, const float* cos, const float* sin,
                 void* keys, int64_t k_head_stride, int64_t k_pos_stride, void* values, int64_t v_head_stride,
                 int64_t v_pos_stride, int64_t held, const int64_t* prefix, const int64_t* extra_start,
                 const int64_t* extra, float* scratch, int64_t room, int64_t kv_only, int threads, int kv_half);
}
