// exp for the native kernels: one fixed sequence of float32 operations (Cephes' single-precision polynomial,
// 1-2 ulp), so a value never depends on which vector lane, loop tail or thread computed it.
#pragma once

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float exp_fixed(float x) {
    // branch-free (selects, no library calls), so loops over it vectorize; n rounded to the nearest integer,
    // ties to even, by adding and taking away 1.5 * 2^23 (exact for |n| < 2^22)
    const float low = x < -87.0f ? -87.0f : x, c = low > 88.0f ? 88.0f : low;
    const float n = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = fmaf(n, -0.693359375f, c);
    r = fmaf(n, 2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = fmaf(p, r, 1.3981999507e-3f);
    p = fmaf(p, r, 8.3334519073e-3f);
    p = fmaf(p, r, 4.1665795894e-2f);
    p = fmaf(p, r, 1.6666665459e-1f);
    p = fmaf(p, r, 5.0000001201e-1f);
    const float y = fmaf(p, r * r, r) + 1.0f;
    const int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, 4);
    const float e = y * scale;
    return x < -87.0f ? 0.0f : x > 88.0f ? INFINITY : e;
}

// IEEE half precision, the KV cache's element (decoder/runtime/native_pass.py): widened to float32 exactly (every
// half is a float32), narrowed with rounding to nearest, ties to even (as torch's float16 and F16C's vcvtps2ph
// round). The same bits at every level: the vector levels widen with their own instructions, which are exact too.
static inline float half_to_float(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
    uint32_t bits;
    if (exponent == 0x1f)
        bits = sign | 0x7f800000u | (mantissa << 13);  // infinity, NaN
    else if (exponent != 0)
        bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
    else {  // zero or subnormal: mantissa * 2^-24, exact in float32
        const float magnitude = (float)mantissa * 5.9604644775390625e-8f;
        memcpy(&bits, &magnitude, 4);
        bits |= sign;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline uint16_t float_to_half(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    if (x >= 0x47800000u) return (uint16_t)(sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u));  // >= 65536, inf, NaN
    if (x < 0x38800000u) {  // below 2^-14: a subnormal half, rounded by one float addition (ties to even)
        float magnitude, sum;
        memcpy(&magnitude, &x, 4);
        sum = magnitude + 0.5f;  // 0.5's ulp is 2^-24, the subnormal half's step
        uint32_t bits;
        memcpy(&bits, &sum, 4);
        return (uint16_t)(sign | (bits - 0x3f000000u));
    }
    const uint32_t odd = (x >> 13) & 1u;  // ties to even: the bit that decides, added to the half-way bias
    x += 0xc8000fffu + odd;               // rebias the exponent (127 - 15) and round at bit 13
    return (uint16_t)(sign | (x >> 13));  // a carry into the exponent rounds up to the next binade, or to infinity
}
