// Weight-only quantized matrix products for the rows of a decoding pass (or a prefill chunk) on a CPU.
//
// out[m, n] = sum_k x[m, k] * w[n, k] + bias[n], with w[n, k] = code * scale + offset per group of 32 weights
// along a row, codes kept in the GGUF's own widths (4, 5 or 8 bits); or Q6_K's own form (6-bit codes, a float16
// per 256 weights times a signed 8-bit scale per 16: w = d * sub * (code - 32)). Activations are quantized to
// int8 per group of 32 (as llama.cpp's Q8_0 activations), or for a K-quant or Q6_K weight per super-block of 256
// (as llama.cpp's Q8_K): then a super-block's products stay integers until its end. Each group's product of codes
// and activations is an exact integer.
//
// Weights are read in TILES (decoder/woq_linear.py: tile_weight): 8 weight rows side by side, group by group,
// each group's codes as 8 chunk vectors of 32 bytes, chunk k holding codes 4k..4k+3 of each of the 8 rows. One
// integer dot of a chunk with 4 activation bytes broadcast (VNNI's vpdpbusd, or AVX2's maddubs/madd) gives all
// 8 rows' partial sums at once, so a decoded tile serves every row of the pass from registers: a wide pass reads
// and decodes each weight once, and costs per extra row only its integer dots and two float multiply-adds a
// group (lookahead's wide passes cost little). On AVX-512 a pass wider than a block of rows (a prefill chunk)
// takes the tiles two by two, one in each half of a 512-bit register (block2): the same arithmetic per lane.
//
// On a CPU with AMX-INT8 (the `avx512-amx` level) a prefill chunk's K-quant and Q6_K products go through tile
// products instead (amx_weight, below): the same integers by another route, so the same bits.
//
// On ARM64 a chunk is two 128-bit registers (rows 0-3, rows 4-7): the `neon` level multiplies each with one
// row's 4 activation bytes by `sdot` (ARMv8.2-A dot products, the bytes picked by lane: no broadcast), the
// `i8mm` level two rows of the pass at once by `usmmla` (two weight rows by two pass rows, 8 codes each, an
// instruction: chunks k and k + 1 zipped so that a weight row's 8 codes are side by side; a pair of rows'
// activations in four registers by one `ld4`) and an odd last row by `usdot`.
//
// Numerics, the same at every instruction-set level (scalar, AVX2, AVX2 + VNNI, AVX-512 VNNI, AVX-512 + AMX, NEON
// dot products, NEON + i8mm; bit for bit):
//   dot  = sum over the group's 32 codes of code * q                          (int32, exact)
//   acc  = fma((float)dot, scale[n, g] * d[m, g], acc)                         (float32, group by group)
//   acc  = fma(offset[n, g], d[m, g] * sum(q over the group), acc)
//   out  = acc + bias[n]
// For the super-block modes, d[m, b] one per super-block b of 8 groups, each sum over its groups (int32, exact):
//   K-quants (Q4_K, Q5_K: w = d * sc * code - dmin * mn, sc and mn 6-bit integers per group)
//     I    = sum over g of sc[n, g] * dot[g];  M = sum over g of mn[n, g] * sum(q over group g)
//     acc  = fma((float)I, d[n, b] * d[m, b], acc);  acc = fma((float)M, -dmin[n, b] * d[m, b], acc)
//   Q6_K (no offset: its codes are centred before the dot)
//     dot  = sub[n, 2g] * sum over codes 0..15 of (code - 32) * q + sub[n, 2g + 1] * the same over codes 16..31
//     acc  = fma((float)(sum over g of dot), d[n, b] * d[m, b], acc)
// (A super-block's int32 sums stay below 2^31: |I| <= 8 * 63 * 32 * 255 * 127 for byte codes.) Against the float
// steps group by group this takes a 256-row prefill chunk's K-quant products about 1.08x faster.
// Row independence: that sequence for out[m, n] does not depend on the number of rows in the pass, the tile of
// rows it falls in or the thread that runs it: a lookahead pass computes for each of its rows exactly what a
// one-token greedy pass computes.
//
// Built by decoder/woq_native.py for one instruction-set level (decoder/kernels/isa.py: -march=x86-64, haswell
// and AVX-512 flags; armv8-a, armv8.2-a+dotprod, +i8mm), loaded with ctypes; woq_isa() names the level a build
// runs.

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <atomic>
#include <new>
#include <vector>

#include "kernel_api.h"
#if defined(__AMX_TILE__) && defined(__AMX_INT8__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define WOQ_SIMD 1
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define WOQ_VNNI 2
#if defined(__AMX_TILE__) && defined(__AMX_INT8__)
#define WOQ_AMX 1
static const char* const ISA = "avx512-amx";
#else
static const char* const ISA = "avx512-vnni";
#endif
#elif defined(__AVXVNNI__)
#define WOQ_VNNI 1
static const char* const ISA = "avx2-vnni";
#else
#define WOQ_VNNI 0
static const char* const ISA = "avx2";
#endif
#else
#define WOQ_SIMD 0
#define WOQ_VNNI 0
#if defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD)
#include <arm_neon.h>
#if defined(__ARM_FEATURE_MATMUL_INT8)
#define WOQ_NEON 2
static const char* const ISA = "neon-i8mm";
#else
#define WOQ_NEON 1
static const char* const ISA = "neon-dotprod";
#endif
#else
#define WOQ_NEON 0
static const char* const ISA = "scalar";
#endif
#endif
#ifndef WOQ_NEON
#define WOQ_NEON 0
#endif
#ifndef WOQ_AMX
#define WOQ_AMX 0
#endif

enum Layout { NIBBLES = 4, NIBBLES_HIGH_BIT = 5, SIX_BITS = 6, BYTES = 8 };
enum Scales { HALF_ZERO = 0, HALF_PAIR = 1, FLOAT_PAIR = 2, K_QUANT = 3, SUB_SCALES = 4 };
static const int LANES = 8;    // weight rows in a tile
static const int GROUP = 32;   // weights per group
static const int CHUNKS = 8;   // 4-code chunks per group
static const int PREFETCH_BLOCKS = 16;  // tile-groups read ahead of the one multiplied
#if WOQ_SIMD
// Where a read-ahead goes on x86: the second-level cache. Asked into the first level (_MM_HINT_T0), each line held
// one of the core's few first-level miss buffers until it came, which capped the lines in flight: on an Intel
// Xeon (2 vCPUs) the 1.5B's one-token pass took 58 ms with T0 and 48-50 with T1 (0.62x and 0.73x the host's
// streaming read), the same at any distance from 8 to 64; wide passes, prefills and the AVX2 loops (bound by their
// arithmetic there) level (docs/benchmarks.md, "Read-ahead into the second-level cache")
#define PREFETCH_HINT _MM_HINT_T1
#endif
static const bool TWO_TILES = WOQ_VNNI == 2;  // AVX-512: a wide pass's tiles two by two (block2)
static const int SUPER = 8;    // groups per Q6_K super-block (one float16 d per row)
static const int SIX_ZERO = 32;  // the Q6_K code of weight 0

// Q6_K's tile-group (layout SIX_BITS, scale mode SUB_SCALES, 210 bytes for 256 weights: the GGUF's own bytes):
// 8 signed sub-block scales of codes 0..15 (rows 0..7), 8 of codes 16..31, then the float16 d of row g % 8 of the
// tile for the super-block of group g (the 8 rows' d of a super-block lie in its 8 tile-groups, one each), then
// the codes: 128 bytes of low nibbles as the NIBBLES layout, then two 32-byte vectors of high 2-bit pairs, chunk k's
// at bits 2 (k % 4) of vector k / 4 (byte 4j + b: code 4k + b of row j).
static inline int code_bytes(int layout) {
    return layout == BYTES ? 256 : layout == NIBBLES ? 128 : layout == SIX_BITS ? 192 : 160;
}
static inline int scale_bytes(int mode) {
    return mode == HALF_ZERO ? 16 : mode == HALF_PAIR ? 32 : mode == K_QUANT ? 16 : mode == SUB_SCALES ? 18 : 64;
}
// A K-quant's tile-group head (scale mode K_QUANT, 16 bytes: with the codes the GGUF's own 144 bytes (Q4_K) or 176
// (Q5_K) for 256 weights): bytes 0..7 row j's 6-bit sub-block scale and min, their low 4 bits (the scale's in the
// low nibble), bytes 8..9 the scales' high 2 bits (row j's at bits 2j), 10..11 the mins'; bytes 12..13 the float16
// d and 14..15 the float16 -dmin of row g % 8 for the super-block of group g (as Q6_K's d).
static const int K_D_AT = 12, K_MIN_AT = 14, SIX_D_AT = 16;  // a super-block value's bytes in a tile-group head

// row j's 6-bit sub-block scale (which = 0) or min (which = 1) in a K-quant tile-group head
static inline int k_sub_at(const uint8_t* p, int j, int which) {
    uint16_t high;
    memcpy(&high, p + 8 + 2 * which, 2);
    return ((p[j] >> (4 * which)) & 15) | (((high >> (2 * j)) & 3) << 4);
}

// the float16 super-block value of row j at byte `at` of a tile-group head: in the super-block's j-th tile-group
// (`first`: its first)
static inline uint16_t super_bits(const uint8_t* first, int64_t block, int j, int at) {
    uint16_t h;
    memcpy(&h, first + j * block + at, 2);
    return h;
}

static inline float half_to_float(uint16_t h) {  // exact (float16 -> float32 loses nothing)
    const uint32_t sign = (uint32_t)(h & 0x8000) << 16, exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
    uint32_t bits;
    if (exponent == 0x1F) {
        bits = sign | 0x7F800000u | (mantissa << 13);
    } else if (exponent != 0) {
        bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
    } else if (mantissa == 0) {
        bits = sign;
    } else {  // subnormal: normalize
        int e = -1;
        uint32_t m = mantissa;
        do {
            e++;
            m <<= 1;
        } while ((m & 0x400) == 0);
        bits = sign | ((uint32_t)(112 - e) << 23) | ((m & 0x3FF) << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

// one tile-group's scales and offsets, 8 rows, as float32 (the same products at every level); `first`: the first
// tile-group of its super-block, its tile-groups `block` bytes apart (K_QUANT's super-block values)
static inline void tile_scales(int mode, float zero, const uint8_t* p, const uint8_t* first, int64_t block, float* s,
                               float* o) {
    const uint16_t* h = (const uint16_t*)p;
    for (int j = 0; j < LANES; j++) {
        switch (mode) {
            case HALF_ZERO:
                s[j] = half_to_float(h[j]);
                o[j] = -zero * s[j];
                break;
            case HALF_PAIR:
                s[j] = half_to_float(h[j]);
                o[j] = half_to_float(h[LANES + j]);
                break;
            case K_QUANT:  // super-block values (float16) times the group's 6-bit integers
                s[j] = half_to_float(super_bits(first, block, j, K_D_AT)) * (float)k_sub_at(p, j, 0);
                o[j] = half_to_float(super_bits(first, block, j, K_MIN_AT)) * (float)k_sub_at(p, j, 1);
                break;
            default:
                memcpy(&s[j], p + 4 * j, 4);
                memcpy(&o[j], p + 32 + 4 * j, 4);
        }
    }
}

// code i (0..31) of row j (0..7) of a tile-group's code block, as the tiling stored it
static inline int code_at(int layout, const uint8_t* c, int j, int i) {
    const int k = i / 4, b = i % 4, at = 4 * j + b;
    if (layout == BYTES) return c[32 * k + at];
    const int nibble = k < 4 ? (c[32 * k + at] & 15) : (c[32 * (k - 4) + at] >> 4);
    if (layout == NIBBLES) return nibble;
    if (layout == SIX_BITS) return nibble | (((c[128 + 32 * (k / 4) + at] >> (2 * (k % 4))) & 3) << 4);
    return nibble | (((c[128 + at] >> k) & 1) << 4);
}


#if WOQ_SIMD
// ---- vector levels: 8 lanes of float or int32 in a ymm register (the same on AVX2 and AVX-512 VL)

static inline __m256i broadcast4(const int8_t* q) {
    int32_t v;
    memcpy(&v, q, 4);
    return _mm256_set1_epi32(v);
}

#if WOQ_VNNI
// acc plus, in each int32 lane, the dot of its 4 unsigned codes with the 4 signed activation bytes of q
static inline __m256i dot4(__m256i acc, __m256i codes, __m256i q) {
#if WOQ_VNNI == 2
    return _mm256_dpbusd_epi32(acc, codes, q);
#else
    return _mm256_dpbusd_avx_epi32(acc, codes, q);
#endif
}
#endif

typedef __m256i I8;  // eight int32 dots, one per weight row of a tile

struct F8 {
    __m256 v;
};
static inline F8 f_zero() { return {_mm256_setzero_ps()}; }
static inline void f_store(F8 a, float* p) { _mm256_storeu_ps(p, a.v); }
// acc + dot * (s * d)
static inline F8 f_scaled(F8 acc, __m256i dot, F8 s, float d) {
    const __m256 scale = _mm256_mul_ps(s.v, _mm256_set1_ps(d));
    return {_mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, acc.v)};
}
// acc + dot * (s * d) + o * xo, in that order of roundings
static inline F8 f_step(F8 acc, __m256i dot, F8 s, float d, F8 o, float xo) {
    return {_mm256_fmadd_ps(o.v, _mm256_set1_ps(xo), f_scaled(acc, dot, s, d).v)};
}
static inline __m256 halves(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)p)); }
// the 8 rows' float16 super-block values at byte `at` of the heads of the super-block from `first`
static inline F8 super_scales(const uint8_t* first, int64_t block, int at) {
    uint16_t h[LANES];
    for (int j = 0; j < LANES; j++) h[j] = super_bits(first, block, j, at);
    return {halves((const uint8_t*)h)};
}
// a K-quant tile-group's 6-bit sub-block scales and mins, the 8 rows' as int32 lanes
static inline void k_ints(const uint8_t* p, I8* scale, I8* min) {
    const __m256i low = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)p));
    uint32_t bits;
    memcpy(&bits, p + 8, 4);
    const __m256i high = _mm256_set1_epi32((int32_t)bits), at = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    const __m256i three = _mm256_set1_epi32(3), fifteen = _mm256_set1_epi32(15);
    *scale = _mm256_or_si256(_mm256_and_si256(low, fifteen),
                             _mm256_slli_epi32(_mm256_and_si256(_mm256_srlv_epi32(high, at), three), 4));
    const __m256i at_min = _mm256_add_epi32(at, _mm256_set1_epi32(16));
    *min = _mm256_or_si256(_mm256_srli_epi32(low, 4),
                           _mm256_slli_epi32(_mm256_and_si256(_mm256_srlv_epi32(high, at_min), three), 4));
}
static inline I8 i_zero() { return _mm256_setzero_si256(); }
static inline I8 i_add(I8 a, I8 b) { return _mm256_add_epi32(a, b); }
static inline I8 i_mul_add(I8 acc, I8 a, I8 b) { return _mm256_add_epi32(acc, _mm256_mullo_epi32(a, b)); }
// two groups' 6-bit mins of each row as the int16 pair (min of g, min of g + 1) of its lane
static inline I8 i_pairs(I8 first, I8 second) {
    return _mm256_or_si256(_mm256_and_si256(first, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(second, 16));
}
// acc + each lane's pair of mins times a row's pair of activation sums (qsum of g, of g + 1), as int16 pairs
static inline I8 pair_dot(I8 acc, I8 pairs, int32_t sums) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi32(sums)));
}
static inline void scales8(int mode, float zero, const uint8_t* p, F8* s, F8* o) {
    switch (mode) {
        case HALF_ZERO:
            s->v = halves(p);
            o->v = _mm256_mul_ps(_mm256_set1_ps(-zero), s->v);
            return;
        case HALF_PAIR:
            s->v = halves(p);
            o->v = halves(p + 16);
            return;
        default:
            s->v = _mm256_loadu_ps((const float*)p);
            o->v = _mm256_loadu_ps((const float*)(p + 32));
    }
}

#elif WOQ_NEON
// ---- ARM64 levels: a tile's 8 lanes of float or int32 in two 128-bit registers (rows 0-3, rows 4-7)

struct I8 {
    int32x4_t lo, hi;
};

struct F8 {
    float32x4_t lo, hi;
};
static inline F8 f_zero() { return {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}; }
static inline void f_store(F8 a, float* p) {
    vst1q_f32(p, a.lo);
    vst1q_f32(p + 4, a.hi);
}
// acc + dot * (s * d)
static inline float32x4_t f_scaled4(float32x4_t acc, int32x4_t dot, float32x4_t s, float d) {
    return vfmaq_f32(acc, vcvtq_f32_s32(dot), vmulq_n_f32(s, d));
}
static inline F8 f_scaled(F8 acc, I8 dot, F8 s, float d) {
    return {f_scaled4(acc.lo, dot.lo, s.lo, d), f_scaled4(acc.hi, dot.hi, s.hi, d)};
}
// acc + dot * (s * d) + o * xo, in that order of roundings
static inline F8 f_step(F8 acc, I8 dot, F8 s, float d, F8 o, float xo) {
    const F8 a = f_scaled(acc, dot, s, d);
    return {vfmaq_n_f32(a.lo, o.lo, xo), vfmaq_n_f32(a.hi, o.hi, xo)};
}
static inline F8 halves(const uint8_t* p) {  // exact, as half_to_float
    const float16x8_t h = vreinterpretq_f16_u8(vld1q_u8(p));
    return {vcvt_f32_f16(vget_low_f16(h)), vcvt_high_f32_f16(h)};
}
static inline F8 floats8(const uint8_t* p) { return {vld1q_f32((const float*)p), vld1q_f32((const float*)p + 4)}; }
// the 8 rows' float16 super-block values at byte `at` of the heads of the super-block from `first`
static inline F8 super_scales(const uint8_t* first, int64_t block, int at) {
    uint16_t h[LANES];
    for (int j = 0; j < LANES; j++) h[j] = super_bits(first, block, j, at);
    return halves((const uint8_t*)h);
}
// rows 4h .. 4h + 3's 6-bit integers of a K-quant head: low 4 bits from `low` (shifted right by `nibble`), the high
// two from `high` (row j's at bit 2j + pairs)
static inline int32x4_t k_subs4(uint32x4_t low, int nibble, uint32x4_t high, int pairs, int h) {
    const int32_t at[4] = {-(pairs + 8 * h), -(pairs + 8 * h + 2), -(pairs + 8 * h + 4), -(pairs + 8 * h + 6)};
    const uint32x4_t top = vandq_u32(vshlq_u32(high, vld1q_s32(at)), vdupq_n_u32(3));
    const uint32x4_t bottom = vandq_u32(vshlq_u32(low, vdupq_n_s32(-nibble)), vdupq_n_u32(15));
    return vreinterpretq_s32_u32(vorrq_u32(bottom, vshlq_n_u32(top, 4)));
}
// a K-quant tile-group's 6-bit sub-block scales and mins, the 8 rows' as int32 lanes
static inline void k_ints(const uint8_t* p, I8* scale, I8* min) {
    const uint16x8_t wide = vmovl_u8(vld1_u8(p));
    const uint32x4_t lo = vmovl_u16(vget_low_u16(wide)), hi = vmovl_high_u16(wide);
    uint32_t bits;
    memcpy(&bits, p + 8, 4);
    const uint32x4_t high = vdupq_n_u32(bits);
    *scale = {k_subs4(lo, 0, high, 0, 0), k_subs4(hi, 0, high, 0, 1)};
    *min = {k_subs4(lo, 4, high, 16, 0), k_subs4(hi, 4, high, 16, 1)};
}
static inline I8 i_zero() { return {vdupq_n_s32(0), vdupq_n_s32(0)}; }
static inline I8 i_add(I8 a, I8 b) { return {vaddq_s32(a.lo, b.lo), vaddq_s32(a.hi, b.hi)}; }
static inline I8 i_mul_add(I8 acc, I8 a, I8 b) { return {vmlaq_s32(acc.lo, a.lo, b.lo), vmlaq_s32(acc.hi, a.hi, b.hi)}; }
static inline I8 i_set1(int32_t v) { return {vdupq_n_s32(v), vdupq_n_s32(v)}; }
static inline void scales8(int mode, float zero, const uint8_t* p, F8* s, F8* o) {
    switch (mode) {
        case HALF_ZERO:
            *s = halves(p);
            *o = {vmulq_n_f32(s->lo, -zero), vmulq_n_f32(s->hi, -zero)};
            return;
        case HALF_PAIR:
            *s = halves(p);
            *o = halves(p + 16);
            return;
        default:
            *s = floats8(p);
            *o = floats8(p + 32);
    }
}

#else
// ---- scalar level: the same arithmetic, lane by lane

template <int LAYOUT>
struct Codes {
    uint8_t c[GROUP * LANES];  // row j's code i at [j * 32 + i]
};

template <int LAYOUT>
static inline void decode(const uint8_t* p, Codes<LAYOUT>* out) {
    for (int j = 0; j < LANES; j++)
        for (int i = 0; i < GROUP; i++) out->c[j * GROUP + i] = (uint8_t)code_at(LAYOUT, p, j, i);
}

struct I8 {
    int32_t v[LANES];
};

template <int LAYOUT>
static inline I8 group_dot(const Codes<LAYOUT>& w, const int8_t* q, int32_t) {
    I8 out;
    for (int j = 0; j < LANES; j++) {
        int32_t total = 0;
        for (int i = 0; i < GROUP; i++) total += (int32_t)w.c[j * GROUP + i] * (int32_t)q[i];
        out.v[j] = total;
    }
    return out;
}

struct F8 {
    float v[LANES];
};
static inline F8 f_zero() { return F8{{0, 0, 0, 0, 0, 0, 0, 0}}; }
static inline void f_store(F8 a, float* p) { memcpy(p, a.v, sizeof(a.v)); }
static inline void scales8(int mode, float zero, const uint8_t* p, F8* s, F8* o) {
    tile_scales(mode, zero, p, nullptr, 0, s->v, o->v);
}
// a K-quant tile-group's 6-bit sub-block scales and mins, the 8 rows'
static inline void k_ints(const uint8_t* p, I8* scale, I8* min) {
    for (int j = 0; j < LANES; j++) {
        scale->v[j] = k_sub_at(p, j, 0);
        min->v[j] = k_sub_at(p, j, 1);
    }
}
static inline I8 i_zero() { return I8{{0, 0, 0, 0, 0, 0, 0, 0}}; }
static inline I8 i_add(I8 a, I8 b) {
    for (int j = 0; j < LANES; j++) a.v[j] += b.v[j];
    return a;
}
static inline I8 i_mul_add(I8 acc, I8 a, I8 b) {
    for (int j = 0; j < LANES; j++) acc.v[j] += a.v[j] * b.v[j];
    return acc;
}
static inline I8 i_set1(int32_t v) { return I8{{v, v, v, v, v, v, v, v}}; }
static inline F8 f_scaled(F8 acc, I8 dot, F8 s, float d) {
    for (int j = 0; j < LANES; j++) acc.v[j] = fmaf((float)dot.v[j], s.v[j] * d, acc.v[j]);
    return acc;
}
static inline F8 f_step(F8 acc, I8 dot, F8 s, float d, F8 o, float xo) {
    acc = f_scaled(acc, dot, s, d);
    for (int j = 0; j < LANES; j++) acc.v[j] = fmaf(o.v[j], xo, acc.v[j]);
    return acc;
}
static inline F8 super_scales(const uint8_t* first, int64_t block, int at) {
    F8 s;
    for (int j = 0; j < LANES; j++) s.v[j] = half_to_float(super_bits(first, block, j, at));
    return s;
}
#endif

#if WOQ_SIMD || WOQ_NEON
static const int ROW_TILE = 8;  // rows of the pass a decoded tile serves from registers
#else
static const int ROW_TILE = 4;
#endif

// ---- activations: each row quantized on its own, per group of 32 (for a K-quant or Q6_K weight per super-block
// of 256): q = round(x * 127 / max|x|) (half to even), d = max|x| / 127, qsum = sum(q) per group, xo = d * qsum
// (per group only). Stored by blocks of ROW_TILE rows (the last block: the
// rest), each block group by group with its rows' group g side by side: a tile's rows are at fixed offsets from
// one pointer per group, and a block's groups follow each other (one block of a wide prefill chunk's rows is
// read group after group; laid out group by group over all the rows, a block's consecutive groups were
// thousands of bytes apart, in the same few sets of the first-level cache).
// One group's 32 values to q (int8), returning sum(q); top = max |x|, inv = 127 / top (or 0).
#if WOQ_SIMD
static inline float group_top(const float* p) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_setzero_ps();  // max(|x|, m): m where |x| is NaN, as fmaxf(top, |x|) ignores it
    for (int k = 0; k < GROUP; k += 8) m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(p + k)), m);
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);  // the largest |x| (max is exact: any order gives it)
}
// p[k] * inv rounded half to even (the default rounding, as nearbyintf), narrowed to bytes in order
static inline int32_t group_codes(const float* p, float inv, int8_t* q) {
    const __m256 scale = _mm256_set1_ps(inv);
    __m256i n[4];
    for (int v = 0; v < 4; v++) n[v] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(p + 8 * v), scale));
    const __m256i words = _mm256_packs_epi16(_mm256_packs_epi32(n[0], n[1]), _mm256_packs_epi32(n[2], n[3]));
    const __m256i bytes = _mm256_permutevar8x32_epi32(words, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i*)q, bytes);
    const __m256i total = _mm256_add_epi32(_mm256_add_epi32(n[0], n[1]), _mm256_add_epi32(n[2], n[3]));
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(total), _mm256_extracti128_si256(total, 1));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4E));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1));
    return _mm_cvtsi128_si32(t);
}
#else
static inline float group_top(const float* p) {
    float top = 0.0f;
    for (int k = 0; k < GROUP; k++) top = fmaxf(top, fabsf(p[k]));
    return top;
}
static inline int32_t group_codes(const float* p, float inv, int8_t* q) {
    int32_t total = 0;
    for (int k = 0; k < GROUP; k++) {
        const int32_t n = (int32_t)nearbyintf(p[k] * inv);
        q[k] = (int8_t)n;
        total += n;
    }
    return total;
}
#endif

// The centring of a Q6_K half-group for the x86 levels' products of unsigned codes (six_half): -32 times the
// sums of the half's activations. With VNNI one int32 (each lane's dots sum all 16 products); without, the sums
// that each 16-bit lane of a chunk's maddubs pairs, (q[4k] + q[4k + 1], q[4k + 2] + q[4k + 3]) over the half's
// chunks k, as two int16 in one int32 (|.| <= 32 * 8 * 127 = 32512).
static inline int32_t six_centre(const int8_t* q, int half) {
    int32_t low = 0, high = 0;
    for (int k = 4 * half; k < 4 * half + 4; k++) {
        low += q[4 * k] + q[4 * k + 1];
        high += q[4 * k + 2] + q[4 * k + 3];
    }
    if (WOQ_VNNI) return -SIX_ZERO * (low + high);
    return (int32_t)(uint16_t)(int16_t)(-SIX_ZERO * low) | (int32_t)((uint32_t)(uint16_t)(int16_t)(-SIX_ZERO * high) << 16);
}

// a vector whose storage starts on a 64-byte line, so that no tile row or vector load straddles two lines: on a
// Sapphire Rapids a tile load from a buffer 16 bytes off a line (where malloc may put it) took about 6x as long,
// and the tile path's products ran 1.19-1.28x slower (docs/runs/2026-11-28-aligned-tiles-spr/)
template <class T>
struct LineAllocator {
    using value_type = T;
    LineAllocator() = default;
    template <class U>
    LineAllocator(const LineAllocator<U>&) {}
    T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(64))); }
    void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(64)); }
    template <class U>
    bool operator==(const LineAllocator<U>&) const { return true; }
    template <class U>
    bool operator!=(const LineAllocator<U>&) const { return false; }
};
template <class T>
using Lines = std::vector<T, LineAllocator<T>>;

struct Activations {
    Lines<int8_t> q;
    Lines<float> d, xo;    // xo: per group only (the super-block kernels take qsum or `pairs` instead)
    Lines<int32_t> qsum;
    Lines<int32_t> six;    // `centred`: six_centre of each row's groups, halves 0 and 1 (at 2 * index)
    Lines<int32_t> pairs;  // `supers`, x86: at an even group's index, its qsum and the next group's as int16
    int64_t batch, groups;
    // where row `row`'s group g is: its block's first row m0 times the groups, then g times the block's rows
    int64_t index(int64_t row, int64_t g) const {
        const int64_t m0 = row - row % ROW_TILE, rows = batch - m0 < ROW_TILE ? batch - m0 : ROW_TILE;
        return m0 * groups + g * rows + (row - m0);
    }
    // `centred`: also each group's Q6_K centring (an x86 level's product with a Q6_K weight). `supers`: quantized
    // per super-block of 8 groups (d = max|x| / 127 over its 256 values, the same in each of its groups' entries),
    // for the K-quants and Q6_K (as llama.cpp's Q8_K); else per group.
    Activations(const float* x, int64_t batch, int64_t groups, int threads, bool centred, bool supers)
        : q(batch * groups * GROUP), d(batch * groups), xo(supers ? 0 : batch * groups), qsum(batch * groups),
          six(centred ? 2 * batch * groups : 0), pairs(supers && WOQ_SIMD ? batch * groups : 0), batch(batch),
          groups(groups) {
        const int64_t span = supers ? SUPER : 1, count = batch * groups / span;  // groups of one scale
        // a prefill chunk's: a few million values, shared out
#pragma omp parallel for schedule(static) num_threads(threads) if (count * span >= 4096)
        for (int64_t i = 0; i < count; i++) {
            const int64_t row = i * span / groups, g0 = i * span % groups;
            const float* p = x + (row * groups + g0) * GROUP;
            float top = 0.0f;
            for (int j = 0; j < span; j++) top = fmaxf(top, group_top(p + j * GROUP));
            const float inv = top > 0.0f ? 127.0f / top : 0.0f;
            for (int j = 0; j < span; j++) {
                const int64_t at = index(row, g0 + j);
                const int32_t total = group_codes(p + j * GROUP, inv, &q[at * GROUP]);
                d[at] = top / 127.0f;
                qsum[at] = total;
                if (!supers) xo[at] = d[at] * (float)total;
                if (centred)
                    for (int half = 0; half < 2; half++) six[2 * at + half] = six_centre(&q[at * GROUP], half);
                if (!pairs.empty() && j % 2 == 1) {
                    const int64_t even = index(row, g0 + j - 1);
                    pairs[even] = (int32_t)(((uint32_t)qsum[even] & 0xFFFF) | ((uint32_t)total << 16));
                }
            }
        }
    }
};

struct Tiled {
    const uint8_t* data;  // tiles * groups blocks of scale_bytes(mode) + code_bytes(layout)
    int layout, mode;
    float zero;
    int64_t rows, groups, block;
    int64_t pairs;  // tiles 0 .. pairs - 1 lie two by two, group by group (tile_at); 0: every tile on its own
    const float* bias;
    float* out;          // this weight's column 0 of the output
    int64_t out_stride;  // floats from one output row to the next
};

// Where tile t's first tile-group lies, and how far apart its tile-groups are (stride_of). The plain order: tile
// after tile, each group by group (a stride of one block). The paired order (decoder/kernels/woq_layout.py,
// WoqWeight.paired), for an AVX-512 build's two-tile loop: tiles 2i and 2i + 1 interleaved group by group (tile 2i's
// group g, then tile 2i + 1's, then group g + 1 of each: a stride of two blocks), so that the loop that takes them
// together reads one stream of memory, not two (the 1.5B's one-token products-only pass ran 1.26x faster so than
// two by two from two streams, and 1.16x faster than one tile at a time, on a Zen 5); an odd last tile follows in
// the plain order. Any loop reads either order through these two.
static inline const uint8_t* tile_at(const Tiled& w, int64_t t) {
    return w.data + (t < w.pairs ? (t - t % 2) * w.groups + t % 2 : t * w.groups) * w.block;
}
static inline int64_t stride_of(const Tiled& w, int64_t t) { return t < w.pairs ? 2 * w.block : w.block; }

// out = acc + bias for tile t's rows of the weight and rows m0 .. m0 + MT - 1 of the pass
template <int MT>
static inline void store_block(const Tiled& w, int64_t t, const F8* acc, int64_t m0) {
    for (int m = 0; m < MT; m++) {
        float lanes[LANES];
        f_store(acc[m], lanes);
        for (int j = 0; j < LANES; j++) {
            const int64_t n = t * LANES + j;
            if (n < w.rows) w.out[(m0 + m) * w.out_stride + n] = lanes[j] + (w.bias ? w.bias[n] : 0.0f);
        }
    }
}

#if WOQ_SIMD
// ---- vector levels: chunk by chunk. A chunk's codes are decoded into one register and multiplied with each
// row's 4 activation bytes at once; so few registers are live whatever the rows (decoding all 8 chunks first
// spills them to the stack when a tile serves 8 rows).

// an empty barrier: the sum is in a register here. Without it the compiler reassociates the integer sums of a
// tile's rows into trees that compute every product first, and those (up to 8 rows x 8 chunks) spill to the
// stack.
static inline void in_register(__m256i& v) { __asm__("" : "+x"(v)); }

// chunk k of a tile-group's codes: 4- and 5-bit codes as they are, bytes as they are for VNNI's unsigned
// operand and as code - 128 (signed) for AVX2's sign transfer
template <int LAYOUT>
static inline __m256i chunk(const uint8_t* c, int k) {
    if (LAYOUT == BYTES) {
        const __m256i v = _mm256_loadu_si256((const __m256i*)(c + 32 * k));
        return WOQ_VNNI ? v : _mm256_xor_si256(v, _mm256_set1_epi8((char)0x80));
    }
    __m256i v = _mm256_loadu_si256((const __m256i*)(c + 32 * (k & 3)));
    if (k >= 4) v = _mm256_srli_epi16(v, 4);
    v = _mm256_and_si256(v, _mm256_set1_epi8(15));
    if (LAYOUT == NIBBLES_HIGH_BIT) {  // bit k of byte 4j+b: the fifth bit of chunk k's code, moved to bit 4
        const __m256i bits = _mm256_loadu_si256((const __m256i*)(c + 128));
        const __m256i at4 = k <= 4 ? _mm256_slli_epi16(bits, 4 - k) : _mm256_srli_epi16(bits, k - 4);
        v = _mm256_or_si256(v, _mm256_and_si256(at4, _mm256_set1_epi8(16)));
    }
    return v;
}

// chunk k of a Q6_K tile-group's codes as they are (0 .. 63)
static inline __m256i six_chunk(const uint8_t* c, int k) {
    const __m256i pairs = _mm256_loadu_si256((const __m256i*)(c + 128 + 32 * (k / 4)));
    const int at = 2 * (k % 4);  // the chunk's pair, moved to bits 4-5
    const __m256i high = at <= 4 ? _mm256_slli_epi16(pairs, 4 - at) : _mm256_srli_epi16(pairs, at - 4);
    return _mm256_or_si256(chunk<NIBBLES>(c, k), _mm256_and_si256(high, _mm256_set1_epi8(0x30)));
}

// 8 rows' signed sub-block scales s (8 bytes) as 8 int32 lanes of two int16 s each: madd's multiplier
static inline __m256i sub_pairs(const uint8_t* p) {
    const __m128i bytes = _mm_loadl_epi64((const __m128i*)p);
    return _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(bytes, bytes));
}

// one chunk's products of unsigned codes and activation bytes added to a half's sums (VNNI: int32 dots; else
// maddubs pairs summed in 16 bits)
static inline __m256i six_add(__m256i sums, __m256i codes, __m256i q) {
#if WOQ_VNNI
    return dot4(sums, codes, q);
#else
    return _mm256_add_epi16(sums, _mm256_maddubs_epi16(codes, q));
#endif
}

// a half's sums times the 8 rows' signed sub-block scales at p, into 32 bits (VNNI: int32 products; else madd of
// the two 16-bit sums of a lane)
static inline __m256i six_scaled(__m256i sums, const uint8_t* p) {
#if WOQ_VNNI
    return _mm256_mullo_epi32(sums, _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)p)));
#else
    return _mm256_madd_epi16(sums, sub_pairs(p));
#endif
}

// half H of a Q6_K group (chunks 4H .. 4H + 3): each row's codes as they are (unsigned) times its activations,
// from the half's centring (-32 times the activations' sums: six_centre), so each lane ends at the centred codes'
// sum; then times the weight rows' sub-block scales, added to dot (H = 1) or put there (H = 0). With VNNI the
// sums are int32 (|.| <= 16 * 63 * 127) and the scales multiply them as int32. Without, they are 16-bit sums
// of maddubs pairs, multiplied by madd into 32 bits. Exact either way: no product saturates (a maddubs pair is
// at most 2 * 63 * 127), and a 16-bit lane's final sum, the centred codes' products, is at most 4 * 2 * 32 * 127
// < 2^15 (16-bit adds wrap: the order of the terms does not matter).
template <int MT, int H>
static inline void six_half(const uint8_t* p, const uint8_t* c, const int8_t* q, const int32_t* centre, I8* dot) {
    __m256i sums[MT];
    for (int m = 0; m < MT; m++) sums[m] = _mm256_set1_epi32(centre[2 * m + H]);
#pragma GCC unroll 4
    for (int k = 4 * H; k < 4 * H + 4; k++) {
        const __m256i codes = six_chunk(c, k);
        for (int m = 0; m < MT; m++) {
            sums[m] = six_add(sums[m], codes, broadcast4(q + m * GROUP + 4 * k));
            in_register(sums[m]);
        }
    }
    for (int m = 0; m < MT; m++) {
        const __m256i scaled = six_scaled(sums[m], p + LANES * H);
        dot[m] = H ? _mm256_add_epi32(dot[m], scaled) : scaled;
    }
}

// each row's exact Q6_K integer dot of the tile-group (as the scalar six_dots), at every x86-64 vector level;
// row m's centrings at centre + 2 m
template <int MT>
static inline void six_dots(const uint8_t* p, const uint8_t* c, const int8_t* q, const int32_t* centre, I8* dot) {
    six_half<MT, 0>(p, c, q, centre, dot);
    six_half<MT, 1>(p, c, q, centre, dot);
}

#elif WOQ_NEON
// ---- ARM64 levels: chunk by chunk, each chunk's two halves (rows 0-3, rows 4-7) decoded once

// half h (0: rows 0-3, 1: rows 4-7) of chunk k of a tile-group's codes, as unsigned bytes
template <int LAYOUT>
static inline uint8x16_t chunk_half(const uint8_t* c, int k, int h) {
    if (LAYOUT == BYTES) return vld1q_u8(c + 32 * k + 16 * h);
    const uint8x16_t v = vld1q_u8(c + 32 * (k & 3) + 16 * h);
    const uint8x16_t nibble = k >= 4 ? vshrq_n_u8(v, 4) : vandq_u8(v, vdupq_n_u8(15));
    if (LAYOUT == NIBBLES) return nibble;
    // bit k of byte 4j+b: the fifth bit of chunk k's code, moved to bit 4 (a negative shift moves right)
    const uint8x16_t at4 = vshlq_u8(vld1q_u8(c + 128 + 16 * h), vdupq_n_s8((int8_t)(4 - k)));
    return vorrq_u8(nibble, vandq_u8(at4, vdupq_n_u8(16)));
}

// acc + the dots of each 4 codes of a chunk half with the 4 activation bytes in lane LANE of x: usdot where i8mm
// has it (unsigned codes as they are), else sdot (4- and 5-bit codes as they are, bytes as code - 128)
template <int LAYOUT, int LANE>
static inline int32x4_t lane_dot(int32x4_t acc, uint8x16_t codes, int8x16_t x) {
#if WOQ_NEON == 2
    return vusdotq_laneq_s32(acc, codes, x, LANE);
#else
    const uint8x16_t shifted = LAYOUT == BYTES ? veorq_u8(codes, vdupq_n_u8(0x80)) : codes;
    return vdotq_laneq_s32(acc, vreinterpretq_s8_u8(shifted), x, LANE);
#endif
}
static const int32_t BYTES_SHIFT = WOQ_NEON == 2 ? 0 : 128;  // what lane_dot takes away from each byte code

// chunks K .. 7 against rows 0 .. MT - 1, lane by lane: each half with the row's 4 activation bytes of chunk K,
// lane K % 4 of its K / 4-th 16 bytes (a constant lane: the chunks are unrolled by the template)
template <int LAYOUT, int MT, int K>
static inline void lane_chunks(const uint8_t* c, const int8_t* q, I8* dot) {
    const uint8x16_t lo = chunk_half<LAYOUT>(c, K, 0), hi = chunk_half<LAYOUT>(c, K, 1);
    for (int m = 0; m < MT; m++) {
        const int8x16_t x = vld1q_s8(q + m * GROUP + 16 * (K / 4));
        dot[m].lo = lane_dot<LAYOUT, K % 4>(dot[m].lo, lo, x);
        dot[m].hi = lane_dot<LAYOUT, K % 4>(dot[m].hi, hi, x);
    }
    if constexpr (K + 1 < CHUNKS) lane_chunks<LAYOUT, MT, K + 1>(c, q, dot);
}

// each row's exact integer dots of the tile-group's codes with its 32 activations (as group_dot), lane by
// lane; bytes less BYTES_SHIFT: (code - shift) . q + shift * sum(q)
template <int LAYOUT, int MT>
static inline void lane_rows(const uint8_t* c, const int8_t* q, const int32_t* qsum, I8* dot) {
    for (int m = 0; m < MT; m++) {
        const int32x4_t start = vdupq_n_s32(LAYOUT == BYTES ? BYTES_SHIFT * qsum[m] : 0);
        dot[m] = {start, start};
    }
    lane_chunks<LAYOUT, MT, 0>(c, q, dot);
}

// half h (rows 0-3, 4-7) of chunk k of a Q6_K tile-group's codes, centred: code - 32 as signed bytes
static inline int8x16_t six_chunk_half(const uint8_t* c, int k, int h) {
    const uint8x16_t pairs = vld1q_u8(c + 128 + 32 * (k / 4) + 16 * h);
    const uint8x16_t high = vshlq_u8(pairs, vdupq_n_s8((int8_t)(4 - 2 * (k % 4))));  // the pair to bits 4-5
    const uint8x16_t code = vorrq_u8(chunk_half<NIBBLES>(c, k, h), vandq_u8(high, vdupq_n_u8(0x30)));
    return vsubq_s8(vreinterpretq_s8_u8(code), vdupq_n_s8(SIX_ZERO));
}

// chunks K .. the end of K's half against rows 0 .. MT - 1 by sdot, lane by lane (as lane_chunks), into part
template <int MT, int K>
static inline void six_lane_chunks(const uint8_t* c, const int8_t* q, I8* part) {
    const int8x16_t lo = six_chunk_half(c, K, 0), hi = six_chunk_half(c, K, 1);
    for (int m = 0; m < MT; m++) {
        const int8x16_t x = vld1q_s8(q + m * GROUP + 16 * (K / 4));
        part[m].lo = vdotq_laneq_s32(part[m].lo, lo, x, K % 4);
        part[m].hi = vdotq_laneq_s32(part[m].hi, hi, x, K % 4);
    }
    if constexpr (K % 4 != 3) six_lane_chunks<MT, K + 1>(c, q, part);
}

// each row's exact Q6_K integer dot of the tile-group (as the scalar six_dots): per half of the group the centred
// codes' dots by sdot (at both ARM64 levels), times the weight rows' sub-block scales
template <int MT>
static inline void six_dots(const uint8_t* p, const uint8_t* c, const int8_t* q, const int32_t*, I8* dot) {
    I8 part[MT];
    for (int m = 0; m < MT; m++) part[m] = {vdupq_n_s32(0), vdupq_n_s32(0)};
    six_lane_chunks<MT, 0>(c, q, part);
    const int16x8_t first = vmovl_s8(vld1_s8((const int8_t*)p));
    for (int m = 0; m < MT; m++)
        dot[m] = {vmulq_s32(part[m].lo, vmovl_s16(vget_low_s16(first))), vmulq_s32(part[m].hi, vmovl_high_s16(first))};
    for (int m = 0; m < MT; m++) part[m] = {vdupq_n_s32(0), vdupq_n_s32(0)};
    six_lane_chunks<MT, 4>(c, q, part);
    const int16x8_t second = vmovl_s8(vld1_s8((const int8_t*)p + LANES));
    for (int m = 0; m < MT; m++)
        dot[m] = {vmlaq_s32(dot[m].lo, part[m].lo, vmovl_s16(vget_low_s16(second))),
                  vmlaq_s32(dot[m].hi, part[m].hi, vmovl_high_s16(second))};
}
#endif

#if WOQ_NEON == 2
// chunk pairs P .. 3 (chunks 2P and 2P + 1 zipped: each weight row's 8 codes 8P .. 8P + 7 side by side) against
// the pairs of rows of the pass by usmmla: acc[4 r + i] += [w(2i) . x(2r), w(2i) . x(2r + 1), w(2i + 1) . x(2r),
// w(2i + 1) . x(2r + 1)] over those 8 codes; x[r].val[P]: pass rows 2r and 2r + 1's activations 8P .. 8P + 7
template <int LAYOUT, int PAIRS, int P>
static inline void mmla_chunks(const uint8_t* c, const int64x2x4_t* x, int32x4_t* acc) {
    const uint32x4_t a0 = vreinterpretq_u32_u8(chunk_half<LAYOUT>(c, 2 * P, 0));
    const uint32x4_t b0 = vreinterpretq_u32_u8(chunk_half<LAYOUT>(c, 2 * P + 1, 0));
    const uint32x4_t a1 = vreinterpretq_u32_u8(chunk_half<LAYOUT>(c, 2 * P, 1));
    const uint32x4_t b1 = vreinterpretq_u32_u8(chunk_half<LAYOUT>(c, 2 * P + 1, 1));
    const uint8x16_t w[4] = {vreinterpretq_u8_u32(vzip1q_u32(a0, b0)), vreinterpretq_u8_u32(vzip2q_u32(a0, b0)),
                             vreinterpretq_u8_u32(vzip1q_u32(a1, b1)), vreinterpretq_u8_u32(vzip2q_u32(a1, b1))};
    for (int r = 0; r < PAIRS; r++)
        for (int i = 0; i < 4; i++) acc[4 * r + i] = vusmmlaq_s32(acc[4 * r + i], w[i], vreinterpretq_s8_s64(x[r].val[P]));
    if constexpr (P + 1 < CHUNKS / 2) mmla_chunks<LAYOUT, PAIRS, P + 1>(c, x, acc);
}

// each row's exact integer dots of the tile-group's codes with its 32 activations (as group_dot): rows two by
// two by usmmla (unsigned codes of every layout as they are), an odd last row by usdot
template <int LAYOUT, int MT>
static inline void group_dots(const uint8_t* c, const int8_t* q, const int32_t* qsum, I8* dot) {
    constexpr int PAIRS = MT / 2;
    if constexpr (PAIRS > 0) {
        int32x4_t acc[4 * PAIRS];
        int64x2x4_t x[PAIRS];  // one ld4 a pair of rows (their 64 bytes side by side): 8 bytes of each a register
        for (int r = 0; r < PAIRS; r++) x[r] = vld4q_s64((const int64_t*)(q + 2 * r * GROUP));
        for (int i = 0; i < 4 * PAIRS; i++) acc[i] = vdupq_n_s32(0);
        mmla_chunks<LAYOUT, PAIRS, 0>(c, x, acc);
        for (int r = 0; r < PAIRS; r++) {  // even lanes: pass row 2r; odd lanes: pass row 2r + 1
            const int32x4_t* a = acc + 4 * r;
            dot[2 * r] = {vuzp1q_s32(a[0], a[1]), vuzp1q_s32(a[2], a[3])};
            dot[2 * r + 1] = {vuzp2q_s32(a[0], a[1]), vuzp2q_s32(a[2], a[3])};
        }
    }
    if constexpr (MT % 2 == 1) lane_rows<LAYOUT, 1>(c, q + (MT - 1) * GROUP, qsum + MT - 1, dot + MT - 1);
}

#elif WOQ_NEON
template <int LAYOUT, int MT>
static inline void group_dots(const uint8_t* c, const int8_t* q, const int32_t* qsum, I8* dot) {
    lane_rows<LAYOUT, MT>(c, q, qsum, dot);
}
#endif

#if WOQ_VNNI
// each row's exact integer dots of the tile-group's codes with its 32 activations (as group_dot); row m's at
// q + m * GROUP
template <int LAYOUT, int MT>
static inline void group_dots(const uint8_t* c, const int8_t* q, const int32_t*, I8* dot) {
    if constexpr (MT == 1) {  // one row: two chains of four dots (even and odd chunks), not one of eight
        __m256i even = _mm256_setzero_si256(), odd = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int k = 0; k < CHUNKS; k += 2) {
            even = dot4(even, chunk<LAYOUT>(c, k), broadcast4(q + 4 * k));
            odd = dot4(odd, chunk<LAYOUT>(c, k + 1), broadcast4(q + 4 * k + 4));
        }
        dot[0] = _mm256_add_epi32(even, odd);  // exact integers: the same sum in any order
        return;
    }
    for (int m = 0; m < MT; m++) dot[m] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int k = 0; k < CHUNKS; k++) {
        const __m256i codes = chunk<LAYOUT>(c, k);
        for (int m = 0; m < MT; m++) {
            dot[m] = dot4(dot[m], codes, broadcast4(q + m * GROUP + 4 * k));
            in_register(dot[m]);
        }
    }
}

#elif WOQ_SIMD
// AVX2 without VNNI: products summed in 16 bits while they cannot overflow.

// chunks k0 .. k0 + count - 1 of unsigned codes below 2^LOG against each row, summed in 16 bits (a pair is at
// most 2 * 31 * 127; four chunks' pairs of 5-bit codes, or eight of 4-bit codes, stay below 2^15), then to 32
// bits by madd with `times` (each lane's two 16-bit sums times its two 16-bit factors: ones for the dot itself)
template <int LAYOUT, int MT>
static inline void small_dots(const uint8_t* c, const int8_t* q, int k0, int count, __m256i* dot, bool add,
                              __m256i times = _mm256_set1_epi16(1)) {
    __m256i sums[MT];
    for (int m = 0; m < MT; m++) sums[m] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int k = k0; k < k0 + count; k++) {
        const __m256i codes = chunk<LAYOUT>(c, k);
        for (int m = 0; m < MT; m++) {
            sums[m] = _mm256_add_epi16(sums[m], _mm256_maddubs_epi16(codes, broadcast4(q + m * GROUP + 4 * k)));
            in_register(sums[m]);
        }
    }
    for (int m = 0; m < MT; m++) {
        const __m256i wide = _mm256_madd_epi16(sums[m], times);
        dot[m] = add ? _mm256_add_epi32(dot[m], wide) : wide;
    }
}

// each row's exact integer dots of the tile-group's codes with its 32 activations (as group_dot); row m's at
// q + m * GROUP
template <int LAYOUT, int MT>
static inline void group_dots(const uint8_t* c, const int8_t* q, const int32_t* qsum, I8* dot) {
    if (LAYOUT == NIBBLES) {
        small_dots<LAYOUT, MT>(c, q, 0, 8, dot, false);
    } else if (LAYOUT == NIBBLES_HIGH_BIT) {
        small_dots<LAYOUT, MT>(c, q, 0, 4, dot, false);
        small_dots<LAYOUT, MT>(c, q, 4, 4, dot, true);
    } else {  // (code - 128) . q by sign transfer (|.| <= 128 * 127 * 2 per pair), then + 128 sum(q)
        const __m256i ones = _mm256_set1_epi16(1);
        for (int m = 0; m < MT; m++) dot[m] = _mm256_set1_epi32(128 * qsum[m]);
#pragma GCC unroll 8
        for (int k = 0; k < CHUNKS; k++) {
            const __m256i codes = chunk<LAYOUT>(c, k), magnitude = _mm256_abs_epi8(codes);
            for (int m = 0; m < MT; m++) {
                const __m256i pairs = _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(broadcast4(q + m * GROUP + 4 * k), codes));
                dot[m] = _mm256_add_epi32(dot[m], _mm256_madd_epi16(pairs, ones));
                in_register(dot[m]);
            }
        }
    }
}

#elif !WOQ_NEON
// each row's exact integer dots of the tile-group's codes: decoded once, then one group_dot per row
template <int LAYOUT, int MT>
static inline void group_dots(const uint8_t* c, const int8_t* q, const int32_t* qsum, I8* dot) {
    Codes<LAYOUT> codes;
    decode<LAYOUT>(c, &codes);
    for (int m = 0; m < MT; m++) dot[m] = group_dot<LAYOUT>(codes, q + m * GROUP, qsum[m]);
}

// each row's exact Q6_K integer dot of the tile-group: per half of the group (codes 0..15, 16..31) the centred
// codes times the activations, times the weight row's signed sub-block scale of that half (p: 8 of the first
// half, then 8 of the second)
template <int MT>
static inline void six_dots(const uint8_t* p, const uint8_t* c, const int8_t* q, const int32_t*, I8* dot) {
    Codes<SIX_BITS> codes;
    decode<SIX_BITS>(c, &codes);
    for (int m = 0; m < MT; m++) {
        for (int j = 0; j < LANES; j++) {
            int32_t total = 0;
            for (int h = 0; h < 2; h++) {
                int32_t part = 0;
                for (int i = 16 * h; i < 16 * h + 16; i++)
                    part += ((int32_t)codes.c[j * GROUP + i] - SIX_ZERO) * (int32_t)q[m * GROUP + i];
                total += (int32_t)(int8_t)p[LANES * h + j] * part;
            }
            dot[m].v[j] = total;
        }
    }
}
#endif

// total + each row's exact integer dot of a K-quant tile-group times the weight rows' sub-block scales (`scale`:
// one in each int32 lane). At AVX2 without VNNI, 4- and 5-bit codes: the 16-bit sums' madd takes each lane's 6-bit
// scale twice in place of ones (a sum below 2^15 times a scale below 2^6: the same integer), so no 32-bit multiply
template <int LAYOUT, int MT>
static inline void add_scaled_dots(const uint8_t* c, const int8_t* q, const int32_t* qsum, I8 scale, I8* total) {
    I8 dot[MT];
#if WOQ_SIMD && !WOQ_VNNI
    if constexpr (LAYOUT != BYTES) {
        const __m256i twice = _mm256_or_si256(scale, _mm256_slli_epi32(scale, 16));
        small_dots<LAYOUT, MT>(c, q, 0, LAYOUT == NIBBLES ? 8 : 4, dot, false, twice);
        if (LAYOUT == NIBBLES_HIGH_BIT) small_dots<LAYOUT, MT>(c, q, 4, 4, dot, true, twice);
        for (int m = 0; m < MT; m++) total[m] = _mm256_add_epi32(total[m], dot[m]);
        return;
    }
#endif
    group_dots<LAYOUT, MT>(c, q, qsum, dot);
    for (int m = 0; m < MT; m++) total[m] = i_mul_add(total[m], dot[m], scale);
}

// every group's scales and offsets of tile t (a per-group scale mode), as block decodes them: s and o of group g at
// 2g, 2g + 1
static void tile_group_scales(const Tiled& w, int64_t t, F8* out) {
    const uint8_t* start = tile_at(w, t);
    const int64_t stride = stride_of(w, t);
    for (int64_t g = 0; g < w.groups; g++) scales8(w.mode, w.zero, start + g * stride, &out[2 * g], &out[2 * g + 1]);
}

// the tile-group PREFETCH_BLOCKS groups after p (its tile's groups `stride` bytes apart) asked into the cache (x86:
// the second level, PREFETCH_HINT; ARM64: the first, not measured on a real core): rows of a few hundred bytes are
// too short for the hardware's stream prefetchers to ramp up; 16 blocks (3-4 KB) ahead: at 8 rows a block takes
// long enough that 4 ahead arrived late
__attribute__((always_inline)) static inline void prefetch_ahead(const uint8_t* p, int64_t block, int64_t stride) {
#if WOQ_SIMD
    for (int64_t ahead = 0; ahead < block; ahead += 64)
        _mm_prefetch((const char*)(p + PREFETCH_BLOCKS * stride + ahead), PREFETCH_HINT);
#elif WOQ_NEON
    for (int64_t ahead = 0; ahead < block; ahead += 64) __builtin_prefetch(p + PREFETCH_BLOCKS * stride + ahead, 0, 3);
#else
    (void)p;
    (void)block;
    (void)stride;
#endif
}

// tile t of a weight of a per-group scale mode against rows m0 .. m0 + MT - 1 of the pass; KEPT: its scales and
// offsets are read from `scales` (tile_group_scales), else decoded here (a compile-time choice: a one-token pass's
// loop is unchanged)
template <int LAYOUT, int MT, bool KEPT>
__attribute__((noinline)) static void block(const Tiled& w, int64_t t, const Activations& a, int64_t m0,
                                            const F8* scales) {
    const int64_t G = w.groups, head = scale_bytes(w.mode);
    F8 acc[MT];
    for (int m = 0; m < MT; m++) acc[m] = f_zero();
    const int64_t first = a.index(m0, 0), step = a.index(m0, 1) - first;  // row m0's groups lie `step` apart
    const uint8_t* start = tile_at(w, t);
    const int64_t stride = stride_of(w, t);
    for (int64_t g = 0; g < G; g++) {
        const uint8_t* p = start + g * stride;
        prefetch_ahead(p, w.block, stride);
        const int64_t at = first + g * step;  // row m0's group g; row m0 + m's is m after it (its block's MT rows)
        I8 dot[MT];
        group_dots<LAYOUT, MT>(p + head, &a.q[at * GROUP], &a.qsum[at], dot);
        F8 s, o;
        if constexpr (KEPT) {
            s = scales[2 * g];
            o = scales[2 * g + 1];
        } else {
            scales8(w.mode, w.zero, p, &s, &o);
        }
        for (int m = 0; m < MT; m++) acc[m] = f_step(acc[m], dot[m], s, a.d[at + m], o, a.xo[at + m]);
    }
    store_block<MT>(w, t, acc, m0);
}

// ---- super-block modes (K-quants, Q6_K): integer sums over a super-block of 8 groups, then its float steps.
// A K-quant super-block's integers, each row's sub-block scales and mins, and its d and -dmin (KEPT: decoded once
// per tile for a pass wider than a block of rows).
struct SuperScales {
    I8 scale[SUPER], min[SUPER];
    F8 d, dmin;
};

// each super-block's integers and values of K-quant tile t, into out[0 .. groups / 8 - 1]
static void tile_super_scales(const Tiled& w, int64_t t, SuperScales* out) {
    const int64_t stride = stride_of(w, t);
    for (int64_t b = 0; b < w.groups / SUPER; b++) {
        const uint8_t* first = tile_at(w, t) + b * SUPER * stride;
        out[b].d = super_scales(first, stride, K_D_AT);
        out[b].dmin = super_scales(first, stride, K_MIN_AT);
        for (int j = 0; j < SUPER; j++) k_ints(first + j * stride, &out[b].scale[j], &out[b].min[j]);
    }
}

// tile t of a K-quant or Q6_K weight against rows m0 .. m0 + MT - 1 of the pass (the activations quantized per
// super-block); KEPT: the K-quant integers and values from `kept` (tile_super_scales), else decoded here
template <int LAYOUT, int MT, bool KEPT>
__attribute__((noinline)) static void super_block(const Tiled& w, int64_t t, const Activations& a, int64_t m0,
                                                  const SuperScales* kept) {
    const int64_t G = w.groups, head = scale_bytes(w.mode);
    F8 acc[MT];
    for (int m = 0; m < MT; m++) acc[m] = f_zero();
    const int64_t first = a.index(m0, 0), step = a.index(m0, 1) - first, stride = stride_of(w, t);
    for (int64_t b = 0; b < G / SUPER; b++) {
        const uint8_t* start = tile_at(w, t) + b * SUPER * stride;  // the super-block's first tile-group
        I8 total[MT];
        for (int m = 0; m < MT; m++) total[m] = i_zero();
        I8 decoded[SUPER];  // the groups' mins (KEPT: in `kept`)
        for (int j = 0; j < SUPER; j++) {
            const uint8_t* p = start + j * stride;
            prefetch_ahead(p, w.block, stride);
            const int64_t at = first + (b * SUPER + j) * step;
            I8 dot[MT];
            if constexpr (LAYOUT == SIX_BITS) {
                six_dots<MT>(p, p + head, &a.q[at * GROUP], WOQ_SIMD ? a.six.data() + 2 * at : nullptr, dot);
                for (int m = 0; m < MT; m++) total[m] = i_add(total[m], dot[m]);
            } else {
                I8 scale;
                if constexpr (KEPT)
                    scale = kept[b].scale[j];
                else
                    k_ints(p, &scale, &decoded[j]);
                add_scaled_dots<LAYOUT, MT>(p + head, &a.q[at * GROUP], &a.qsum[at], scale, total);
            }
        }
        const int64_t at = first + b * SUPER * step;  // the super-block's activation scale: each group's d
        const F8 d = KEPT && LAYOUT != SIX_BITS ? kept[b].d : super_scales(start, stride, LAYOUT == SIX_BITS ? SIX_D_AT : K_D_AT);
        for (int m = 0; m < MT; m++) acc[m] = f_scaled(acc[m], total[m], d, a.d[at + m]);
        if constexpr (LAYOUT != SIX_BITS) {  // the mins times each group's activation sum (x86: two groups a step)
            const I8* min = KEPT ? kept[b].min : decoded;
            for (int m = 0; m < MT; m++) total[m] = i_zero();
#if WOQ_SIMD
            for (int j = 0; j < SUPER; j += 2) {
                const I8 pairs = i_pairs(min[j], min[j + 1]);
                const int32_t* sums = &a.pairs[first + (b * SUPER + j) * step];
                for (int m = 0; m < MT; m++) total[m] = pair_dot(total[m], pairs, sums[m]);
            }
#else
            for (int j = 0; j < SUPER; j++) {
                const int32_t* sums = &a.qsum[first + (b * SUPER + j) * step];
                for (int m = 0; m < MT; m++) total[m] = i_mul_add(total[m], min[j], i_set1(sums[m]));
            }
#endif
            const F8 dmin = KEPT ? kept[b].dmin : super_scales(start, stride, K_MIN_AT);
            for (int m = 0; m < MT; m++) acc[m] = f_scaled(acc[m], total[m], dmin, a.d[at + m]);
        }
    }
    store_block<MT>(w, t, acc, m0);
}

#if WOQ_VNNI == 2
// ---- AVX-512: two tiles side by side, tile t in the low half of a 512-bit register and tile t + 1 in its high
// half, for the rows of a wide pass: one broadcast of a row's 4 activation bytes feeds 16 weight rows' dots, and
// each instruction does two tiles' work (the broadcasts, not the dots, bound the 256-bit loop). Each lane computes
// what `block` computes for it: the same integers, then the same float steps in the same order, so the bits are
// those of one tile at a time.

static inline void in_register(__m512i& v) { __asm__("" : "+v"(v)); }
static inline __m512i two(const uint8_t* low, const uint8_t* high) {  // 32 bytes from each
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i*)low)),
                              _mm256_loadu_si256((const __m256i*)high), 1);
}
static inline __m512 two(F8 low, F8 high) { return _mm512_insertf32x8(_mm512_castps256_ps512(low.v), high.v, 1); }

// chunk k of two tile-groups' codes (at c0 and c1), as chunk<LAYOUT> of each
template <int LAYOUT>
static inline __m512i chunk2(const uint8_t* c0, const uint8_t* c1, int k) {
    if (LAYOUT == BYTES) return two(c0 + 32 * k, c1 + 32 * k);
    __m512i v = two(c0 + 32 * (k & 3), c1 + 32 * (k & 3));
    if (k >= 4) v = _mm512_srli_epi16(v, 4);
    v = _mm512_and_si512(v, _mm512_set1_epi8(15));
    if (LAYOUT == NIBBLES_HIGH_BIT) {
        const __m512i bits = two(c0 + 128, c1 + 128);
        const __m512i at4 = k <= 4 ? _mm512_slli_epi16(bits, 4 - k) : _mm512_srli_epi16(bits, k - 4);
        v = _mm512_or_si512(v, _mm512_and_si512(at4, _mm512_set1_epi8(16)));
    }
    return v;
}

// chunk k of two Q6_K tile-groups' codes, as six_chunk of each
static inline __m512i six_chunk2(const uint8_t* c0, const uint8_t* c1, int k) {
    const __m512i pairs = two(c0 + 128 + 32 * (k / 4), c1 + 128 + 32 * (k / 4));
    const int at = 2 * (k % 4);
    const __m512i high = at <= 4 ? _mm512_slli_epi16(pairs, 4 - at) : _mm512_srli_epi16(pairs, at - 4);
    return _mm512_or_si512(chunk2<NIBBLES>(c0, c1, k), _mm512_and_si512(high, _mm512_set1_epi8(0x30)));
}

// half h's signed sub-block scales of two Q6_K tile-groups (heads p0, p1): each weight row's in an int32 lane, as
// two() lays out the tiles
static inline __m512i six_subs2(const uint8_t* p0, const uint8_t* p1, int h) {
    return _mm512_cvtepi8_epi32(_mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i*)(p0 + LANES * h)),
                                                   _mm_loadl_epi64((const __m128i*)(p1 + LANES * h))));
}

static inline __m512i dot16(__m512i acc, __m512i codes, const int8_t* q) {
    int32_t v;
    memcpy(&v, q, 4);
    return _mm512_dpbusd_epi32(acc, codes, _mm512_set1_epi32(v));
}

// Each row's sum in CHAINS independent chains (chunk k in chain k % CHAINS), added at the end (exact integers: the
// same sum). A dot waits on the one before it in its chain: on a Zen 5 one core issued 2.0 G dots a second in 2
// chains, 7.1 G in 8, 7.8 G in 12 (its rate), and with a broadcast from memory beside each dot, as here, 5.0 G in 8
// chains and 8.0 G in 12 or 16 (docs/benchmarks.md, "The two-tile loop with fewer instructions"); so one row takes
// 4 chains and 2 to 8 rows 2 each. (The 256-bit loops gained nothing so: they keep one chain a row, two for one.)
template <int MT>
static constexpr int dot_chains() { return MT == 1 ? 4 : MT <= 8 ? 2 : 1; }
// each row's integer dots of two tile-groups (as group_dots of each, in dot_chains<MT>() chains)
template <int LAYOUT, int MT>
static inline void group_dots2(const uint8_t* c0, const uint8_t* c1, const int8_t* q, __m512i* dot) {
    constexpr int CHAINS = dot_chains<MT>();
    __m512i part[CHAINS][MT];
    for (int c = 0; c < CHAINS; c++)
        for (int m = 0; m < MT; m++) part[c][m] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int k = 0; k < CHUNKS; k++) {
        const __m512i codes = chunk2<LAYOUT>(c0, c1, k);
        for (int m = 0; m < MT; m++) {
            part[k % CHAINS][m] = dot16(part[k % CHAINS][m], codes, q + m * GROUP + 4 * k);
            in_register(part[k % CHAINS][m]);
        }
    }
    for (int m = 0; m < MT; m++) {  // exact integers: the same sum in any order
        dot[m] = part[0][m];
        for (int c = 1; c < CHAINS; c++) dot[m] = _mm512_add_epi32(dot[m], part[c][m]);
    }
}

// half H of two Q6_K tile-groups (heads p0, p1; codes c0, c1), as six_half of each
template <int MT, int H>
static inline void six_half2(const uint8_t* p0, const uint8_t* p1, const uint8_t* c0, const uint8_t* c1,
                             const int8_t* q, const int32_t* centre, __m512i* dot) {
    __m512i sums[MT];
    for (int m = 0; m < MT; m++) sums[m] = _mm512_set1_epi32(centre[2 * m + H]);
#pragma GCC unroll 4
    for (int k = 4 * H; k < 4 * H + 4; k++) {
        const __m512i codes = six_chunk2(c0, c1, k);
        for (int m = 0; m < MT; m++) {
            sums[m] = dot16(sums[m], codes, q + m * GROUP + 4 * k);
            in_register(sums[m]);
        }
    }
    const __m512i scale = six_subs2(p0, p1, H);
    for (int m = 0; m < MT; m++) {
        const __m512i scaled = _mm512_mullo_epi32(sums[m], scale);
        dot[m] = H ? _mm512_add_epi32(dot[m], scaled) : scaled;
    }
}

// acc + dot * (s * d) and then + o * xo, as f_scaled and f_step lane by lane
static inline __m512 f_scaled2(__m512 acc, __m512i dot, __m512 s, float d) {
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(s, _mm512_set1_ps(d)), acc);
}
static inline __m512 f_step2(__m512 acc, __m512i dot, __m512 s, float d, __m512 o, float xo) {
    return _mm512_fmadd_ps(o, _mm512_set1_ps(xo), f_scaled2(acc, dot, s, d));
}

// the accumulators of two tiles side by side stored as each tile's rows
template <int MT>
static inline void store_block2(const Tiled& w, int64_t t, const __m512* acc, int64_t m0) {
    F8 low[MT], high[MT];
    for (int m = 0; m < MT; m++) {
        low[m].v = _mm512_castps512_ps256(acc[m]);
        high[m].v = _mm512_extractf32x8_ps(acc[m], 1);
    }
    store_block<MT>(w, t, low, m0);
    store_block<MT>(w, t + 1, high, m0);
}

// Where a pair's loop reads ahead: each tile's group PREFETCH_BLOCKS after its group g; past the tiles' last group,
// the next pair's first groups (in the first block of rows: later blocks find the tiles in the cache). Its
// addresses are worked out once a call (pair_ahead), so that a group's prefetch costs an address and its lines:
// worked out group by group they had been about 60 of a one-row loop's 145 instructions a tile-group pair. In the
// paired order the two tiles are one stream (tile_at).
struct PairAhead {
    const uint8_t* here;  // tile t's group 0
    const uint8_t* next;  // tile t + 2's group 0, where a pair follows and this is the first block of rows; else null
    int64_t stride, next_stride, gap, next_gap;  // between a tile's groups; from tile t to t + 1 (t + 2 to t + 3)
};
static inline PairAhead pair_ahead(const Tiled& w, int64_t t, int64_t m0) {
    const int64_t tiles = (w.rows + LANES - 1) / LANES;
    const bool next = m0 == 0 && t + 3 < tiles;
    return {tile_at(w, t), next ? tile_at(w, t + 2) : nullptr, stride_of(w, t), next ? stride_of(w, t + 2) : 0,
            tile_at(w, t + 1) - tile_at(w, t), next ? tile_at(w, t + 3) - tile_at(w, t + 2) : 0};
}
// (always inlined: GCC otherwise judged a call that only prefetches to have no effect and dropped it)
__attribute__((always_inline)) static inline void prefetch_pair(const PairAhead& ahead, int64_t groups, int64_t block,
                                                                int64_t g) {
    const int64_t later = g + PREFETCH_BLOCKS;
    const uint8_t* p;
    int64_t gap;
    if (later < groups) {
        p = ahead.here + later * ahead.stride;
        gap = ahead.gap;
    } else if (ahead.next != nullptr) {
        p = ahead.next + (later - groups) * ahead.next_stride;
        gap = ahead.next_gap;
    } else {
        return;  // the weight's last pair, or a later block of rows: nothing to read ahead
    }
    for (int64_t at = 0; at < block; at += 64) {
        _mm_prefetch((const char*)(p + at), PREFETCH_HINT);
        _mm_prefetch((const char*)(p + gap + at), PREFETCH_HINT);
    }
}

static inline __m512i two(__m256i low, __m256i high) { return _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1); }

// two K-quant tile-groups' 6-bit sub-block scales and mins (heads p0, p1), as k_ints of each side by side (two() of
// theirs), in one 512-bit sequence
static inline void k_ints2(const uint8_t* p0, const uint8_t* p1, __m512i* scale, __m512i* min) {
    const __m512i low = _mm512_cvtepu8_epi32(
        _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i*)p0), _mm_loadl_epi64((const __m128i*)p1)));
    uint32_t bits0, bits1;
    memcpy(&bits0, p0 + 8, 4);
    memcpy(&bits1, p1 + 8, 4);
    const __m512i high = two(_mm256_set1_epi32((int32_t)bits0), _mm256_set1_epi32((int32_t)bits1));
    const __m512i at = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 2, 4, 6, 8, 10, 12, 14);
    const __m512i three = _mm512_set1_epi32(3), fifteen = _mm512_set1_epi32(15);
    *scale = _mm512_or_si512(_mm512_and_si512(low, fifteen),
                             _mm512_slli_epi32(_mm512_and_si512(_mm512_srlv_epi32(high, at), three), 4));
    const __m512i at_min = _mm512_add_epi32(at, _mm512_set1_epi32(16));
    *min = _mm512_or_si512(_mm512_srli_epi32(low, 4),
                           _mm512_slli_epi32(_mm512_and_si512(_mm512_srlv_epi32(high, at_min), three), 4));
}

// Where a pair's super-block values lie (K-quant: float16 d at K_D_AT and -dmin at K_MIN_AT; Q6_K: d at SIX_D_AT):
// row j's in the head of the super-block's j-th tile-group, of tile t in lanes 0..7 and of tile t + 1 in lanes
// 8..15. One gather of 32 bits from each (`at` bytes into its head, from a super-block's first tile-group of tile
// t) takes the 16 rows' values: in place of 16 two-byte reads a value (with their inserts, about 8 of a one-row
// loop's 145 instructions a tile-group pair).
// (`gap`: from tile t to tile t + 1, PairAhead's)
static inline __m512i super_offsets(int64_t gap, int64_t stride, int at) {
    alignas(64) int32_t lanes[2 * LANES];
    for (int j = 0; j < LANES; j++) {
        lanes[j] = (int32_t)(j * stride + at);
        lanes[LANES + j] = (int32_t)(gap + j * stride + at);
    }
    return _mm512_load_si512(lanes);
}
// the float16 in the low (HIGH = false) or high 16 bits of each lane's 32, as float32 (exact, as halves())
template <bool HIGH>
static inline __m512 halves2(__m512i bits) {
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(HIGH ? _mm512_srli_epi32(bits, 16) : bits));
}

// tiles t and t + 1 of a weight of a per-group scale mode against rows m0 .. m0 + MT - 1 of the pass, as
// block<LAYOUT, MT, KEPT> of each
template <int LAYOUT, int MT, bool KEPT>
__attribute__((noinline)) static void block2(const Tiled& w, int64_t t, const Activations& a, int64_t m0,
                                             const F8* scales) {
    const int64_t G = w.groups, head = scale_bytes(w.mode);
    __m512 acc[MT];
    for (int m = 0; m < MT; m++) acc[m] = _mm512_setzero_ps();
    const int64_t first = a.index(m0, 0), step = a.index(m0, 1) - first, stride = stride_of(w, t);
    const PairAhead ahead = pair_ahead(w, t, m0);
    const uint8_t *start0 = tile_at(w, t), *start1 = tile_at(w, t + 1);
    for (int64_t g = 0; g < G; g++) {
        const uint8_t* p0 = start0 + g * stride;
        const uint8_t* p1 = start1 + g * stride;
        prefetch_pair(ahead, G, w.block, g);
        const int64_t at = first + g * step;
        __m512i dot[MT];
        group_dots2<LAYOUT, MT>(p0 + head, p1 + head, &a.q[at * GROUP], dot);
        F8 s_low, o_low, s_high, o_high;
        if constexpr (KEPT) {
            s_low = scales[2 * g];
            o_low = scales[2 * g + 1];
            s_high = scales[2 * G + 2 * g];
            o_high = scales[2 * G + 2 * g + 1];
        } else {
            scales8(w.mode, w.zero, p0, &s_low, &o_low);
            scales8(w.mode, w.zero, p1, &s_high, &o_high);
        }
        const __m512 s = two(s_low, s_high), o = two(o_low, o_high);
        for (int m = 0; m < MT; m++) acc[m] = f_step2(acc[m], dot[m], s, a.d[at + m], o, a.xo[at + m]);
    }
    store_block2<MT>(w, t, acc, m0);
}

// tiles t and t + 1 of a K-quant or Q6_K weight against rows m0 .. m0 + MT - 1, as super_block<LAYOUT, MT, KEPT>
// of each (`kept`: tile t's super-blocks, then tile t + 1's); a super-block's mins two groups a step by vpdpwssd
template <int LAYOUT, int MT, bool KEPT>
__attribute__((noinline)) static void super_block2(const Tiled& w, int64_t t, const Activations& a, int64_t m0,
                                                   const SuperScales* kept) {
    const int64_t G = w.groups, B = G / SUPER, head = scale_bytes(w.mode);
    __m512 acc[MT];
    for (int m = 0; m < MT; m++) acc[m] = _mm512_setzero_ps();
    const int64_t first = a.index(m0, 0), step = a.index(m0, 1) - first, stride = stride_of(w, t);
    const PairAhead ahead = pair_ahead(w, t, m0);
    // (K-quant: d and -dmin side by side, K_MIN_AT = K_D_AT + 2)
    const __m512i value_at = super_offsets(ahead.gap, stride, LAYOUT == SIX_BITS ? SIX_D_AT : K_D_AT);
    const bool held = KEPT && LAYOUT != SIX_BITS;  // the super-block values from `kept`, not gathered
    for (int64_t b = 0; b < B; b++) {
        const uint8_t* start0 = tile_at(w, t) + b * SUPER * stride;
        const uint8_t* start1 = tile_at(w, t + 1) + b * SUPER * stride;
        __m512i total[MT];
        for (int m = 0; m < MT; m++) total[m] = _mm512_setzero_si512();
        __m512i min[SUPER];  // both tiles' mins, group by group, as two() lays them out (KEPT: in `kept`)
        for (int j = 0; j < SUPER; j++) {
            const uint8_t* p0 = start0 + j * stride;
            const uint8_t* p1 = start1 + j * stride;
            prefetch_pair(ahead, G, w.block, b * SUPER + j);
            const int64_t at = first + (b * SUPER + j) * step;
            __m512i dot[MT];
            if constexpr (LAYOUT == SIX_BITS) {
                const int32_t* centre = a.six.data() + 2 * at;
                six_half2<MT, 0>(p0, p1, p0 + head, p1 + head, &a.q[at * GROUP], centre, dot);
                six_half2<MT, 1>(p0, p1, p0 + head, p1 + head, &a.q[at * GROUP], centre, dot);
                for (int m = 0; m < MT; m++) {
                    total[m] = _mm512_add_epi32(total[m], dot[m]);
                    in_register(total[m]);
                }
            } else {
                group_dots2<LAYOUT, MT>(p0 + head, p1 + head, &a.q[at * GROUP], dot);
                __m512i scale;
                if constexpr (KEPT)
                    scale = two(kept[b].scale[j], kept[B + b].scale[j]);
                else
                    k_ints2(p0, p1, &scale, &min[j]);
                for (int m = 0; m < MT; m++) {
                    total[m] = _mm512_add_epi32(total[m], _mm512_mullo_epi32(dot[m], scale));
                    in_register(total[m]);
                }
            }
        }
        const int64_t at = first + b * SUPER * step;
        const __m512i values = held ? _mm512_setzero_si512() : _mm512_i32gather_epi32(value_at, start0, 1);
        const __m512 d = held ? two(kept[b].d, kept[B + b].d) : halves2<false>(values);
        for (int m = 0; m < MT; m++) acc[m] = f_scaled2(acc[m], total[m], d, a.d[at + m]);
        if constexpr (LAYOUT != SIX_BITS) {
            __m512i mins[MT];
            for (int m = 0; m < MT; m++) mins[m] = _mm512_setzero_si512();
            for (int j = 0; j < SUPER; j += 2) {
                const __m512i pairs = KEPT ? two(i_pairs(kept[b].min[j], kept[b].min[j + 1]),
                                                 i_pairs(kept[B + b].min[j], kept[B + b].min[j + 1]))
                                           : _mm512_or_si512(_mm512_and_si512(min[j], _mm512_set1_epi32(0xFFFF)),
                                                             _mm512_slli_epi32(min[j + 1], 16));
                const int32_t* sums = &a.pairs[first + (b * SUPER + j) * step];
                for (int m = 0; m < MT; m++) mins[m] = _mm512_dpwssd_epi32(mins[m], pairs, _mm512_set1_epi32(sums[m]));
            }
            const __m512 dmin = held ? two(kept[b].dmin, kept[B + b].dmin) : halves2<true>(values);
            for (int m = 0; m < MT; m++) acc[m] = f_scaled2(acc[m], mins[m], dmin, a.d[at + m]);
        }
    }
    store_block2<MT>(w, t, acc, m0);
}

#if WOQ_AMX
// ---- AMX (avx512-amx): a K-quant (Q4_K, Q5_K) or Q6_K weight against a wide pass's rows by tile products. A C
// tile holds 16 rows of the pass by 16 weight rows (tiles t and t + 1, as super_block2's lanes); an A tile 16
// rows' 64 activation bytes (AmxRows: laid out tile by tile); a B tile 64 codes of each of the 16 weight rows, four
// a 32-bit lane: 2 groups' chunks, which chunk2 already lays out so. A super-block's integer sum needs each
// sub-block's scale inside the product, and a tile product multiplies bytes only, so the codes times the scale's
// parts (digits small enough that each product is a byte) are decoded once, plane by plane, for every row of the
// pass, and the planes' products combined by shifts give the same int32 as super_block2's:
//   K-quant: sc = 8 * high + low (3 bits each; a code times a part at most 7 * 31): planes code * high and
//     code * low by tdpbsud (signed activations by unsigned bytes), I = 8 * H + L;
//   Q6_K: sub = 64 * a + 8 * b + c (a in -2..2, b and c in -3..4; a centred code, -32..31, times a digit is a
//     signed byte, -128..124): three signed planes by tdpbssd, I = 64 * A + 8 * B + C.
// The mins' sum M (vpdpwssd), the float steps and their order are super_block2's, so the bits are those of every
// other level.
static const int AMX_ROWS = 16;  // rows of the pass in a tile
// the fewest rows of a pass that take the tile products: below, the planes' decoding is not repaid (the 1.5B's
// 256-column-group products at 16 to 32 rows ran 0.64-1.06x as fast as super_block2's, at 48 rows 1.17-1.45x)
static const int AMX_MIN_ROWS = 48;
static const int AMX_PLANE = SUPER * CHUNKS * 64;  // bytes of one plane of a super-block's codes (4 B tiles)
// planes of a super-block's codes: a K-quant's two (its scales' high and low 3 bits), Q6_K's three (digits)
template <int LAYOUT>
static constexpr int amx_planes() { return LAYOUT == SIX_BITS ? 3 : 2; }

struct AmxConfig {  // the tiles' shapes (palette 1): each of the 8 tiles 16 rows of 64 bytes
    uint8_t palette = 1, start_row = 0, reserved[14] = {};
    uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
    uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};
// Linux hands a process the tiles' state only on request (arch_prctl ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)
static const bool AMX_PERMITTED = syscall(SYS_arch_prctl, 0x1023, 18) == 0;

// while alive (one thread's share of a product), the tiles configured; released after
struct AmxTiles {
    explicit AmxTiles(bool wanted) : on(wanted) {
        if (!on) return;
        const AmxConfig config;
        _tile_loadconfig(&config);
    }
    ~AmxTiles() {
        if (on) _tile_release();
    }
    AmxTiles(const AmxTiles&) = delete;
    AmxTiles& operator=(const AmxTiles&) = delete;
    const bool on;
};

// the pass's activations as A tiles: each tile of 16 rows (the last padded with zeros) by 64 bytes of its columns
// one after the other (1 KB: a tile's load reads one block), and each row's super-block scale and its groups'
// activation sums in pairs (Activations.pairs), super-block by super-block
struct AmxRows {
    Lines<int8_t> q;  // tile (m / 16, k / 64) at (m / 16 * width / 64 + k / 64) * 1024, row m % 16 of it
    std::vector<float> d;         // row m's super-block b at m * supers + b
    std::vector<int32_t> pairs;   // row m's pair j of super-block b at (m * supers + b) * 4 + j
    int64_t rows, width, supers;  // rows of the pass, bytes of a row, super-blocks of a row
    AmxRows(const Activations& a, bool wanted)  // (not wanted: empty)
        : q(wanted ? (a.batch + AMX_ROWS - 1) / AMX_ROWS * AMX_ROWS * a.groups * GROUP : 0),
          d(q.size() / GROUP / SUPER),
          pairs(4 * d.size()),
          rows(a.batch),
          width(a.groups * GROUP),
          supers(a.groups / SUPER) {}
    // where A tile (rows m - m % 16 .., 64 columns from 64 k) starts
    int64_t tile(int64_t m, int64_t k) const { return (m / AMX_ROWS * (width / 64) + k) * 1024; }
    // rows m of a (inside a parallel region: shared out)
    void fill(const Activations& a) {
#pragma omp for schedule(static)
        for (int64_t m = 0; m < rows; m++) {
            for (int64_t g = 0; g < a.groups; g++) {
                const int64_t at = a.index(m, g);
                memcpy(&q[tile(m, g / 2) + m % AMX_ROWS * 64 + g % 2 * GROUP], &a.q[at * GROUP], GROUP);
                if (g % SUPER == 0) d[m * supers + g / SUPER] = a.d[at];
                if (g % 2 == 0) pairs[(m * supers + g / SUPER) * 4 + g % SUPER / 2] = a.pairs[at];
            }
        }
    }
};

// a super-block of tiles t and t + 1 made ready for every row: its planes of codes (4 B tiles each), the 16 weight
// rows' d and (a K-quant's) -dmin and mins in pairs (as super_block2's `pairs`)
struct AmxSuper {
    __m512 d, dmin;
    __m512i mins[SUPER / 2];
};

// each 32-bit lane's value into both its 16-bit halves (a 16-bit multiplier for the bytes of the lane)
static inline __m512i both_halves(__m512i v) {
    return _mm512_or_si512(_mm512_and_si512(v, _mm512_set1_epi32(0xFFFF)), _mm512_slli_epi32(v, 16));
}

// each signed byte of `codes` times its 32-bit lane's signed digit (in both 16-bit halves), where each product is a
// byte: the even bytes from one 16-bit product, the odd ones from another of the odd bytes alone
static inline __m512i signed_bytes_times(__m512i codes, __m512i digit) {
    const __m512i even = _mm512_mullo_epi16(codes, digit);
    const __m512i odd = _mm512_mullo_epi16(_mm512_and_si512(codes, _mm512_set1_epi16((short)0xFF00)), digit);
    return _mm512_mask_blend_epi8(0xAAAAAAAAAAAAAAAAull, even, odd);
}

// Q6_K's super-block (each tile's tile-groups from start0 and start1, `block` bytes apart): three planes from
// `first`, a centred code times digit a, b and c of its sub-block's scale (sub = 64 a + 8 b + c), and the rows' d
static void six_super_planes(const uint8_t* start0, const uint8_t* start1, int64_t block, int64_t head,
                             uint8_t* first, AmxSuper& s) {
    for (int j = 0; j < SUPER; j++) {
        const uint8_t* p0 = start0 + j * block;
        const uint8_t* p1 = start1 + j * block;
        for (int h = 0; h < 2; h++) {  // codes 0..15 (chunks 0..3), then 16..31
            const __m512i sub = six_subs2(p0, p1, h);
            const __m512i a = _mm512_srai_epi32(_mm512_add_epi32(sub, _mm512_set1_epi32(27)), 6);
            const __m512i rest = _mm512_sub_epi32(sub, _mm512_slli_epi32(a, 6));  // -27 .. 36
            const __m512i bd = _mm512_srai_epi32(_mm512_add_epi32(rest, _mm512_set1_epi32(3)), 3);
            const __m512i digits[3] = {both_halves(a), both_halves(bd),
                                       both_halves(_mm512_sub_epi32(rest, _mm512_slli_epi32(bd, 3)))};
            for (int k = 4 * h; k < 4 * h + 4; k++) {
                const __m512i codes = _mm512_sub_epi8(six_chunk2(p0 + head, p1 + head, k), _mm512_set1_epi8(SIX_ZERO));
                for (int i = 0; i < 3; i++)
                    _mm512_storeu_si512(first + i * AMX_PLANE + 64 * (j * CHUNKS + k),
                                        signed_bytes_times(codes, digits[i]));
            }
        }
    }
    s.d = two(super_scales(start0, block, SIX_D_AT), super_scales(start1, block, SIX_D_AT));
}

// a K-quant's super-block (as six_super_planes): two planes (code * high, then code * low), d, -dmin and the mins
template <int LAYOUT>
static void k_super_planes(const uint8_t* start0, const uint8_t* start1, int64_t block, int64_t head,
                           uint8_t* high, AmxSuper& s) {
    I8 min[2][SUPER];
    for (int j = 0; j < SUPER; j++) {
        I8 low0, low1;
        k_ints(start0 + j * block, &low0, &min[0][j]);
        k_ints(start1 + j * block, &low1, &min[1][j]);
        const __m512i scale = two(low0, low1);
        const __m512i top = both_halves(_mm512_srli_epi32(scale, 3));
        const __m512i bottom = both_halves(_mm512_and_si512(scale, _mm512_set1_epi32(7)));
        for (int k = 0; k < CHUNKS; k++) {  // a byte times 7 at most stays in its byte of the 16-bit product
            const __m512i codes = chunk2<LAYOUT>(start0 + j * block + head, start1 + j * block + head, k);
            _mm512_storeu_si512(high + 64 * (j * CHUNKS + k), _mm512_mullo_epi16(codes, top));
            _mm512_storeu_si512(high + AMX_PLANE + 64 * (j * CHUNKS + k), _mm512_mullo_epi16(codes, bottom));
        }
    }
    s.d = two(super_scales(start0, block, K_D_AT), super_scales(start1, block, K_D_AT));
    s.dmin = two(super_scales(start0, block, K_MIN_AT), super_scales(start1, block, K_MIN_AT));
    for (int j = 0; j < SUPER; j += 2)
        s.mins[j / 2] = two(i_pairs(min[0][j], min[0][j + 1]), i_pairs(min[1][j], min[1][j + 1]));
}

// super-blocks b0 .. b1 - 1 of tiles t and t + 1 made ready for every row: their planes one after the other, and
// each one's AmxSuper
template <int LAYOUT>
static void amx_decode(const Tiled& w, int64_t t, int64_t b0, int64_t b1, uint8_t* planes, AmxSuper* supers) {
    constexpr int PLANES = amx_planes<LAYOUT>();
    const int64_t head = scale_bytes(w.mode), stride = stride_of(w, t);
    for (int64_t b = b0; b < b1; b++) {
        const uint8_t* start0 = tile_at(w, t) + b * SUPER * stride;
        const uint8_t* start1 = tile_at(w, t + 1) + b * SUPER * stride;
        uint8_t* first = planes + PLANES * (b - b0) * AMX_PLANE;
        if constexpr (LAYOUT == SIX_BITS)
            six_super_planes(start0, start1, stride, head, first, supers[b - b0]);
        else
            k_super_planes<LAYOUT>(start0, start1, stride, head, first, supers[b - b0]);
    }
}

// super-block b's float steps for rows m0 .. m0 + 15 (acc), from its planes' tile products (plane i's at sums + 256
// i), as super_block2's
template <int PLANES>
static inline void amx_steps(__m512* acc, const int32_t* sums, const AmxSuper& s, const AmxRows& r, int64_t m0,
                             int64_t b, int from, int to) {  // (rows m0 + from .. m0 + to - 1)
    for (int m = from; m < to; m++) {
        const int64_t at = (m0 + m) * r.supers + b;
        __m512i total = _mm512_load_si512(sums + 16 * m);
        for (int i = 1; i < PLANES; i++)
            total = _mm512_add_epi32(_mm512_slli_epi32(total, 3), _mm512_load_si512(sums + AMX_ROWS * 16 * i + 16 * m));
        acc[m] = f_scaled2(acc[m], total, s.d, r.d[at]);
        if constexpr (PLANES == 3) continue;  // Q6_K: no mins
        __m512i mins = _mm512_setzero_si512();
        for (int j = 0; j < SUPER / 2; j++)
            mins = _mm512_dpwssd_epi32(mins, s.mins[j], _mm512_set1_epi32(r.pairs[4 * at + j]));
        acc[m] = f_scaled2(acc[m], mins, s.dmin, r.d[at]);
    }
}

// tiles t and t + 1 against TILES tiles of rows from m0 (the rows below r.rows stored, plus the bias, as
// store_block2): each super-block's planes' products by tile products (a K-quant's two planes against two tiles of
// rows: 4 chains of products, each pair of A and B tiles used twice; Q6_K's three against one tile of rows: 3
// chains, the A tile used thrice), stored, and its float steps taken while the next super-block's products run (a
// quarter of its rows after each step of products: the vector units work while the tiles multiply)
template <int TILES, int PLANES>
static void amx_block(const Tiled& w, int64_t t, const AmxRows& r, int64_t m0, int64_t b0, int64_t b1,
                      const uint8_t* planes, const AmxSuper* supers) {
    static_assert(TILES * PLANES <= 4 && PLANES >= 2 && PLANES <= 3, "8 tiles: TILES * PLANES C tiles, A and B");
    __m512 acc[TILES][AMX_ROWS];  // from super-block b0 on: what the slices before left in `out`
    for (int i = 0; i < TILES; i++)
        for (int64_t m = 0; m < AMX_ROWS; m++) {
            const int64_t row = m0 + AMX_ROWS * i + m;
            const bool carried = b0 > 0 && row < r.rows;
            acc[i][m] = carried ? _mm512_loadu_ps(w.out + row * w.out_stride + t * LANES) : _mm512_setzero_ps();
        }
    alignas(64) int32_t sums[2][TILES][PLANES * AMX_ROWS * 16];  // by parity of super-block: each tile's planes
    for (int64_t b = b0; b <= b1; b++) {
        const bool steps = b > b0;  // super-block b - 1's float steps (its tile products stored in sums[(b - 1) % 2])
        const AmxSuper& before = supers[steps ? b - 1 - b0 : 0];
        if (b < b1) {
            const uint8_t* plane = planes + PLANES * (b - b0) * AMX_PLANE;
            const int8_t* q = &r.q[r.tile(m0, 4 * b)];
            _tile_zero(4);
            _tile_zero(5);
            if constexpr (TILES == 2 || PLANES == 3) _tile_zero(6);
            if constexpr (TILES == 2) _tile_zero(7);
            for (int k = 0; k < 4; k++) {  // 64 bytes a row a step: two groups
                if constexpr (PLANES == 2) {
                    _tile_loadd(2, plane + 1024 * k, 64);
                    _tile_loadd(3, plane + AMX_PLANE + 1024 * k, 64);
                    _tile_loadd(0, q + 1024 * k, 64);
                    _tile_dpbsud(4, 0, 2);
                    _tile_dpbsud(5, 0, 3);
                    if constexpr (TILES == 2) {
                        _tile_loadd(1, q + r.tile(AMX_ROWS, 0) + 1024 * k, 64);
                        _tile_dpbsud(6, 1, 2);
                        _tile_dpbsud(7, 1, 3);
                    }
                } else {
                    _tile_loadd(0, q + 1024 * k, 64);
                    _tile_loadd(1, plane + 1024 * k, 64);
                    _tile_loadd(2, plane + AMX_PLANE + 1024 * k, 64);
                    _tile_loadd(3, plane + 2 * AMX_PLANE + 1024 * k, 64);
                    _tile_dpbssd(4, 0, 1);
                    _tile_dpbssd(5, 0, 2);
                    _tile_dpbssd(6, 0, 3);
                }
                if (steps)
                    for (int i = 0; i < TILES; i++)
                        amx_steps<PLANES>(acc[i], sums[(b - 1) % 2][i], before, r, m0 + AMX_ROWS * i, b - 1, 4 * k,
                                          4 * k + 4);
            }
            int32_t(*into)[PLANES * AMX_ROWS * 16] = sums[b % 2];
            _tile_stored(4, into[0], 64);
            _tile_stored(5, into[0] + AMX_ROWS * 16, 64);
            if constexpr (PLANES == 3) _tile_stored(6, into[0] + 2 * AMX_ROWS * 16, 64);
            if constexpr (TILES == 2) {
                _tile_stored(6, into[1], 64);
                _tile_stored(7, into[1] + AMX_ROWS * 16, 64);
            }
        } else if (steps) {
            for (int i = 0; i < TILES; i++)
                amx_steps<PLANES>(acc[i], sums[(b - 1) % 2][i], before, r, m0 + AMX_ROWS * i, b - 1, 0, AMX_ROWS);
        }
    }
    const bool last = b1 == r.supers;  // out = acc + bias after the last slice, acc so far before it
    const __m512 bias = last && w.bias ? _mm512_loadu_ps(w.bias + t * LANES) : _mm512_setzero_ps();
    for (int i = 0; i < TILES; i++)
        for (int64_t m = 0; m < AMX_ROWS && m0 + AMX_ROWS * i + m < r.rows; m++)
            _mm512_storeu_ps(w.out + (m0 + AMX_ROWS * i + m) * w.out_stride + t * LANES,
                             last ? _mm512_add_ps(acc[i][m], bias) : acc[i][m]);
}

// whether a weight takes the tile products: a K-quant of 4- or 5-bit codes or Q6_K, whole pairs of tiles
static inline bool amx_takes(const Tiled& w) {
    const bool k_quant = w.mode == K_QUANT && (w.layout == NIBBLES || w.layout == NIBBLES_HIGH_BIT);
    return (k_quant || w.layout == SIX_BITS) && w.rows % AMX_ROWS == 0;
}

// inside a parallel region with the tiles configured: the weight's pairs of tiles shared out among the threads
// (no barrier at the end), slice by slice of AMX_SLICE super-blocks (a slice of every row's activations stays in
// the second-level cache while the pairs go by: 256 rows of 8960 columns do not), each pair's planes of the slice
// decoded once and multiplied with every tile of rows; the float sums carried from slice to slice in `out`
static const int64_t AMX_SLICE = 8;
template <int LAYOUT>
static void amx_weight(const Tiled& w, const AmxRows& r) {
    constexpr int PLANES = amx_planes<LAYOUT>();
    Lines<uint8_t> planes(PLANES * AMX_PLANE * AMX_SLICE);
    std::vector<AmxSuper> supers(AMX_SLICE);
    const int64_t pairs = w.rows / AMX_ROWS;
    for (int64_t b0 = 0; b0 < r.supers; b0 += AMX_SLICE) {
        const int64_t b1 = b0 + AMX_SLICE < r.supers ? b0 + AMX_SLICE : r.supers;
#pragma omp for schedule(static) nowait
        for (int64_t p = 0; p < pairs; p++) {  // (the same pairs in each slice: static)
            amx_decode<LAYOUT>(w, 2 * p, b0, b1, planes.data(), supers.data());
            if constexpr (PLANES == 3) {
                for (int64_t m0 = 0; m0 < r.rows; m0 += AMX_ROWS)
                    amx_block<1, 3>(w, 2 * p, r, m0, b0, b1, planes.data(), supers.data());
            } else {
                for (int64_t m0 = 0; m0 < r.rows; m0 += 2 * AMX_ROWS) {
                    if (m0 + AMX_ROWS < r.rows) amx_block<2, 2>(w, 2 * p, r, m0, b0, b1, planes.data(), supers.data());
                    else amx_block<1, 2>(w, 2 * p, r, m0, b0, b1, planes.data(), supers.data());
                }
            }
        }
    }
}
#endif
#endif

// Where a tile's scales come from: decoded from its tile-groups as it goes, or kept (weight_tiles) for a pass wider
// than a block of rows: a per-group mode's floats (tile_group_scales) or a super-block mode's (tile_super_scales).
struct Kept {
    const F8* scales;
    const SuperScales* supers;
};

// tile t of the weight (and t + 1 where `two_tiles`, an AVX-512 build's pair) against rows m0 .. m0 + MT - 1;
// SUPERS: a super-block scale mode (K-quants, Q6_K)
template <int LAYOUT, int MT, bool KEPT, bool SUPERS>
static inline void tiles_block(const Tiled& w, int64_t t, bool two_tiles, const Activations& a, int64_t m0, Kept kept) {
#if WOQ_VNNI == 2
    if (two_tiles) {
        if constexpr (SUPERS) return super_block2<LAYOUT, MT, KEPT>(w, t, a, m0, kept.supers);
        else return block2<LAYOUT, MT, KEPT>(w, t, a, m0, kept.scales);
    }
#endif
    (void)two_tiles;
    if constexpr (SUPERS) super_block<LAYOUT, MT, KEPT>(w, t, a, m0, kept.supers);
    else block<LAYOUT, MT, KEPT>(w, t, a, m0, kept.scales);
}

// bit n - 1 set: a pass of n rows (1 to 4) takes the two-tile loop (woq_pair_rows; all until set: the order the
// weights lie in at this level is the two-tile loop's)
static std::atomic<int64_t> PAIRED_ROWS{15};

// tiles t0 .. t1 - 1 of the weight against rows m0 .. m0 + ROW_TILE - 1 (or the rest of the rows) of the pass;
// KEPT: with their scales in `kept`, tile by tile (weight_tiles)
template <int LAYOUT, bool KEPT, bool SUPERS>
static inline void row_block(const Tiled& w, int64_t t0, int64_t t1, const Activations& a, int64_t m0, Kept kept) {
    const int64_t rows = a.batch - m0 < ROW_TILE ? a.batch - m0 : ROW_TILE;
    // tiles two by two where the pass is bound by its arithmetic: wider than a block of rows (a prefill chunk), or
    // 5 rows or more of codes narrower than bytes (the 1.5B's passes of 5 to 7 rows ran 1.09-1.20x faster so on a
    // Zen 4), or of any codes where the tiles lie in pairs (one stream: passes of 5 to 8 rows of a Q8_0 weight of
    // the 1.5B's shapes ran 1.32-1.42x faster so on a Zen 5 than one tile at a time from the plain order); byte
    // codes up to a block in the plain order are bound by memory. Passes of 1 to 4 rows as PAIRED_ROWS says: from
    // the plain order, on a Zen 4 (a 512-bit instruction takes two of the 256-bit pipes) the 1.5B's passes of 2 to
    // 4 rows ran 0.83-0.94x two by two, on a Sapphire Rapids (512-bit dots at twice the 256-bit rate) those of 1
    // to 4 rows 1.20-1.30x; so the daemon times both on the machine and sets the mask (decoder/tile_pairs.py)
    const bool wide = a.batch > ROW_TILE || (a.batch >= 5 && (LAYOUT != BYTES || w.pairs));
    const bool narrow = a.batch <= 4 && (PAIRED_ROWS.load(std::memory_order_relaxed) >> (a.batch - 1) & 1);
    const bool paired = TWO_TILES && ((wide && rows > 1) || narrow);
    for (int64_t t = t0; t < t1; t++) {
        const Kept s = {KEPT && !SUPERS ? kept.scales + 2 * w.groups * (t - t0) : nullptr,
                        KEPT && SUPERS ? kept.supers + w.groups / SUPER * (t - t0) : nullptr};
        const bool pair = paired && t + 1 < t1;
        switch (rows) {  // the rest: the same arithmetic per row
            case ROW_TILE: tiles_block<LAYOUT, ROW_TILE, KEPT, SUPERS>(w, t, pair, a, m0, s); break;
            case 7: tiles_block<LAYOUT, (7 < ROW_TILE ? 7 : 1), KEPT, SUPERS>(w, t, pair, a, m0, s); break;
            case 6: tiles_block<LAYOUT, (6 < ROW_TILE ? 6 : 1), KEPT, SUPERS>(w, t, pair, a, m0, s); break;
            case 5: tiles_block<LAYOUT, (5 < ROW_TILE ? 5 : 1), KEPT, SUPERS>(w, t, pair, a, m0, s); break;
            case 3: tiles_block<LAYOUT, 3, KEPT, SUPERS>(w, t, pair, a, m0, s); break;
            case 2: tiles_block<LAYOUT, 2, KEPT, SUPERS>(w, t, pair, a, m0, s); break;
            case 1: tiles_block<LAYOUT, 1, KEPT, SUPERS>(w, t, pair, a, m0, s); break;
            default: tiles_block<LAYOUT, (4 < ROW_TILE ? 4 : 1), KEPT, SUPERS>(w, t, pair, a, m0, s); break;  // 4 rows
        }
        t += pair;
    }
}

static const int64_t TILE_GROUP = 4;  // tiles that go through a wide pass's row blocks together

// inside a parallel region: the weight's tiles shared out among the threads in groups of TILE_GROUP (no barrier
// at the end), each tile decoded once per ROW_TILE rows of the pass. A group's tiles meet each block of rows in
// turn: the block's activations (ROW_TILE rows of the whole width: 72 KB for 8960 columns) are read from the
// outer caches once per group, not once per tile, while the group's tiles stay in the second-level cache. With
// more than `keep_rows` rows, the group's scales are decoded once, before its first block (Q6_K's are integers in
// its dots but for its d: read once a super-block). SUPERS: a super-block scale mode (`a` quantized per
// super-block).
template <int LAYOUT, bool SUPERS>
static void weight_tiles(const Tiled& w, const Activations& a) {
    const int64_t tiles = (w.rows + LANES - 1) / LANES, groups = (tiles + TILE_GROUP - 1) / TILE_GROUP;
    // keep_rows: one block of rows for tiles in the plain order; for tiles in pairs 4 blocks (32 rows), below which
    // the scales' own sweep over the tiles (the first to reach memory, with no prefetch) cost more than decoding
    // them in each block: the 1.5B's products-only passes of 9 to 32 rows ran 1.07-1.20x faster so, of 64 rows
    // 0.98x (Zen 5)
    const int64_t keep_rows = w.pairs ? 4 * ROW_TILE : ROW_TILE;
    const bool keep = LAYOUT != SIX_BITS && a.batch > keep_rows;
    std::vector<F8> scales(keep && !SUPERS ? 2 * TILE_GROUP * w.groups : 0);
    std::vector<SuperScales> supers(keep && SUPERS ? TILE_GROUP * (w.groups / SUPER) : 0);
    const Kept kept = {scales.data(), supers.data()};
#pragma omp for schedule(static) nowait
    for (int64_t n = 0; n < groups; n++) {
        const int64_t t0 = n * TILE_GROUP, t1 = t0 + TILE_GROUP < tiles ? t0 + TILE_GROUP : tiles;
        if (!keep) {
            for (int64_t m0 = 0; m0 < a.batch; m0 += ROW_TILE) row_block<LAYOUT, false, SUPERS>(w, t0, t1, a, m0, kept);
            continue;
        }
        for (int64_t t = t0; t < t1; t++) {
            if constexpr (SUPERS)
                tile_super_scales(w, t, &supers[w.groups / SUPER * (t - t0)]);
            else
                tile_group_scales(w, t, &scales[2 * w.groups * (t - t0)]);
        }
        for (int64_t m0 = 0; m0 < a.batch; m0 += ROW_TILE) row_block<LAYOUT, true, SUPERS>(w, t0, t1, a, m0, kept);
    }
}

// whether a scale mode is one of super-blocks (K-quants, Q6_K): its activations quantized per super-block
static inline bool super_mode(int64_t mode) { return mode == K_QUANT || mode == SUB_SCALES; }

// a layout and scale mode the kernel reads (Q6_K's only together; Q6_K and K-quants in whole super-blocks)
static bool known(int64_t layout, int64_t mode, int64_t groups) {
    if (layout == SIX_BITS || mode == SUB_SCALES) return layout == SIX_BITS && mode == SUB_SCALES && groups % SUPER == 0;
    if (mode == K_QUANT && groups % SUPER) return false;
    return (layout == NIBBLES || layout == NIBBLES_HIGH_BIT || layout == BYTES) && mode >= HALF_ZERO && mode <= K_QUANT;
}

static Tiled tiled(const Job& job, float* out, int64_t out_stride) {
    const int64_t tiles = (job.rows + LANES - 1) / LANES;
    return {job.tiles, (int)job.layout, (int)job.mode, job.zero, job.rows, job.groups,
            scale_bytes((int)job.mode) + code_bytes((int)job.layout), job.paired ? tiles - tiles % 2 : 0, job.bias, out,
            out_stride};
}

template <int LAYOUT>
static void dequantize_tiles(const Tiled& w, float* out32, uint16_t* out16, int threads) {
    const int64_t tiles = (w.rows + LANES - 1) / LANES, cols = w.groups * GROUP;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t t = 0; t < tiles; t++) {
        const int64_t stride = stride_of(w, t);
        for (int64_t g = 0; g < w.groups; g++) {
            const uint8_t* p = tile_at(w, t) + g * stride;
            float s[LANES] = {}, o[LANES] = {};
            const uint8_t* first = p - (g % SUPER) * stride;  // K-quants, Q6_K: the super-block's first
            if (LAYOUT != SIX_BITS) tile_scales(w.mode, w.zero, p, first, stride, s, o);
            for (int j = 0; j < LANES && t * LANES + j < w.rows; j++) {
                const int64_t at = (t * LANES + j) * cols + g * GROUP;
                float row[GROUP];
                for (int i = 0; i < GROUP; i++) {
                    float scale = s[j], offset = o[j];
                    if (LAYOUT == SIX_BITS) {  // d * sub, and (code - 32) * that exactly by one fma
                        scale = half_to_float(super_bits(first, stride, j, SIX_D_AT)) * (float)(int8_t)p[LANES * (i / 16) + j];
                        offset = -(float)SIX_ZERO * scale;
                    }
                    row[i] = fmaf((float)code_at(LAYOUT, p + scale_bytes(w.mode), j, i), scale, offset);
                }
                if (out32) {
                    memcpy(out32 + at, row, sizeof(row));
                } else {
                    for (int i = 0; i < GROUP; i++) {  // round to bfloat16, nearest even (as PyTorch)
                        uint32_t bits;
                        memcpy(&bits, &row[i], 4);
                        out16[at + i] = (uint16_t)((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
                    }
                }
            }
        }
    }
}

extern "C" {

// out (batch, out_cols) float32 = x (batch, groups * 32) float32 times each job's weight, side by side: the
// activations quantized once, the jobs' tiles shared out in one parallel region. Returns 0, or -1 for a layout
// or scale mode it does not know or jobs of different widths.
int woq_linear(const float* x, int64_t batch, const Job* jobs, int count, float* out, int64_t out_cols, int threads) {
    for (int j = 0; j < count; j++)
        if (!known(jobs[j].layout, jobs[j].mode, jobs[j].groups) || jobs[j].groups != jobs[0].groups) return -1;
    bool six = false, any_super = false, any_group = false;  // a Q6_K job; a super-block mode's; a per-group mode's
    for (int j = 0; j < count; j++) {
        six = six || jobs[j].layout == SIX_BITS;
        any_super = any_super || super_mode(jobs[j].mode);
        any_group = any_group || !super_mode(jobs[j].mode);
    }
    const int64_t width = jobs[0].groups;  // each kind of job its own activations (both where a product mixes them)
    const Activations per_group(x, any_group ? batch : 0, width, threads, false, false);
    const Activations per_super(x, any_super ? batch : 0, width, threads, WOQ_SIMD && six, true);
#if WOQ_AMX
    bool tiles = false;  // a K-quant or Q6_K job for the tile products (a pass of whole tiles of rows or more)
    for (int j = 0; j < count; j++) tiles = tiles || (batch >= AMX_MIN_ROWS && amx_takes(tiled(jobs[j], out, out_cols)));
    tiles = tiles && AMX_PERMITTED;
    AmxRows rows(per_super, tiles);
#endif
#pragma omp parallel num_threads(threads)
    {
#if WOQ_AMX
        const AmxTiles configured(tiles);
        if (tiles) rows.fill(per_super);  // (a barrier at its end: every thread's rows filled)
#endif
        for (int j = 0; j < count; j++) {
            const Tiled w = tiled(jobs[j], out + jobs[j].column, out_cols);
#if WOQ_AMX
            if (tiles && amx_takes(w)) {
                if (w.layout == NIBBLES) amx_weight<NIBBLES>(w, rows);
                else if (w.layout == SIX_BITS) amx_weight<SIX_BITS>(w, rows);
                else amx_weight<NIBBLES_HIGH_BIT>(w, rows);
                continue;
            }
#endif
            if (super_mode(w.mode)) {
                switch (w.layout) {
                    case NIBBLES: weight_tiles<NIBBLES, true>(w, per_super); break;
                    case NIBBLES_HIGH_BIT: weight_tiles<NIBBLES_HIGH_BIT, true>(w, per_super); break;
                    case SIX_BITS: weight_tiles<SIX_BITS, true>(w, per_super); break;
                    default: weight_tiles<BYTES, true>(w, per_super); break;
                }
            } else {
                switch (w.layout) {
                    case NIBBLES: weight_tiles<NIBBLES, false>(w, per_group); break;
                    case NIBBLES_HIGH_BIT: weight_tiles<NIBBLES_HIGH_BIT, false>(w, per_group); break;
                    default: weight_tiles<BYTES, false>(w, per_group); break;
                }
            }
        }
    }
    return 0;
}

// the job's weight as a dense (rows, groups * 32) matrix: float32 into out32, or else bfloat16 into out16
int woq_dequantize(const Job* job, float* out32, uint16_t* out16, int threads) {
    if (!known(job->layout, job->mode, job->groups)) return -1;
    const Tiled w = tiled(*job, nullptr, 0);
    switch (w.layout) {
        case NIBBLES: dequantize_tiles<NIBBLES>(w, out32, out16, threads); return 0;
        case NIBBLES_HIGH_BIT: dequantize_tiles<NIBBLES_HIGH_BIT>(w, out32, out16, threads); return 0;
        case SIX_BITS: dequantize_tiles<SIX_BITS>(w, out32, out16, threads); return 0;
        default: dequantize_tiles<BYTES>(w, out32, out16, threads); return 0;
    }
}

// bytes of one tile-group: its scales, then its codes
int64_t woq_block_bytes(int64_t layout, int64_t mode) { return scale_bytes((int)mode) + code_bytes((int)layout); }

// the instruction-set level this build runs: scalar, avx2, avx2-vnni, avx512-vnni, avx512-amx, neon-dotprod or
// neon-i8mm
const char* woq_isa(void) { return ISA; }

int64_t woq_pair_rows(int64_t mask) {
    if (!TWO_TILES) return -1;
    return mask < 0 ? PAIRED_ROWS.load() : PAIRED_ROWS.exchange(mask & 15);
}
}
