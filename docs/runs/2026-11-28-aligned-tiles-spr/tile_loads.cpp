// The cost of AMX tile loads against tile products on this CPU, by the buffer's offset from a 64-byte line.
//
// One step: four 1 KB tile loads (tiles 0-3, 16 rows of 64 bytes) from a buffer of BYTES, walked 4 KB at a time,
// and/or the four int8 products of a 2x2 block (tdpbsud into tiles 4-7), as the kernel's amx_block does them.
//
// Build: g++ -O2 -mamx-tile -mamx-int8 tile_loads.cpp -o tile_loads
// Usage: ./tile_loads MODE BYTES OFFSET   MODE: products, loads or both; OFFSET: bytes past a 64-byte line

#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <vector>

struct Config {
    uint8_t palette = 1, start_row = 0, reserved[14] = {};
    uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
    uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};

int main(int argc, char** argv) {
    if (argc != 4) return fprintf(stderr, "usage: %s products|loads|both BYTES OFFSET\n", argv[0]), 2;
    const bool loads = strcmp(argv[1], "products") != 0, products = strcmp(argv[1], "loads") != 0;
    const long bytes = atol(argv[2]), offset = atol(argv[3]), steps = 2000000;
    if (syscall(SYS_arch_prctl, 0x1023, 18) != 0) return fprintf(stderr, "no AMX permission\n"), 1;
    const Config config;
    _tile_loadconfig(&config);
    std::vector<int8_t> raw(bytes + 4096 + 128, 1);
    const int8_t* base = (const int8_t*)(((uintptr_t)raw.data() + 63) & ~(uintptr_t)63) + offset;
    long at = 0;
    const auto started = std::chrono::steady_clock::now();
    for (long i = 0; i < steps; i++) {
        if (loads) {
            const int8_t* p = base + at;
            at = at + 4096 < bytes ? at + 4096 : 0;
            _tile_loadd(0, p, 64);
            _tile_loadd(1, p + 1024, 64);
            _tile_loadd(2, p + 2048, 64);
            _tile_loadd(3, p + 3072, 64);
        }
        if (products) {
            _tile_dpbsud(4, 0, 2);
            _tile_dpbsud(5, 0, 3);
            _tile_dpbsud(6, 1, 2);
            _tile_dpbsud(7, 1, 3);
        }
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    alignas(64) int32_t out[256];
    _tile_stored(4, out, 64);
    _tile_release();
    printf("%-8s %8ld bytes, offset %2ld: %6.1f ns a step\n", argv[1], bytes, offset, seconds / steps * 1e9);
    return out[0] == 12345;  // (keeps the products)
}
