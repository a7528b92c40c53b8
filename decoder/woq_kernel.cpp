// Weight-only quantized matrix products for the few rows of a decoding pass on a CPU.
//
// out[m, n] = sum_k x[m, k] * w[n, k] + bias[n], with w[n, k] = code * scale + offset per group of 32 weights
// along a row, codes kept in the GGUF's own widths (4, 5 or 8 bits): each weight is read once per pass and
// dequantized in registers, once per pass for all the pass's rows (ATen's int4 kernel dequantizes again for
// every 4 rows). Activations and accumulation are float32.
//
// Row independence: the arithmetic that produces out[m, n] is one fixed sequence of fused multiply-adds over
// the groups of row n, whatever the number of rows m in the pass and whichever thread runs it: a lookahead
// pass computes for each of its rows exactly what a one-token greedy pass computes.
//
// Built by decoder/woq_native.py with the machine's own instruction set (-march=native), loaded with ctypes.

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include <vector>

enum Layout { NIBBLES = 4, NIBBLES_HIGH_BIT = 5, BYTES = 8 };

static inline int group_bytes(int layout) { return layout == BYTES ? 32 : layout == NIBBLES ? 16 : 20; }

#if defined(__AVX512F__)
static const int TILE = 4, ROWS = 4;  // a block of TILE rows of the pass by ROWS weight rows: accumulators in registers
struct V { __m512 a; };
static inline V v_zero() { return {_mm512_setzero_ps()}; }
static inline V v_load(const float* p) { return {_mm512_loadu_ps(p)}; }
static inline V v_set(float s) { return {_mm512_set1_ps(s)}; }
static inline V v_fma(V a, V b, V c) { return {_mm512_fmadd_ps(a.a, b.a, c.a)}; }
static inline V v_from_bytes(__m128i b) { return {_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(b))}; }
// round to bfloat16 (nearest even, as PyTorch converts) and store 16 values
static inline void v_store_bf16(V v, uint16_t* out) {
    const __m512i bits = _mm512_castps_si512(v.a);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF))), 16);
    _mm256_storeu_si256((__m256i*)out, _mm512_cvtepi32_epi16(rounded));
}
static inline __m256 v_half_sum(V v) {
    __m256 high = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v.a), 1));
    return _mm256_add_ps(_mm512_castps512_ps256(v.a), high);
}
#elif defined(__AVX2__) && defined(__FMA__)
static const int TILE = 2, ROWS = 4;
struct V { __m256 a, b; };
static inline V v_zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
static inline V v_load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
static inline V v_set(float s) { return {_mm256_set1_ps(s), _mm256_set1_ps(s)}; }
static inline V v_fma(V x, V y, V z) { return {_mm256_fmadd_ps(x.a, y.a, z.a), _mm256_fmadd_ps(x.b, y.b, z.b)}; }
static inline V v_from_bytes(__m128i b) {
    return {_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b)), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(b, 8)))};
}
static inline __m256 v_half_sum(V v) { return _mm256_add_ps(v.a, v.b); }
static inline __m128i bf16_8(__m256 f) {  // 8 floats rounded to bfloat16 (nearest even)
    const __m256i bits = _mm256_castps_si256(f);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7FFF))), 16);
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);  // lanes 0-3, 4-7
    return _mm256_castsi256_si128(packed);
}
static inline void v_store_bf16(V v, uint16_t* out) {
    _mm_storeu_si128((__m128i*)out, bf16_8(v.a));
    _mm_storeu_si128((__m128i*)(out + 8), bf16_8(v.b));
}
#else
#error "woq_kernel needs AVX2 and FMA (or AVX-512)"
#endif

static inline float v_sum(V v) {  // one fixed order of additions
    __m256 h = v_half_sum(v);
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_shuffle_ps(q, q, 1));
    return _mm_cvtss_f32(q);
}

// byte j of the result is 16 where bit j of `bits` is set, else 0 (j = 0..15)
static inline __m128i fifth_bits(uint32_t bits) {
    __m128i v = _mm_shuffle_epi8(_mm_set1_epi16((short)bits), _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
    const __m128i bit = _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
    return _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(v, bit), bit), _mm_set1_epi8(16));
}

// the 32 codes of one group: codes 0..15 in `low`, 16..31 in `high` (ggml's order for nibbles)
template <int LAYOUT>
static inline void decode(const uint8_t* p, __m128i* low, __m128i* high) {
    if (LAYOUT == BYTES) {
        *low = _mm_loadu_si128((const __m128i*)p);
        *high = _mm_loadu_si128((const __m128i*)(p + 16));
        return;
    }
    const __m128i nibbles = _mm_loadu_si128((const __m128i*)p), mask = _mm_set1_epi8(15);
    *low = _mm_and_si128(nibbles, mask);
    *high = _mm_and_si128(_mm_srli_epi16(nibbles, 4), mask);
    if (LAYOUT == NIBBLES_HIGH_BIT) {
        uint32_t bits;
        memcpy(&bits, p + 16, 4);
        *low = _mm_or_si128(*low, fifth_bits(bits & 0xFFFF));
        *high = _mm_or_si128(*high, fifth_bits(bits >> 16));
    }
}

static inline float as_float(const void* table, int half, int64_t i) {
    if (!half) return ((const float*)table)[i];
    return _cvtsh_ss(((const uint16_t*)table)[i]);
}

struct Weight {
    const uint8_t* codes;  // rows * groups * group_bytes(layout)
    const void* scale;     // rows * groups, float32 or float16; with scale_sub: rows * supers float16
    const void* offset;    // like scale, or null: offset = -zero * scale
    float zero;
    int half;  // scale and offset are float16
    int64_t rows, groups;
    const uint8_t* scale_sub;   // null, or K-quant sub-block scales: scale = scale[n, g / 8] * scale_sub[n, g]
    const uint8_t* offset_sub;  // likewise for the offsets (both or neither)
    int64_t out_stride;         // floats from one row of the output to the next (out points at this weight's column 0)
};

static const int SUB_PER_SUPER = 8;  // groups of 32 per K-quant super-block of 256

static inline float scale_at(const Weight& w, int64_t n, int64_t g) {
    if (w.scale_sub) {
        const int64_t supers = w.groups / SUB_PER_SUPER;
        return as_float(w.scale, 1, n * supers + g / SUB_PER_SUPER) * (float)w.scale_sub[n * w.groups + g];
    }
    return as_float(w.scale, w.half, n * w.groups + g);
}

static inline float offset_at(const Weight& w, int64_t n, int64_t g, float scale) {
    if (w.offset_sub) {
        const int64_t supers = w.groups / SUB_PER_SUPER;
        return as_float(w.offset, 1, n * supers + g / SUB_PER_SUPER) * (float)w.offset_sub[n * w.groups + g];
    }
    return w.offset ? as_float(w.offset, w.half, n * w.groups + g) : -w.zero * scale;
}

#if defined(__AVX512VNNI__) && defined(__AVX512VL__) || defined(__AVXVNNI__)
// ---- integer path: activations quantized to int8 per group of 32 (as llama.cpp's Q8 activations), codes
// multiplied as unsigned bytes against them with VNNI's dot product of four bytes (vpdpbusd), one float
// multiply-add per group. Each row of the pass is quantized on its own: rows stay independent.
#define WOQ_INT8 1

static inline __m256i dot_bytes(__m256i u8, __m256i s8) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u8, s8);
#else
    return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u8, s8);
#endif
}

static inline float sum8(__m256 v) {  // one fixed order of additions
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_shuffle_ps(q, q, 1));
    return _mm_cvtss_f32(q);
}

static inline int32_t sum8i(__m256i v) {
    __m128i q = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    q = _mm_add_epi32(q, _mm_unpackhi_epi64(q, q));
    q = _mm_add_epi32(q, _mm_shuffle_epi32(q, 1));
    return _mm_cvtsi128_si32(q);
}

// the 32 codes of one group as bytes, in the order of the group's activations
template <int LAYOUT>
static inline __m256i codes32(const uint8_t* p) {
    if (LAYOUT == BYTES) return _mm256_loadu_si256((const __m256i*)p);
#if defined(__AVX512BW__) && defined(__AVX512VL__)
    if (LAYOUT == NIBBLES_HIGH_BIT) {  // the fifth bits as a byte mask: one masked add sets them (code j <- bit j)
        __m128i low, high;
        decode<NIBBLES>(p, &low, &high);
        uint32_t bits;
        memcpy(&bits, p + 16, 4);
        const __m256i codes = _mm256_set_m128i(high, low);
        return _mm256_mask_add_epi8(codes, (__mmask32)bits, codes, _mm256_set1_epi8(16));
    }
#endif
    __m128i low, high;
    decode<LAYOUT>(p, &low, &high);
    return _mm256_set_m128i(high, low);
}

// x (batch, cols) float32 -> q int8 codes, d (batch, groups) scales and xo = d * sum(q) per group
static void quantize_rows(const float* x, int64_t batch, int64_t groups, int8_t* q, float* d, float* xo) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < batch * groups; i++) {
        const float* p = x + i * 32;
        __m256 a[4], amax = _mm256_setzero_ps();
        for (int j = 0; j < 4; j++) {
            a[j] = _mm256_loadu_ps(p + 8 * j);
            amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, a[j]));
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
        const float top = _mm_cvtss_f32(m4), scale = top / 127.0f, inv = top > 0.0f ? 127.0f / top : 0.0f;
        __m256i n[4], total = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++) {
            n[j] = _mm256_cvtps_epi32(_mm256_mul_ps(a[j], _mm256_set1_ps(inv)));  // round to nearest even
            total = _mm256_add_epi32(total, n[j]);
        }
        const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(n[0], n[1]), _mm256_packs_epi32(n[2], n[3]));
        _mm256_storeu_si256((__m256i*)(q + i * 32),
                            _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
        d[i] = scale;
        xo[i] = scale * (float)sum8i(total);
    }
}

// count values of a float16 or float32 table from index at, as float32
static void to_floats(const void* table, int half, int64_t at, int64_t count, float* out) {
    if (!half) {
        memcpy(out, (const float*)table + at, count * sizeof(float));
        return;
    }
    const uint16_t* h = (const uint16_t*)table + at;
    int64_t i = 0;
    for (; i + 8 <= count; i += 8) _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(h + i))));
    for (; i < count; i++) out[i] = _cvtsh_ss(h[i]);
}

// one weight row's scales and offsets as float32
static void row_scales(const Weight& w, int64_t n, float* s, float* o) {
    const int64_t G = w.groups, at = n * G;
    if (w.scale_sub) {  // scale_at and offset_at eight groups (a super-block) at a time: the same products
        for (int64_t g = 0; g < G; g += SUB_PER_SUPER) {
            const int64_t super = (at + g) / SUB_PER_SUPER;
            const __m256 d = _mm256_set1_ps(as_float(w.scale, 1, super)), m = _mm256_set1_ps(as_float(w.offset, 1, super));
            const __m256 sub_d = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)(w.scale_sub + at + g))));
            const __m256 sub_m = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)(w.offset_sub + at + g))));
            _mm256_storeu_ps(s + g, _mm256_mul_ps(d, sub_d));
            _mm256_storeu_ps(o + g, _mm256_mul_ps(m, sub_m));
        }
        return;
    }
    to_floats(w.scale, w.half, at, G, s);
    if (w.offset) {
        to_floats(w.offset, w.half, at, G, o);
    } else {
        for (int64_t g = 0; g < G; g++) o[g] = -w.zero * s[g];
    }
}

struct Pass {
    const int8_t* q;
    const float* d;
    const float* xo;
    int64_t batch;
};

// rows m0 .. m0 + MT - 1 of the pass against weight rows n0 .. n0 + NT - 1
template <int LAYOUT, int NT, int MT>
static void block(const Weight& w, int64_t n0, const Pass& x, int64_t m0, const float* bias, float* out,
                  float* table) {
    const int64_t G = w.groups, cols = G * 32, stride = G * group_bytes(LAYOUT);
    // per weight row and pass row: each group's scale times the activations' scale, and the offsets' part
    float offsets[NT][MT];
    float* s = table + NT * MT * G;  // one weight row's scales, then its offsets, as float32
    float* o = s + G;
    for (int t = 0; t < NT; t++) {
        row_scales(w, n0 + t, s, o);
        for (int m = 0; m < MT; m++) {
            const float *d = x.d + (m0 + m) * G, *xo = x.xo + (m0 + m) * G;
            float* st = table + (t * MT + m) * G;
            __m256 off8 = _mm256_setzero_ps();
            int64_t g = 0;
            for (; g + 8 <= G; g += 8) {
                _mm256_storeu_ps(st + g, _mm256_mul_ps(_mm256_loadu_ps(s + g), _mm256_loadu_ps(d + g)));
                off8 = _mm256_fmadd_ps(_mm256_loadu_ps(o + g), _mm256_loadu_ps(xo + g), off8);
            }
            float off = sum8(off8);
            for (; g < G; g++) {
                st[g] = s[g] * d[g];
                off += o[g] * xo[g];
            }
            offsets[t][m] = off;
        }
    }
    __m256 acc[NT][MT];
    for (int t = 0; t < NT; t++)
        for (int m = 0; m < MT; m++) acc[t][m] = _mm256_setzero_ps();
    // the next block's codes follow this block's: fetch them while this one computes (rows of a few hundred
    // bytes are too short for the hardware's stream prefetchers to ramp up)
    const char* next = (const char*)(w.codes + (n0 + NT) * stride);
    const char* end = (const char*)(w.codes + w.rows * stride);
    for (int64_t g = 0; g < G; g++) {
        const char* ahead = next + g * NT * group_bytes(LAYOUT);
        if (ahead + 64 < end) {
            _mm_prefetch(ahead, _MM_HINT_T0);
            _mm_prefetch(ahead + 64, _MM_HINT_T0);
        }
        __m256i q[MT];
        for (int m = 0; m < MT; m++) q[m] = _mm256_loadu_si256((const __m256i*)(x.q + (m0 + m) * cols + g * 32));
        for (int t = 0; t < NT; t++) {
            const __m256i c = codes32<LAYOUT>(w.codes + (n0 + t) * stride + g * group_bytes(LAYOUT));
            for (int m = 0; m < MT; m++) {
                const __m256 dot = _mm256_cvtepi32_ps(dot_bytes(c, q[m]));
                acc[t][m] = _mm256_fmadd_ps(dot, _mm256_broadcast_ss(table + (t * MT + m) * G + g), acc[t][m]);
            }
        }
    }
    for (int t = 0; t < NT; t++)
        for (int m = 0; m < MT; m++)
            out[(m0 + m) * w.out_stride + n0 + t] = sum8(acc[t][m]) + offsets[t][m] + (bias ? bias[n0 + t] : 0.0f);
}

static const int TILE8 = 4, ROWS8 = 4;  // a block of TILE8 rows of the pass by ROWS8 weight rows

template <int LAYOUT, int NT>
static void rows_of_pass(const Weight& w, int64_t n0, const Pass& x, const float* bias, float* out, float* table) {
    int64_t m0 = 0;
    for (; m0 + TILE8 <= x.batch; m0 += TILE8) block<LAYOUT, NT, TILE8>(w, n0, x, m0, bias, out, table);
    switch (x.batch - m0) {  // the rest, fewer than TILE8 rows: the same arithmetic per row
        case 7: block<LAYOUT, NT, (7 < TILE8 ? 7 : 1)>(w, n0, x, m0, bias, out, table); break;
        case 6: block<LAYOUT, NT, (6 < TILE8 ? 6 : 1)>(w, n0, x, m0, bias, out, table); break;
        case 5: block<LAYOUT, NT, (5 < TILE8 ? 5 : 1)>(w, n0, x, m0, bias, out, table); break;
        case 4: block<LAYOUT, NT, (4 < TILE8 ? 4 : 1)>(w, n0, x, m0, bias, out, table); break;
        case 3: block<LAYOUT, NT, 3>(w, n0, x, m0, bias, out, table); break;
        case 2: block<LAYOUT, NT, 2>(w, n0, x, m0, bias, out, table); break;
        case 1: block<LAYOUT, NT, 1>(w, n0, x, m0, bias, out, table); break;
        default: break;
    }
}

// the pass's rows as the blocks read them: quantized once for all the weights of a call
struct Activations {
    std::vector<int8_t> q;
    std::vector<float> d;  // scales per group, then d * sum(q) per group
    Pass pass;
    Activations(const float* x, int64_t batch, int64_t groups) : q(batch * groups * 32), d(batch * groups * 2) {
        pass = {q.data(), d.data(), d.data() + batch * groups, batch};
        quantize_rows(x, batch, groups, q.data(), d.data(), d.data() + batch * groups);
    }
};

static int64_t table_floats(int64_t groups) { return (ROWS8 * TILE8 + 2) * groups; }

// inside a parallel region: this weight's rows shared out among the threads (no barrier at the end)
template <int LAYOUT>
static void weight_rows(const Weight& w, const Activations& a, const float* bias, float* out, float* table) {
    const int64_t blocks = w.rows / ROWS8;
#pragma omp for schedule(static) nowait
    for (int64_t b = 0; b < blocks; b++) rows_of_pass<LAYOUT, ROWS8>(w, b * ROWS8, a.pass, bias, out, table);
#pragma omp single nowait
    for (int64_t n = blocks * ROWS8; n < w.rows; n++) rows_of_pass<LAYOUT, 1>(w, n, a.pass, bias, out, table);
}

#else
// ---- float path (no VNNI): codes dequantized to float32 in registers, float32 activations
#define WOQ_INT8 0
// rows m0 .. m0 + MT - 1 of the pass against weight rows n0 .. n0 + NT - 1: each group of the pass's rows is
// loaded once for NT weight rows, each weight group decoded once for MT rows of the pass
template <int LAYOUT, int NT, int MT>
static void block(const Weight& w, int64_t n0, const float* x, int64_t m0, const float* bias, float* out) {
    const int64_t cols = w.groups * 32, stride = w.groups * group_bytes(LAYOUT);
    V acc[NT][MT];
    for (int t = 0; t < NT; t++)
        for (int m = 0; m < MT; m++) acc[t][m] = v_zero();
    for (int64_t g = 0; g < w.groups; g++) {
        V x0[MT], x1[MT];
        for (int m = 0; m < MT; m++) {
            x0[m] = v_load(x + (m0 + m) * cols + g * 32);
            x1[m] = v_load(x + (m0 + m) * cols + g * 32 + 16);
        }
        for (int t = 0; t < NT; t++) {
            const float s = scale_at(w, n0 + t, g);
            const float o = offset_at(w, n0 + t, g, s);
            __m128i low, high;
            decode<LAYOUT>(w.codes + (n0 + t) * stride + g * group_bytes(LAYOUT), &low, &high);
            const V w0 = v_fma(v_from_bytes(low), v_set(s), v_set(o));
            const V w1 = v_fma(v_from_bytes(high), v_set(s), v_set(o));
            for (int m = 0; m < MT; m++) {
                acc[t][m] = v_fma(w0, x0[m], acc[t][m]);
                acc[t][m] = v_fma(w1, x1[m], acc[t][m]);
            }
        }
    }
    for (int t = 0; t < NT; t++)
        for (int m = 0; m < MT; m++)
            out[(m0 + m) * w.out_stride + n0 + t] = v_sum(acc[t][m]) + (bias ? bias[n0 + t] : 0.0f);
}

// all rows of the pass against weight rows n0 .. n0 + NT - 1, in tiles of at most TILE rows
template <int LAYOUT, int NT>
static void rows_of_pass(const Weight& w, int64_t n0, const float* x, int64_t batch, const float* bias, float* out) {
    int64_t m0 = 0;
    for (; m0 + TILE <= batch; m0 += TILE) block<LAYOUT, NT, TILE>(w, n0, x, m0, bias, out);
    switch (batch - m0) {  // the rest, fewer than TILE rows: the same arithmetic per row
        case 3: block<LAYOUT, NT, (3 < TILE ? 3 : 1)>(w, n0, x, m0, bias, out); break;
        case 2: block<LAYOUT, NT, (2 < TILE ? 2 : 1)>(w, n0, x, m0, bias, out); break;
        case 1: block<LAYOUT, NT, 1>(w, n0, x, m0, bias, out); break;
        default: break;
    }
}

// the pass's rows as the blocks read them (float32, as given)
struct Activations {
    const float* x;
    int64_t batch;
    Activations(const float* x, int64_t batch, int64_t) : x(x), batch(batch) {}
};

static int64_t table_floats(int64_t) { return 0; }

// inside a parallel region: this weight's rows shared out among the threads (no barrier at the end)
template <int LAYOUT>
static void weight_rows(const Weight& w, const Activations& a, const float* bias, float* out, float*) {
    const int64_t blocks = w.rows / ROWS;
#pragma omp for schedule(static) nowait
    for (int64_t b = 0; b < blocks; b++) rows_of_pass<LAYOUT, ROWS>(w, b * ROWS, a.x, a.batch, bias, out);
#pragma omp single nowait
    for (int64_t n = blocks * ROWS; n < w.rows; n++) rows_of_pass<LAYOUT, 1>(w, n, a.x, a.batch, bias, out);
}

#endif

// the weight as bfloat16 (rows, groups * 32): code * scale + offset in float32, rounded once
template <int LAYOUT>
static void dequantize_rows(const Weight& w, uint16_t* out, int threads) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t n = 0; n < w.rows; n++) {
        const uint8_t* codes = w.codes + n * w.groups * group_bytes(LAYOUT);
        for (int64_t g = 0; g < w.groups; g++) {
            const float s = scale_at(w, n, g), o = offset_at(w, n, g, s);
            __m128i low, high;
            decode<LAYOUT>(codes + g * group_bytes(LAYOUT), &low, &high);
            uint16_t* row = out + n * w.groups * 32 + g * 32;
            v_store_bf16(v_fma(v_from_bytes(low), v_set(s), v_set(o)), row);
            v_store_bf16(v_fma(v_from_bytes(high), v_set(s), v_set(o)), row + 16);
        }
    }
}

// One weight of a product (decoder/woq_linear.py: WoqJob mirrors it): scale_sub and offset_sub null, or a
// K-quant's sub-block integers (scale and offset then hold its float16 super-block values); its results go to
// columns column .. column + rows - 1 of the output.
struct Job {
    const uint8_t* codes;
    const void* scale;
    const void* offset;
    const uint8_t* scale_sub;
    const uint8_t* offset_sub;
    const float* bias;  // rows float32, or null
    int64_t layout, half, rows, groups, column;
    float zero;
};

static bool known(int64_t layout) { return layout == NIBBLES || layout == NIBBLES_HIGH_BIT || layout == BYTES; }

extern "C" {

// out (batch, out_cols) float32 = x (batch, groups * 32) float32 times each job's weight, side by side: the
// activations prepared once, the jobs' rows shared out in one parallel region. Returns 0, or -1 for a layout
// it does not know or jobs of different widths.
int woq_linear(const float* x, int64_t batch, const Job* jobs, int count, float* out, int64_t out_cols, int threads) {
    for (int j = 0; j < count; j++)
        if (!known(jobs[j].layout) || jobs[j].groups != jobs[0].groups) return -1;
    const Activations a(x, batch, jobs[0].groups);
#pragma omp parallel num_threads(threads)
    {
        std::vector<float> table(table_floats(jobs[0].groups));
        for (int j = 0; j < count; j++) {
            const Job& job = jobs[j];
            const Weight w = {job.codes, job.scale,  job.offset,     job.zero, (int)job.half,
                              job.rows,  job.groups, job.scale_sub, job.offset_sub, out_cols};
            float* o = out + job.column;
            switch (job.layout) {
                case NIBBLES: weight_rows<NIBBLES>(w, a, job.bias, o, table.data()); break;
                case NIBBLES_HIGH_BIT: weight_rows<NIBBLES_HIGH_BIT>(w, a, job.bias, o, table.data()); break;
                default: weight_rows<BYTES>(w, a, job.bias, o, table.data()); break;
            }
        }
    }
    return 0;
}

// the weight as bfloat16 into out (rows * groups * 32 values): for a prefill's dense product
int woq_dequantize_bf16(const uint8_t* codes, int layout, const void* scale, const void* offset, float zero, int half,
                        int64_t rows, int64_t groups, const uint8_t* scale_sub, const uint8_t* offset_sub,
                        uint16_t* out, int threads) {
    const Weight w = {codes, scale, offset, zero, half, rows, groups, scale_sub, offset_sub, groups * 32};
    switch (layout) {
        case NIBBLES: dequantize_rows<NIBBLES>(w, out, threads); return 0;
        case NIBBLES_HIGH_BIT: dequantize_rows<NIBBLES_HIGH_BIT>(w, out, threads); return 0;
        case BYTES: dequantize_rows<BYTES>(w, out, threads); return 0;
        default: return -1;
    }
}

int woq_vector_width(void) { return (int)(sizeof(V) / sizeof(float)); }

// 1: activations are quantized to int8 per group of 32 (the VNNI path); 0: float32 activations
int woq_int8_activations(void) { return WOQ_INT8; }
}
