// One decoder layer of a native decoding pass in one call (decoder/runtime/native_pass.py): the steps that
// native_pass.py once called one by one from Python, in the same order on the same functions, so a layer computes
// the same bits either way:
//
//     q|k|v = x W_qkv -> rotary on q and k -> k and v written into the cache after its `held` entries -> row
//     attention -> o -> residual + o, norm -> gate|up -> SwiGLU -> down -> residual + down, the next norm
//
// `x` holds the layer's normed input on entry and the next layer's on return; `residual` is summed in place. The
// cache's rows for this pass's entries (positions held .. held + rows - 1 of each key head) must exist: the caller
// makes room, this writes them: float32, or (kv_half) IEEE half, rounded to nearest, ties to even, as torch rounds.
// `scratch`: `room` floats, at least layer_scratch_floats(layer, rows), reused by every layer. The first `kv_only` rows
// (0 <= kv_only < rows) stop once their keys and values are in the cache: the last layer of a prefill chunk, whose
// other outputs only its last row's logits read; the rows after them are computed as in any pass (each row's steps
// never depend on the others'), their `residual` and `x` rows updated, the first rows' left as they were. Returns 0; -5
// for too little scratch or a `kv_only` out of range (nothing done); or the first failing step's code: -1 a product's
// layout, -2 attention's head size, -3 the norm's width, -4 the rotary's head size.
//
// Built with decoder/woq_kernel.cpp into one library by decoder/woq_native.py.

#include <stdint.h>
#include <string.h>

#include "kernel_api.h"
#include "native_math.h"

// n floats into a cache entry `at` elements into `cache`: as they are, or (half) rounded to IEEE half
static void store(void* cache, int half, int64_t at, const float* from, int64_t n) {
    if (!half) {
        memcpy((float*)cache + at, from, n * sizeof(float));
        return;
    }
    uint16_t* to = (uint16_t*)cache + at;
    for (int64_t e = 0; e < n; e++) to[e] = float_to_half(from[e]);
}

extern "C" {

int64_t layer_scratch_floats(const Layer* w, int64_t rows) {
    const int64_t q_width = w->heads * w->dim;
    return rows * (w->qkv.rows + 2 * q_width + w->o.rows + w->gate_up.rows + w->gate_up.rows / 2 + w->down.rows);
}

int native_layer(const Layer* w, float* residual, float* x, int64_t rows, const float* cos, const float* sin,
                 void* keys, int64_t k_head_stride, int64_t k_pos_stride, void* values, int64_t v_head_stride,
                 int64_t v_pos_stride, int64_t held, const int64_t* prefix, const int64_t* extra_start,
                 const int64_t* extra, float* scratch, int64_t room, int64_t kv_only, int threads, int kv_half) {
    if (room < layer_scratch_floats(w, rows) || kv_only < 0 || kv_only >= rows) return -5;
    const int64_t d = w->dim, q_width = w->heads * d, kv_width = w->kv_heads * d, inter = w->gate_up.rows / 2;
    float* qkv = scratch;
    float* query = qkv + rows * w->qkv.rows;  // q's heads, rows side by side (attention's layout)
    float* attended = query + rows * q_width;
    float* o = attended + rows * q_width;
    float* gate_up = o + rows * w->o.rows;
    float* act = gate_up + rows * w->gate_up.rows;
    float* down = act + rows * inter;
    if (woq_linear(x, rows, w->qkv.jobs, (int)w->qkv.count, qkv, w->qkv.rows, threads) != 0) return -1;
    if (rope_rows(qkv, rows, w->heads + w->kv_heads, d, w->qkv.rows, cos, sin) != 0) return -4;
    for (int64_t j = 0; j < rows; j++) {
        const float* row = qkv + j * w->qkv.rows;
        memcpy(query + j * q_width, row, q_width * sizeof(float));
        for (int64_t h = 0; h < w->kv_heads; h++) {
            const int64_t k_at = h * k_head_stride + (held + j) * k_pos_stride;
            const int64_t v_at = h * v_head_stride + (held + j) * v_pos_stride;
            store(keys, kv_half, k_at, row + q_width + h * d, d);
            store(values, kv_half, v_at, row + q_width + kv_width + h * d, d);
        }
    }
    // From here on only the rows after the first kv_only: their query, plan entries, residual and input.
    const int64_t full = rows - kv_only;
    float* res = residual + kv_only * w->hidden;
    float* in = x + kv_only * w->hidden;
    if (row_attention(query + kv_only * q_width, full, w->heads, w->kv_heads, d, keys, k_head_stride, k_pos_stride,
                      values, v_head_stride, v_pos_stride, prefix + kv_only, extra_start + kv_only, extra, w->scale,
                      attended, threads, kv_half) != 0)
        return -2;
    if (woq_linear(attended, full, w->o.jobs, (int)w->o.count, o, w->o.rows, threads) != 0) return -1;
    if (residual_rms_norm(res, o, full, w->hidden, w->post_norm, w->eps, in) != 0) return -3;
    if (woq_linear(in, full, w->gate_up.jobs, (int)w->gate_up.count, gate_up, w->gate_up.rows, threads) != 0) return -1;
    swiglu_rows(gate_up, full, inter, act, threads);
    if (woq_linear(act, full, w->down.jobs, (int)w->down.count, down, w->down.rows, threads) != 0) return -1;
    if (residual_rms_norm(res, down, full, w->hidden, w->next_norm, w->eps, in) != 0) return -3;
    return 0;
}
}
