// counts: one woq_linear call of a weight of `rows` x `groups` tile-groups, layout L, mode M, batch B, 1 thread
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>
extern "C" {
struct Job { const uint8_t* tiles; const float* bias; int64_t layout, mode, rows, groups, column; float zero; };
int woq_linear(const float* x, int64_t batch, const Job* jobs, int count, float* out, int64_t out_cols, int threads);
int64_t woq_block_bytes(int64_t layout, int64_t mode);
}
int main(int argc, char** argv) {
  int64_t layout = atoi(argv[1]), mode = atoi(argv[2]), batch = atoi(argv[3]), rows = 512, groups = 32;
  std::vector<uint8_t> t((rows / 8) * groups * woq_block_bytes(layout, mode), 17);
  for (size_t i = 0; i < t.size(); i++) t[i] = (uint8_t)(i * 2654435761u >> 13);
  for (size_t b = 0; b < t.size(); b += woq_block_bytes(layout, mode)) for (int j = 0; j < 32; j++) t[b + j] = 0x3c; // finite halves
  std::vector<float> x(batch * groups * 32), y(batch * rows);
  for (size_t i = 0; i < x.size(); i++) x[i] = (float)((int)(i * 7919 % 200) - 100) / 64.0f;
  Job job = {t.data(), nullptr, layout, mode, rows, groups, 0, 0.0f};
  woq_linear(x.data(), batch, &job, 1, y.data(), rows, 1);
  printf("%f\n", y[0]);
}
