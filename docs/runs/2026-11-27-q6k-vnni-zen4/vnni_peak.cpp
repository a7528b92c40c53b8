#include <immintrin.h>
#include <chrono>
#include <cstdio>
#define R(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
template <int W> long run(long iters) {
  long total = 0;
#pragma omp parallel num_threads(2) reduction(+:total)
  {
    if (W == 256) {
      const __m256i b = _mm256_set1_epi8(3), c = _mm256_set1_epi8(5);
#define D(i) __m256i a##i = _mm256_set1_epi32(i);
      R(D)
      for (long n = 0; n < iters; n++) {
#define S(i) a##i = _mm256_dpbusd_epi32(a##i, b, c);
        R(S)
        __asm__("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5), "+x"(a6), "+x"(a7), "+x"(a8), "+x"(a9), "+x"(a10), "+x"(a11));
      }
#define T(i) total += _mm256_extract_epi32(a##i, 0);
      R(T)
    } else {
      const __m512i b = _mm512_set1_epi8(3), c = _mm512_set1_epi8(5);
#define DZ(i) __m512i a##i = _mm512_set1_epi32(i);
      R(DZ)
      for (long n = 0; n < iters; n++) {
#define SZ(i) a##i = _mm512_dpbusd_epi32(a##i, b, c);
        R(SZ)
        __asm__("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), "+v"(a7), "+v"(a8), "+v"(a9), "+v"(a10), "+v"(a11));
      }
#define TZ(i) total += _mm512_reduce_add_epi32(a##i);
      R(TZ)
    }
  }
  return total;
}
int main() {
  long iters = 100000000;
  for (int rep = 0; rep < 2; rep++) {
    auto t = std::chrono::steady_clock::now(); volatile long r = run<256>(iters);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    printf("ymm: %.1f GMAC/s (2 threads)\n", iters * 12.0 * 32 * 2 / s / 1e9);
    t = std::chrono::steady_clock::now(); r = run<512>(iters);
    s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    printf("zmm: %.1f GMAC/s (2 threads)\n", iters * 12.0 * 64 * 2 / s / 1e9);
  }
}
