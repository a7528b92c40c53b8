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
