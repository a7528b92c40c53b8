#include <immintrin.h>
#include <chrono>
#include <cstdio>
#define D(x) x = _mm512_dpbusd_epi32(x, c, b);
#define F(x, y) y = _mm512_fmadd_ps(_mm512_cvtepi32_ps(x), _mm512_mul_ps(s, scale_b), y);
#define G(y) y = _mm512_fmadd_ps(s, scale_b, y);
int main(int argc, char**) {
    __m512i a0=_mm512_set1_epi32(argc),a1=a0,a2=a0,a3=a0,a4=a0,a5=a0,a6=a0,a7=a0;
    __m512 f0=_mm512_set1_ps(argc),f1=f0,f2=f0,f3=f0,f4=f0,f5=f0,f6=f0,f7=f0;
    __m512i c = _mm512_set1_epi32(3 + argc), b = _mm512_set1_epi32(5);
    __m512 s = _mm512_set1_ps(1.0001f), scale_b = _mm512_set1_ps(argc * 0.5f);
    const long N = 400000000;
    for (int mode = 0; mode < 3; mode++) {
    auto t0 = std::chrono::steady_clock::now();
    for (long n = 0; n < N / 64; n++) {
        for (int k = 0; k < 8; k++) { D(a0) D(a1) D(a2) D(a3) D(a4) D(a5) D(a6) D(a7) __asm__("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), "+v"(a7)); }
        if (mode >= 1) { F(a0,f0) F(a1,f1) F(a2,f2) F(a3,f3) F(a4,f4) F(a5,f5) F(a6,f6) F(a7,f7) }
        if (mode >= 2) { G(f0) G(f1) G(f2) G(f3) G(f4) G(f5) G(f6) G(f7) }
        __asm__("" : "+v"(f0), "+v"(f1), "+v"(f2), "+v"(f3), "+v"(f4), "+v"(f5), "+v"(f6), "+v"(f7));
    }
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    printf("mode %d: %.2f G dpbusd/s\n", mode, N / dt / 1e9);
    }
    __m512i r = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a0,a1),_mm512_add_epi32(a2,a3)),_mm512_add_epi32(_mm512_add_epi32(a4,a5),_mm512_add_epi32(a6,a7)));
    __m512 q = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(f0,f1),_mm512_add_ps(f2,f3)),_mm512_add_ps(_mm512_add_ps(f4,f5),_mm512_add_ps(f6,f7)));
    return _mm512_reduce_add_epi32(r) + (int)_mm512_reduce_add_ps(q) == 12345;
}
