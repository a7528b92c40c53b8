// Attention of a decoding pass on a CPU, each query row computed on its own.
//
// A row at position p attends to its keys in position order: the cache's first `prefix` entries, then its own
// ancestors in the pass (storage indices in `extra`). Its scores, softmax and weighted sum of values are one
// fixed sequence of operations over that key sequence, whatever the other rows of the pass and whichever thread
// runs it: a greedy one-token pass and a lookahead row at the same position with the same keys compute the same
// bits (lossless lookahead). A task is a run of the pass's rows for the query heads that share a key head: the
// keys all its rows see go block by block through every row and head while in the first-level cache (each key
// and value read from memory once per task, not once per row); head sizes of 64 and 128 are compiled as
// constants. C++ with explicit fused multiply-adds (built with -ffp-contract=off); from AVX2 up the same
// operations are written out eight lanes at a time: eight keys' dot products side by side with their tree of
// additions folded across the keys, a head's sum of values held in registers over a block of keys that every
// row and head of the task goes through while it is in the first-level cache, so every level computes the scalar
// build's bits. With AVX-512 three query heads of a key head take each key or value loaded for them (a task of
// several rows: its scores too; one row's scores are faster head by head), a head's sixteen partial sums of a dot
// one register. On ARM64 (the neon and i8mm levels) the same is written four
// lanes at a time with NEON: four keys' dot products side by side, their trees folded across the keys by zips.
// The cache holds float32 or IEEE half (the native pass's: decoder/runtime/native_pass.py); a half is read as the
// float32 it stands for, exactly (F16C, NEON's conversion, or native_math.h's half_to_float), each time a row and
// head read it, so a half cache computes the bits of a float32 cache of the same numbers.
//
// Built with decoder/woq_kernel.cpp into one library by decoder/woq_native.py.

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <vector>

#include "kernel_api.h"
#include "native_math.h"

static const int LANES = 16;  // partial sums of a dot product
static const int SUMS = 8;    // partial sums of a row's softmax weights

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define ROW_SIMD 1
#define ROW_NEON 0
#if defined(__AVX512F__)
#define ROW_ZMM 1  // 16-float registers, 32 of them
#else
#define ROW_ZMM 0
#endif
static const int REG_FLOATS = 8;  // floats in a vector register
#elif defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD)
#include <arm_neon.h>
#define ROW_SIMD 0
#define ROW_NEON 1
#define ROW_ZMM 0
static const int REG_FLOATS = 4;
#else
#define ROW_SIMD 0
#define ROW_NEON 0
#define ROW_ZMM 0
#endif

// a row's key or value i in its key order: storage entry i of the shared prefix, then its own ancestors'
template <typename T>
static inline const T* entry(const T* head, int64_t pos_stride, int64_t first, const int64_t* mine, int64_t i) {
    return head + (i < first ? i : mine[i - first]) * pos_stride;
}

// a key or value element as float32: the cache holds float32 or IEEE half (native_math.h; exact either way)
static inline float widen(float x) { return x; }
static inline float widen(uint16_t x) { return half_to_float(x); }

// q . k over dim (a multiple of LANES): LANES partial sums, then a fixed tree
template <int D, typename T>
static inline float dot(const float* q, const T* k, int64_t dim) {
    const int64_t n = D > 0 ? D : dim;
    float acc[LANES] = {0};
    for (int64_t d = 0; d < n; d += LANES) {
#pragma omp simd
        for (int l = 0; l < LANES; l++) acc[l] = fmaf(q[d + l], widen(k[d + l]), acc[l]);
    }
    float h8[8], h4[4];
    for (int l = 0; l < 8; l++) h8[l] = acc[l] + acc[l + 8];
    for (int l = 0; l < 4; l++) h4[l] = h8[l] + h8[l + 4];
    return (h4[0] + h4[2]) + (h4[1] + h4[3]);
}

#if ROW_SIMD
// eight elements of a key or value as float32
static inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
static inline __m256 load8(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)p)); }

// The same sums as dot, eight keys at a time: their partial sums in registers, the tree folded across keys
// (every addition of dot's tree, in its order, each lane one key's).

// keys[0..3]: each key's 16 partial sums with q folded once (dot's h8: lanes l + lanes l + 8)
template <int D, typename T>
static inline void folded4(const float* q, const T* const* key, int64_t dim, __m256* h8) {
    const int64_t n = D > 0 ? D : dim;
    __m256 low[4], high[4];
    for (int k = 0; k < 4; k++) low[k] = high[k] = _mm256_setzero_ps();
    for (int64_t d = 0; d < n; d += LANES) {
        const __m256 a = _mm256_loadu_ps(q + d), b = _mm256_loadu_ps(q + d + 8);
        for (int k = 0; k < 4; k++) {
            low[k] = _mm256_fmadd_ps(a, load8(key[k] + d), low[k]);
            high[k] = _mm256_fmadd_ps(b, load8(key[k] + d + 8), high[k]);
        }
    }
    for (int k = 0; k < 4; k++) h8[k] = _mm256_add_ps(low[k], high[k]);
}

// eight keys' dots from their h8: h4[l] = h8[l] + h8[l + 4], then (h4[0] + h4[2]) + (h4[1] + h4[3]), key k in lane k
static inline __m256 tree8(const __m256* h8) {
    __m256 h4[4];  // [h4 of key 2k | h4 of key 2k + 1]
    for (int k = 0; k < 4; k++)
        h4[k] = _mm256_add_ps(_mm256_permute2f128_ps(h8[2 * k], h8[2 * k + 1], 0x20),
                              _mm256_permute2f128_ps(h8[2 * k], h8[2 * k + 1], 0x31));
    __m256 pairs[2];  // per 128-bit half: h4[0] + h4[2], h4[1] + h4[3] of two keys
    for (int k = 0; k < 2; k++)
        pairs[k] = _mm256_add_ps(_mm256_shuffle_ps(h4[2 * k], h4[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm256_shuffle_ps(h4[2 * k], h4[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    const __m256 sums = _mm256_add_ps(_mm256_shuffle_ps(pairs[0], pairs[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                      _mm256_shuffle_ps(pairs[0], pairs[1], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm256_permutevar8x32_ps(sums, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));  // keys 0,2,4,6,1,3,5,7 -> 0..7
}

// out[0..8 * CH) += sum over the row's keys i0 .. i1 - 1, in order, of w[i] * value_i[0..8 * CH) (each lane a
// chain of fmaf, carried in out from one block of keys to the next)
template <int CH, typename T>
static inline void weighted_values(const float* w, const T* vh, int64_t v_pos_stride, int64_t first,
                                   const int64_t* mine, int64_t i0, int64_t i1, float* out) {
    __m256 acc[CH];
    for (int c = 0; c < CH; c++) acc[c] = _mm256_loadu_ps(out + 8 * c);
    for (int64_t i = i0; i < i1; i++) {
        const T* vv = entry(vh, v_pos_stride, first, mine, i);
        const __m256 wi = _mm256_set1_ps(w[i]);
        for (int c = 0; c < CH; c++) acc[c] = _mm256_fmadd_ps(wi, load8(vv + 8 * c), acc[c]);
    }
    for (int c = 0; c < CH; c++) _mm256_storeu_ps(out + 8 * c, acc[c]);
}

#if ROW_ZMM
// With AVX-512, a tile of HEADS query heads of one key head: each key or value is loaded once for all of them (32
// registers hold the tile), and a head's LANES partial sums of a dot are one 16-float register (dot's lanes l and
// l + 8 its halves). Every lane is the same chain of fused multiply-adds as the eight-lane code's.
static const int HEADS = 3;

static inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
static inline __m512 load16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)p)); }

// folded4 for the tile's heads (head g's query at q + g * n) and keys[0..3]: head g's key k in h8[g * 8 + k]
template <int D, typename T>
static inline void folded4_heads(const float* q, const T* const* key, int64_t dim, __m256* h8) {
    const int64_t n = D > 0 ? D : dim;
    __m512 acc[HEADS][4];
    for (int g = 0; g < HEADS; g++)
        for (int k = 0; k < 4; k++) acc[g][k] = _mm512_setzero_ps();
    for (int64_t d = 0; d < n; d += LANES) {
        __m512 kk[4];
        for (int k = 0; k < 4; k++) kk[k] = load16(key[k] + d);
        for (int g = 0; g < HEADS; g++) {
            const __m512 a = _mm512_loadu_ps(q + g * n + d);
            for (int k = 0; k < 4; k++) acc[g][k] = _mm512_fmadd_ps(a, kk[k], acc[g][k]);
        }
    }
    for (int g = 0; g < HEADS; g++)
        for (int k = 0; k < 4; k++)
            h8[g * 8 + k] = _mm256_add_ps(_mm512_castps512_ps256(acc[g][k]),
                                          _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[g][k]), 1)));
}

// scores' eight keys for the tile's heads: head g's at out + g * count
template <int D, typename T>
static inline void scores8_heads(const float* q, const T* const* key, int64_t n, float scale, float* out,
                                 int64_t count) {
    __m256 h8[HEADS * 8];
    folded4_heads<D, T>(q, key, n, h8);
    folded4_heads<D, T>(q, key + 4, n, h8 + 4);
    for (int g = 0; g < HEADS; g++)
        _mm256_storeu_ps(out + g * count, _mm256_mul_ps(tree8(h8 + g * 8), _mm256_set1_ps(scale)));
}

// weighted_values for the tile's heads (head g's weights at w + g * count, its sums at out + g * n): 16 * CH
// elements of each
template <int CH, typename T>
static inline void weighted_values_heads(const float* w, int64_t count, const T* vh, int64_t v_pos_stride,
                                         int64_t first, const int64_t* mine, int64_t i0, int64_t i1, int64_t n,
                                         float* out) {
    __m512 acc[HEADS][CH];
    for (int g = 0; g < HEADS; g++)
        for (int c = 0; c < CH; c++) acc[g][c] = _mm512_loadu_ps(out + g * n + 16 * c);
    for (int64_t i = i0; i < i1; i++) {
        const T* vv = entry(vh, v_pos_stride, first, mine, i);
        __m512 v[CH];
        for (int c = 0; c < CH; c++) v[c] = load16(vv + 16 * c);
        for (int g = 0; g < HEADS; g++) {
            const __m512 wi = _mm512_set1_ps(w[g * count + i]);
            for (int c = 0; c < CH; c++) acc[g][c] = _mm512_fmadd_ps(wi, v[c], acc[g][c]);
        }
    }
    for (int g = 0; g < HEADS; g++)
        for (int c = 0; c < CH; c++) _mm512_storeu_ps(out + g * n + 16 * c, acc[g][c]);
}

// weighted_values_heads over all n elements: 64 at a time, then 16
template <typename T>
static inline void values_heads(const float* w, int64_t count, const T* vh, int64_t v_pos_stride, int64_t first,
                                const int64_t* mine, int64_t i0, int64_t i1, int64_t n, float* out) {
    int64_t d = 0;
    for (; d + 64 <= n; d += 64) weighted_values_heads<4, T>(w, count, vh + d, v_pos_stride, first, mine, i0, i1, n, out + d);
    for (; d < n; d += LANES) weighted_values_heads<1, T>(w, count, vh + d, v_pos_stride, first, mine, i0, i1, n, out + d);
}
#endif

#elif ROW_NEON
// four elements of a key or value as float32
static inline float32x4_t load4(const float* p) { return vld1q_f32(p); }
static inline float32x4_t load4(const uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }

// The same sums as dot, four keys at a time: each key's 16 partial sums in four registers, the tree folded
// across the keys (every addition of dot's tree, in its order, each lane one key's).

// the dots of q with key[0..3], key k in lane k
template <int D, typename T>
static inline float32x4_t dots4(const float* q, const T* const* key, int64_t dim) {
    const int64_t n = D > 0 ? D : dim;
    float32x4_t acc[4][4];  // key k's partial sums 4c .. 4c + 3 in acc[k][c]
    for (int k = 0; k < 4; k++)
        for (int c = 0; c < 4; c++) acc[k][c] = vdupq_n_f32(0.0f);
    for (int64_t d = 0; d < n; d += LANES) {
        float32x4_t x[4];
        for (int c = 0; c < 4; c++) x[c] = vld1q_f32(q + d + 4 * c);
        for (int k = 0; k < 4; k++)
            for (int c = 0; c < 4; c++) acc[k][c] = vfmaq_f32(acc[k][c], x[c], load4(key[k] + d + 4 * c));
    }
    float32x4_t h4[4];  // dot's h4 of key k: (acc[l] + acc[l + 8]) + (acc[l + 4] + acc[l + 12])
    for (int k = 0; k < 4; k++) h4[k] = vaddq_f32(vaddq_f32(acc[k][0], acc[k][2]), vaddq_f32(acc[k][1], acc[k][3]));
    // h4[0] + h4[2] of keys 0, 2, 0, 2 (lanes 0 1 of each) and of keys 1, 3; then each key's two of them summed
    const float32x4_t even = vaddq_f32(vzip1q_f32(h4[0], h4[2]), vzip2q_f32(h4[0], h4[2]));
    const float32x4_t odd = vaddq_f32(vzip1q_f32(h4[1], h4[3]), vzip2q_f32(h4[1], h4[3]));
    return vaddq_f32(vzip1q_f32(even, odd), vzip2q_f32(even, odd));
}

// out[0..4 * CH) += sum over the row's keys i0 .. i1 - 1, in order, of w[i] * value_i[0..4 * CH) (each lane a
// chain of fmaf, carried in out from one block of keys to the next)
template <int CH, typename T>
static inline void weighted_values(const float* w, const T* vh, int64_t v_pos_stride, int64_t first,
                                   const int64_t* mine, int64_t i0, int64_t i1, float* out) {
    float32x4_t acc[CH];
    for (int c = 0; c < CH; c++) acc[c] = vld1q_f32(out + 4 * c);
    for (int64_t i = i0; i < i1; i++) {
        const T* vv = entry(vh, v_pos_stride, first, mine, i);
        for (int c = 0; c < CH; c++) acc[c] = vfmaq_n_f32(acc[c], load4(vv + 4 * c), w[i]);
    }
    for (int c = 0; c < CH; c++) vst1q_f32(out + 4 * c, acc[c]);
}
#endif

// scores[g * count + i] = (q_g . key_i) * scale for the group's heads and the row's keys i0 .. i1 - 1, each key
// read once for them (eight keys at a time or one: the same bits)
template <int D, typename T>
static void scores(const float* q, const T* kh, int64_t k_pos_stride, int64_t first, const int64_t* mine,
                   int64_t i0, int64_t i1, int64_t count, int64_t groups, int64_t dim, float scale, float* out,
                   bool tiled) {
    const int64_t n = D > 0 ? D : dim;
    int64_t i = i0;
#if ROW_SIMD
    for (; i + 8 <= i1; i += 8) {
        const T* key[8];
        for (int k = 0; k < 8; k++) key[k] = entry(kh, k_pos_stride, first, mine, i + k);
        int64_t g = 0;
#if ROW_ZMM
        if (tiled)
            for (; g + HEADS <= groups; g += HEADS)
                scores8_heads<D, T>(q + g * n, key, n, scale, out + g * count + i, count);
#endif
        for (; g < groups; g++) {
            __m256 h8[8];
            folded4<D, T>(q + g * n, key, n, h8);
            folded4<D, T>(q + g * n, key + 4, n, h8 + 4);
            _mm256_storeu_ps(out + g * count + i, _mm256_mul_ps(tree8(h8), _mm256_set1_ps(scale)));
        }
    }
#elif ROW_NEON
    for (; i + 4 <= i1; i += 4) {
        const T* key[4];
        for (int k = 0; k < 4; k++) key[k] = entry(kh, k_pos_stride, first, mine, i + k);
        for (int64_t g = 0; g < groups; g++) vst1q_f32(out + g * count + i, vmulq_n_f32(dots4<D, T>(q + g * n, key, n), scale));
    }
#endif
    for (; i < i1; i++) {
        const T* key = entry(kh, k_pos_stride, first, mine, i);
        for (int64_t g = 0; g < groups; g++) out[g * count + i] = dot<D, T>(q + g * n, key, n) * scale;
    }
}

// the largest of w[0..count) (-inf for none; NaN never chosen)
static inline float largest(const float* w, int64_t count) {
    float top = -INFINITY;
    int64_t i = 0;
#if ROW_SIMD
    __m256 lanes = _mm256_set1_ps(-INFINITY);
    for (; i + 8 <= count; i += 8) lanes = _mm256_max_ps(_mm256_loadu_ps(w + i), lanes);  // w > top ? w : top
    float each[8];
    _mm256_storeu_ps(each, lanes);
    for (int l = 0; l < 8; l++) top = each[l] > top ? each[l] : top;
#elif ROW_NEON
    float32x4_t low = vdupq_n_f32(-INFINITY), high = low;  // lanes as the AVX2 build's eight: w > top ? w : top
    for (; i + 8 <= count; i += 8) {
        const float32x4_t a = vld1q_f32(w + i), b = vld1q_f32(w + i + 4);
        low = vbslq_f32(vcgtq_f32(a, low), a, low);
        high = vbslq_f32(vcgtq_f32(b, high), b, high);
    }
    float each[8];
    vst1q_f32(each, low);
    vst1q_f32(each + 4, high);
    for (int l = 0; l < 8; l++) top = each[l] > top ? each[l] : top;
#endif
    for (; i < count; i++) top = w[i] > top ? w[i] : top;
    return top;
}

// sum of w[0..count): SUMS partial sums (w[i] into sum i % SUMS, in order), then a fixed tree
static inline float total_of(const float* w, int64_t count) {
    float sums[SUMS] = {0};
    int64_t i = 0;
#if ROW_SIMD
    __m256 lanes = _mm256_setzero_ps();
    for (; i + SUMS <= count; i += SUMS) lanes = _mm256_add_ps(lanes, _mm256_loadu_ps(w + i));
    _mm256_storeu_ps(sums, lanes);
#elif ROW_NEON
    float32x4_t low = vdupq_n_f32(0.0f), high = low;
    for (; i + SUMS <= count; i += SUMS) {
        low = vaddq_f32(low, vld1q_f32(w + i));
        high = vaddq_f32(high, vld1q_f32(w + i + 4));
    }
    vst1q_f32(sums, low);
    vst1q_f32(sums + 4, high);
#endif
    for (; i < count; i++) sums[i % SUMS] = sums[i % SUMS] + w[i];
    return ((sums[0] + sums[4]) + (sums[2] + sums[6])) + ((sums[1] + sums[5]) + (sums[3] + sums[7]));
}

static const int64_t L1_KEYS = 16384;  // bytes of keys (or values) a block of keys keeps in the first-level cache
static const int64_t TASK_ROWS = 16;   // rows at most in one task: their scores stay in the second-level cache

// out[g * n .. (g + 1) * n) += sum over the row's keys i0 .. i1 - 1, in order, of head g's w[i] * value_i, for the
// group's heads (each lane a chain of fmaf in key order, carried in out from one block of keys to the next)
template <int D, typename T>
static inline void add_values(const float* weights, int64_t count, const T* vh, int64_t v_pos_stride,
                              int64_t first, const int64_t* mine, int64_t i0, int64_t i1, int64_t groups,
                              int64_t dim, float* out) {
    const int64_t n = D > 0 ? D : dim;
    int64_t g = 0;
#if ROW_ZMM
    for (; g + HEADS <= groups; g += HEADS)
        values_heads<T>(weights + g * count, count, vh, v_pos_stride, first, mine, i0, i1, n, out + g * n);
#endif
    for (; g < groups; g++) {
        const float* w = weights + g * count;
        float* o = out + g * n;
#if ROW_SIMD || ROW_NEON
        int64_t d = 0;
        for (; d + 64 <= n; d += 64) weighted_values<64 / REG_FLOATS, T>(w, vh + d, v_pos_stride, first, mine, i0, i1, o + d);
        for (; d < n; d += LANES) weighted_values<LANES / REG_FLOATS, T>(w, vh + d, v_pos_stride, first, mine, i0, i1, o + d);
        // n is a multiple of LANES (row_attention checks): every dim is covered
#else
        for (int64_t i = i0; i < i1; i++) {
            const T* vv = entry(vh, v_pos_stride, first, mine, i);
#pragma omp simd
            for (int64_t e = 0; e < n; e++) o[e] = fmaf(w[i], widen(vv[e]), o[e]);
        }
#endif
    }
}

// A task's rows: row j's query heads at q + j * q_stride, its result at out + j * q_stride, its keys the first
// `prefix[j]` storage entries then its own `mine[j]` (count[j] in all), its scores and weights at weights[at[j]].
struct Rows {
    int64_t size;
    const int64_t *prefix, *count, *at;
    const int64_t* const* mine;
};

// The attention of a task's rows for the `groups` query heads of one key head (D: the head size, 0 for dim at
// run time). The keys every row sees (the shared prefix) go block by block, each block through every row and head
// while it is in the first-level cache (each key and value read from memory once for the task, not once per row
// and head); then each row's own keys. A row's scores, softmax and sums of values are the same operations in the
// same order whichever rows share its task.
template <int D, typename T>
static void attend(const float* q, int64_t q_stride, const T* kh, int64_t k_pos_stride, const T* vh,
                   int64_t v_pos_stride, const Rows& rows, int64_t groups, int64_t dim, float scale, float* out,
                   float* weights) {
    const int64_t n = D > 0 ? D : dim;
    const int64_t block = L1_KEYS / (4 * n) > 8 ? L1_KEYS / (4 * n) : 8;
    const bool tiled = rows.size > 1;  // scores by tiles of heads: faster for a task of rows, slower for one (Zen 4)
    int64_t shared = rows.prefix[0];
    for (int64_t j = 1; j < rows.size; j++) shared = rows.prefix[j] < shared ? rows.prefix[j] : shared;
    for (int64_t i0 = 0; i0 < shared; i0 += block)
        for (int64_t j = 0; j < rows.size; j++)
            scores<D, T>(q + j * q_stride, kh, k_pos_stride, rows.prefix[j], rows.mine[j], i0,
                         i0 + block < shared ? i0 + block : shared, rows.count[j], groups, n, scale, weights + rows.at[j],
                         tiled);
    for (int64_t j = 0; j < rows.size; j++) {
        const int64_t count = rows.count[j];
        float* w = weights + rows.at[j];  // head g's scores, then weights, at [g * count, (g + 1) * count)
        scores<D, T>(q + j * q_stride, kh, k_pos_stride, rows.prefix[j], rows.mine[j], shared, count, count, groups, n,
                     scale, w, tiled);
        float* total = w + count * groups;  // head g's sum of weights
        for (int64_t g = 0; g < groups; g++) {
            float* wg = w + g * count;
            const float top = largest(wg, count);
#pragma omp simd
            for (int64_t i = 0; i < count; i++) wg[i] = exp_fixed(wg[i] - top);  // lane by lane: the same bits
            total[g] = total_of(wg, count);
        }
        for (int64_t e = 0; e < groups * n; e++) out[j * q_stride + e] = 0.0f;  // head g's sums: then divided
    }
    for (int64_t i0 = 0; i0 < shared; i0 += block)
        for (int64_t j = 0; j < rows.size; j++)
            add_values<D, T>(weights + rows.at[j], rows.count[j], vh, v_pos_stride, rows.prefix[j], rows.mine[j], i0,
                             i0 + block < shared ? i0 + block : shared, groups, n, out + j * q_stride);
    for (int64_t j = 0; j < rows.size; j++) {
        const int64_t count = rows.count[j];
        const float* total = weights + rows.at[j] + count * groups;
        float* o = out + j * q_stride;
        add_values<D, T>(weights + rows.at[j], count, vh, v_pos_stride, rows.prefix[j], rows.mine[j], shared, count,
                      groups, n, o);
        for (int64_t g = 0; g < groups; g++)
            for (int64_t e = 0; e < n; e++) o[g * n + e] = o[g * n + e] / total[g];
    }
}

// the tasks of a pass (row_attention's arguments, the keys and values of element T)
template <typename T>
static void attend_rows(const float* q, int64_t rows, int64_t heads, int64_t kv_heads, int64_t dim, const T* k,
                        int64_t k_head_stride, int64_t k_pos_stride, const T* v, int64_t v_head_stride,
                        int64_t v_pos_stride, const int64_t* prefix, const int64_t* extra_start, const int64_t* extra,
                        float scale, float* out, int threads) {
    const int64_t groups = heads / kv_heads;
    // tasks: a key head's rows in `chunks` runs of consecutive rows, key head by key head (a thread's tasks share
    // one head's keys and values in its cache); as many tasks as threads at least, TASK_ROWS rows at most each
    int64_t chunks = (threads + kv_heads - 1) / kv_heads;
    chunks = chunks > (rows + TASK_ROWS - 1) / TASK_ROWS ? chunks : (rows + TASK_ROWS - 1) / TASK_ROWS;
    chunks = chunks < rows ? chunks : rows;
    const int64_t per = (rows + chunks - 1) / chunks;
#pragma omp parallel num_threads(threads)
    {
        std::vector<float> weights;
        std::vector<int64_t> count(per), at(per);
        std::vector<const int64_t*> mine(per);
#pragma omp for schedule(static)
        for (int64_t task = 0; task < chunks * kv_heads; task++) {
            const int64_t kvh = task / chunks, j0 = (task % chunks) * per;
            const int64_t size = j0 + per < rows ? per : rows - j0;
            if (size <= 0) continue;
            int64_t room = 0;
            for (int64_t j = 0; j < size; j++) {
                count[j] = prefix[j0 + j] + extra_start[j0 + j + 1] - extra_start[j0 + j];
                mine[j] = extra + extra_start[j0 + j];
                at[j] = room;
                room += (count[j] + 1) * groups;
            }
            weights.resize(room);
            const Rows mine_rows = {size, prefix + j0, count.data(), at.data(), mine.data()};
            const int64_t first = (j0 * heads + kvh * groups) * dim, q_stride = heads * dim;
            const T *kh = k + kvh * k_head_stride, *vh = v + kvh * v_head_stride;
            if (dim == 64)
                attend<64, T>(q + first, q_stride, kh, k_pos_stride, vh, v_pos_stride, mine_rows, groups, dim, scale, out + first, weights.data());
            else if (dim == 128)
                attend<128, T>(q + first, q_stride, kh, k_pos_stride, vh, v_pos_stride, mine_rows, groups, dim, scale, out + first, weights.data());
            else
                attend<0, T>(q + first, q_stride, kh, k_pos_stride, vh, v_pos_stride, mine_rows, groups, dim, scale, out + first, weights.data());
        }
    }
}

extern "C" {

// q: (rows, heads, dim) float32; keys/values: (kv_heads, stored, dim) views with the given strides (elements),
// dim contiguous, float32 or (kv_half) IEEE half; row j sees storage entries 0 .. prefix[j]-1, then
// extra[extra_start[j] .. extra_start[j+1]-1]; out: (rows, heads, dim). Query head h reads key/value head
// h / (heads / kv_heads). Returns 0, or -1 for a dim that is not a multiple of 16 or above 256.
int row_attention(const float* q, int64_t rows, int64_t heads, int64_t kv_heads, int64_t dim, const void* k,
                  int64_t k_head_stride, int64_t k_pos_stride, const void* v, int64_t v_head_stride,
                  int64_t v_pos_stride, const int64_t* prefix, const int64_t* extra_start, const int64_t* extra,
                  float scale, float* out, int threads, int kv_half) {
    if (dim % LANES != 0 || dim > 256 || heads % kv_heads != 0) return -1;
    if (rows <= 0) return 0;  // no rows: nothing to attend (and no runs of rows to make)
    if (kv_half)
        attend_rows(q, rows, heads, kv_heads, dim, (const uint16_t*)k, k_head_stride, k_pos_stride, (const uint16_t*)v,
                    v_head_stride, v_pos_stride, prefix, extra_start, extra, scale, out, threads);
    else
        attend_rows(q, rows, heads, kv_heads, dim, (const float*)k, k_head_stride, k_pos_stride, (const float*)v,
                    v_head_stride, v_pos_stride, prefix, extra_start, extra, scale, out, threads);
    return 0;
}
}
