// The batch loader's cost as a GPU run sees it: batches of 512 CIFAR-sized u8 rows, shuffled, the
// consumer taking one every PACE microseconds (a GPU step; 0: back to back). Prints, for epochs 2
// and 3, the wall time and the process's CPU time per batch (CPU time above the wall's share of
// useful work is threads waiting actively). Build after the project (build/ exists):
//   g++ -O2 -std=c++17 -I. scripts/loader_bench.cc build/libtrainer_datasets.a build/libtrainer_lib.a \
//       -lz -lpthread -o /tmp/loader_bench && /tmp/loader_bench THREADS PACE
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "datasets/batch_loader.h"
using namespace trainer;
static double cpu_us() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e6 + u.ru_utime.tv_usec + u.ru_stime.tv_usec;
}
int main(int argc, char** argv) {
  const int threads = atoi(argv[1]), pace = atoi(argv[2]);
  Dataset d;
  d.name = "bench";
  d.sample_shape = Shape({3, 32, 32});
  d.num_classes = 10;
  const int64_t n = 20480;
  d.u8.resize(size_t(n) * 3072);
  d.labels.resize(size_t(n));
  for (size_t i = 0; i < d.u8.size(); ++i) d.u8[i] = uint8_t(i * 2654435761u >> 24);
  for (int64_t i = 0; i < n; ++i) d.labels[size_t(i)] = int32_t(i % 10);
  Normalization norm;
  norm.scale = 1.f / 255;
  BatchLoader l(d, 512, true, false, norm, 1, 0, 1, threads);
  const float* x;
  const int32_t* y;
  int64_t rows;
  for (int e = 0; e < 3; ++e) {
    l.start_epoch(e);
    const double c0 = cpu_us();
    const auto t0 = std::chrono::steady_clock::now();
    int b = 0;
    while (l.next(&x, &y, &rows)) {
      ++b;
      if (pace) std::this_thread::sleep_for(std::chrono::microseconds(pace));
    }
    const double wall =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    if (e)
      std::printf("threads %d pace %d: %.0f us wall/batch, %.0f us cpu/batch\n", threads, pace, wall / b,
                  (cpu_us() - c0) / b);
  }
}
