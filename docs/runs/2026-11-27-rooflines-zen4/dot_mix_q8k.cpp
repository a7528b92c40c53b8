#include <immintrin.h>
#include <chrono>
#include <cstdio>
#define D(x) x = _mm512_dpbusd_epi32(x, c, b);
#define F(x, y) y = _mm512_fmadd_ps(_mm512_cvtepi32_ps(x), _mm512_mul_ps(s, scale_b), y); y = _mm512_fmadd_ps(s, scale_b, y);
#define I(x, z) z = _mm512_add_epi32(z, _mm512_mullo_epi32(x, sc));
#define W(z) z = _mm512_dpwssd_epi32(z, sc, b);
#define S(z, y) y = _mm512_fmadd_ps(_mm512_cvtepi32_ps(z), _mm512_mul_ps(s, scale_b), y); y = _mm512_fmadd_ps(_mm512_cvtepi32_ps(z), _mm512_mul_ps(s, scale_b), y);
#define ALL(M) M(a0) M(a1) M(a2) M(a3) M(a4) M(a5) M(a6) M(a7)
#define KEEP __asm__("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), "+v"(a7));
int main(int argc, char**) {
    __m512i a0=_mm512_set1_epi32(argc),a1=a0,a2=a0,a3=a0,a4=a0,a5=a0,a6=a0,a7=a0;
    __m512i z0=a0,z1=a0,z2=a0,z3=a0,z4=a0,z5=a0,z6=a0,z7=a0;
    __m512 f0=_mm512_set1_ps(argc),f1=f0,f2=f0,f3=f0,f4=f0,f5=f0,f6=f0,f7=f0;
    __m512i c = _mm512_set1_epi32(3 + argc), b = _mm512_set1_epi32(5), sc = _mm512_set1_epi32(7 + argc);
    __m512 s = _mm512_set1_ps(1.0001f), scale_b = _mm512_set1_ps(argc * 0.5f);
    const long N = 400000000;
    for (int mode = 0; mode < 3; mode++) {
    auto t0 = std::chrono::steady_clock::now();
    for (long n = 0; n < N / 512; n++) {
        for (int g = 0; g < 8; g++) {
            for (int k = 0; k < 8; k++) { ALL(D) KEEP }
            if (mode == 1) { F(a0,f0) F(a1,f1) F(a2,f2) F(a3,f3) F(a4,f4) F(a5,f5) F(a6,f6) F(a7,f7) }
            if (mode == 2) { I(a0,z0) I(a1,z1) I(a2,z2) I(a3,z3) I(a4,z4) I(a5,z5) I(a6,z6) I(a7,z7) }
            __asm__("" : "+v"(z0), "+v"(z1), "+v"(z2), "+v"(z3), "+v"(z4), "+v"(z5), "+v"(z6), "+v"(z7));
        }
        if (mode == 2) { for (int h = 0; h < 4; h++) { W(z0) W(z1) W(z2) W(z3) W(z4) W(z5) W(z6) W(z7) }
            S(z0,f0) S(z1,f1) S(z2,f2) S(z3,f3) S(z4,f4) S(z5,f5) S(z6,f6) S(z7,f7) }
        __asm__("" : "+v"(f0), "+v"(f1), "+v"(f2), "+v"(f3), "+v"(f4), "+v"(f5), "+v"(f6), "+v"(f7));
    }
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    printf("mode %d: %.2f G dpbusd/s\n", mode, N / dt / 1e9);
    }
    __m512i r = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a0,a1),_mm512_add_epi32(a2,a3)),_mm512_add_epi32(_mm512_add_epi32(a4,z5),_mm512_add_epi32(z6,z7)));
    r = _mm512_add_epi32(r, _mm512_add_epi32(_mm512_add_epi32(z0,z1),_mm512_add_epi32(z2,z3)));
    __m512 q = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(f0,f1),_mm512_add_ps(f2,f3)),_mm512_add_ps(_mm512_add_ps(f4,f5),_mm512_add_ps(f6,f7)));
    return _mm512_reduce_add_epi32(r) + (int)_mm512_reduce_add_ps(q) == 12345;
}
