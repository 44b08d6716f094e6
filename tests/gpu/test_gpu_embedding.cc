// The embedding's deterministic gradient on the GPU (kernels/cuda/embedding.cu: sort, a warp per
// chunk of 32 sorted positions, joins of ids that cross chunks) against a host sum in double, on
// shapes that exercise each path: a padding id filling half of the positions (one run across
// hundreds of chunks), a last chunk that is not full, every id equal, wide rows (D = 130), and the
// reuters_conv1d shape; each in both layouts of dy, channels first (B, D, L) and rows (B, L, D),
// whose kernel reads float4s where D is a multiple of 4 (GPT-2's 8 x 1024 positions of 768 among
// them). Bound: |gpu - ref| <= 1e-5 * (sum of |terms| of that element) + 1e-30,
// float rounding of sums of up to B*L terms. A second run repeats bit for bit.
#include <catch2/catch.hpp>
#include <cstring>

#include "kernels/cuda/embedding.cuh"
#include "lib/core/rng.h"
#include "tests/gpu/gpu_test_util.h"

using namespace trainer;
using namespace trainer::gpu_test;

namespace {

struct Case {
  int64_t batch, length, vocab, dim;
  double pad;   // share of positions that hold id 0
  bool one_id;  // every position the same id (vocab - 1)
};

}  // namespace

TEST_CASE("gpu embedding gradient equals a double-precision host sum, and repeats bit for bit",
          "[gpu][embedding]") {
  CudaBackend& be = cuda_backend();
  for (const bool channels_first : {true, false})
    for (const Case& c : {Case{7, 301, 1000, 3, 0.5, false}, Case{32, 300, 30982, 7, 0.5, false},
                          Case{4, 8, 5, 130, 0.0, false}, Case{16, 200, 10, 2, 0.0, true},
                          Case{3, 11, 4, 5, 0.9, false}, Case{1, 1, 3, 4, 0.0, false},
                          Case{5, 70, 9, 132, 0.3, false}, Case{8, 1024, 50257, 768, 0.0, false}}) {
      cuda::EmbeddingGeometry g;
      g.channels_first = channels_first;
      g.batch = c.batch;
      g.length = c.length;
      g.vocab = c.vocab;
      g.dim = c.dim;
      const int64_t n = g.positions();
      SplitMix64 rng(uint64_t(n * 31 + c.dim));
      std::vector<float> x(static_cast<size_t>(n));
      for (auto& v : x) {
        if (c.one_id)
          v = float(c.vocab - 1);
        else
          v = double(rng.next_below(1000)) < c.pad * 1000 ? 0.f : float(rng.next_below(uint64_t(c.vocab)));
      }
      const std::vector<float> dy = random_vector(size_t(n * c.dim), uint64_t(n + 5));
      std::vector<double> ref(size_t(c.vocab * c.dim), 0.0), mag(ref.size(), 0.0);
      for (int64_t b = 0; b < c.batch; ++b)
        for (int64_t l = 0; l < c.length; ++l)
          for (int64_t d = 0; d < c.dim; ++d) {
            const size_t at = size_t(int64_t(x[size_t(b * c.length + l)]) * c.dim + d);
            const double t =
                dy[size_t(channels_first ? (b * c.dim + d) * c.length + l : (b * c.length + l) * c.dim + d)];
            ref[at] += t;
            mag[at] += std::fabs(t);
          }
      cuda::EmbeddingBackward back(g);
      Buffer xb(be, size_t(n) * 4), dyb(be, dy.size() * 4), dwb(be, ref.size() * 4),
          ws(be, back.workspace_bytes());
      xb.upload(x);
      dyb.upload(dy);
      back.bind(ws.get());
      back.run(xb.as(), dyb.as(), dwb.as(), false, be.stream());
      const std::vector<float> dw = dwb.download(ref.size());
      dwb.fill(7.f, ref.size());  // the second run overwrites every row, zeros included
      back.run(xb.as(), dyb.as(), dwb.as(), false, be.stream());
      const std::vector<float> again = dwb.download(ref.size());
      dwb.fill(7.f, ref.size());  // a tied weight: the sums are added to what is there
      back.run(xb.as(), dyb.as(), dwb.as(), true, be.stream());
      const std::vector<float> added = dwb.download(ref.size());
      INFO("B " << c.batch << " L " << c.length << " V " << c.vocab << " D " << c.dim << " pad " << c.pad
                << (channels_first ? " channels first" : " rows"));
      size_t bad = 0, first_bad = 0;
      for (size_t i = 0; i < ref.size(); ++i)
        if (std::fabs(double(dw[i]) - ref[i]) > 1e-5 * mag[i] + 1e-30 && bad++ == 0) first_bad = i;
      INFO("first mismatch at " << first_bad << ": gpu " << dw[first_bad] << ", host " << ref[first_bad]);
      CHECK(bad == 0);
      CHECK(std::memcmp(dw.data(), again.data(), dw.size() * sizeof(float)) == 0);
      size_t off = 0;
      for (size_t i = 0; i < ref.size(); ++i) off += added[i] != 7.f + dw[i];
      CHECK(off == 0);
    }
}
