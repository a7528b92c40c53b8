#include "woq_kernel.cpp"  // decoder/kernels/, with or without amx-tiles.patch
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now() { timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int argc, char** argv) {
    const int64_t layout = 4, mode = 3, rows = atoi(argv[1]), groups = atoi(argv[2]), batch = atoi(argv[3]);
    const int threads = atoi(argv[4]);
    const int64_t block = woq_block_bytes(layout, mode), head = block - 128, tiles = (rows + 7) / 8;
    std::vector<uint8_t> data(tiles * groups * block);
    srand(1);
    for (int64_t b = 0; b < tiles * groups; b++) {
        uint8_t* p = &data[b * block];
        for (int j = 0; j < 12; j++) p[j] = rand() & 255;
        for (int64_t at = 12; at < head; at += 2) { uint16_t h = 0x3C00; memcpy(p + at, &h, 2); }
        for (int64_t i = head; i < block; i++) p[i] = rand() & 255;
    }
    Job job = {data.data(), nullptr, layout, mode, rows, groups, 0, 0.0f};
    std::vector<float> x(batch * groups * 32), y(batch * rows);
    for (auto& v : x) v = (rand() % 2001 - 1000) / 1000.0f;
    double best = 1e9; float check = 0;
    for (int r = 0; r < 5; r++) {
        double t = now();
        woq_linear(x.data(), batch, &job, 1, y.data(), rows, threads);
        double dt = now() - t; if (dt < best) best = dt;
    }
    for (auto v : y) check += v;
    printf("%s rows %ld cols %ld batch %ld: %.1f ms (%g)\n", woq_isa(), rows, groups * 32, batch, best * 1e3, check);
}
