// CSV parse time and peak memory (issue 29): read_csv on a numeric table, against pandas.read_csv
// on the same file (scripts/csv_speed.sh runs both under /usr/bin/time -v). Prints rows, columns,
// seconds and the process's peak RSS.
//   csv_bench --write PATH ROWS COLS   # a table of random numbers with 6 significant digits,
//                                      # the last column an integer label 0..9
//   csv_bench PATH                     # read it: features (COLS - 1) + the last column as labels
// Build after the project (build/ exists):
//   g++ -O2 -std=c++17 -I. scripts/csv_bench.cc build/libtrainer_datasets.a build/libtrainer_lib.a \
//       -lz -lpthread -o /tmp/csv_bench
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "datasets/csv_reader.h"
#include "lib/core/rng.h"

using namespace trainer;

int main(int argc, char** argv) {
  if (argc == 5 && std::string(argv[1]) == "--write") {
    const long rows = std::atol(argv[3]), cols = std::atol(argv[4]);
    FILE* f = std::fopen(argv[2], "w");
    if (!f) return 2;
    SplitMix64 rng = SplitMix64::counter(29);
    for (long c = 0; c < cols; ++c) std::fprintf(f, c + 1 < cols ? "f%ld," : "label\n", c);
    for (long r = 0; r < rows; ++r) {
      for (long c = 0; c + 1 < cols; ++c) std::fprintf(f, "%.6g,", (rng.uniform() - 0.5) * 200.0);
      std::fprintf(f, "%d\n", int(rng.uniform() * 10));
    }
    return std::fclose(f) == 0 ? 0 : 2;
  }
  if (argc != 2) {
    std::fprintf(stderr, "usage: csv_bench PATH | csv_bench --write PATH ROWS COLS\n");
    return 2;
  }
  CsvOptions o;
  o.has_header = true;
  o.num_classes = 10;
  const auto t0 = std::chrono::steady_clock::now();
  const Dataset d = read_csv(argv[1], o);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  const double cpu =
      double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
  std::printf(
      "read_csv: %lld rows x %lld features in %.2f s wall, %.2f s cpu; float32 samples %.0f MB; peak RSS "
      "%.0f MB\n",
      (long long)d.size(), (long long)d.sample_numel(), s, cpu, double(d.f32.size()) * 4 / 1e6,
      double(u.ru_maxrss) / 1e3);
  return 0;
}
