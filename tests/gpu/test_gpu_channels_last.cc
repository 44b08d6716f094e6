// The layout conversions of kernels/cuda/channels_last.h against a host reference, exactly:
// activations and filters between NCHW (B, C, P) and NHWC (B, P, C), f32 and bf16, with channels
// padded (zeros) and unpadded, with positions and channels below, at and past the 32 x 32 tiles of
// the transposes (fewer than 32 of either: one thread a value).
#include "kernels/cuda/channels_last.h"
#include "lib/core/bf16.h"
#include "tests/gpu/gpu_test_util.h"

using namespace trainer;
using namespace trainer::gpu_test;
using namespace trainer::cuda;

namespace {

// dst = src between layouts on the host; src and dst elements as floats (bf16 values already
// rounded, so a conversion is exact).
std::vector<float> host_relayout(const std::vector<float>& src, bool src_nhwc, int64_t src_c, bool dst_nhwc,
                                 int64_t dst_c, int64_t b, int64_t p) {
  std::vector<float> dst(size_t(b * dst_c * p), 0.f);
  for (int64_t n = 0; n < b; ++n)
    for (int64_t c = 0; c < std::min(src_c, dst_c); ++c)
      for (int64_t q = 0; q < p; ++q) {
        const int64_t si = src_nhwc ? (n * p + q) * src_c + c : (n * src_c + c) * p + q;
        const int64_t di = dst_nhwc ? (n * p + q) * dst_c + c : (n * dst_c + c) * p + q;
        dst[size_t(di)] = src[size_t(si)];
      }
  return dst;
}

std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = bf16_from_float(v[i]);
  return out;
}
std::vector<float> from_bf16(const std::vector<uint16_t>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = float_from_bf16(v[i]);
  return out;
}

}  // namespace

TEST_CASE("gpu NCHW <-> NHWC relayouts move every element exactly", "[gpu][layout]") {
  CudaBackend& be = cuda_backend();
  const int64_t positions[] = {1, 9, 31, 32, 33, 100};
  uint64_t seed = 1;
  for (DType t : {DType::f32, DType::bf16})
    for (int64_t p : positions)
      for (int64_t b : {1, 3})
        for (auto [src_c, dst_c] :
             {std::pair<int64_t, int64_t>{5, 5}, {3, 8}, {8, 3}, {20, 24}, {40, 48}, {70, 64}})
          for (bool src_nhwc : {false, true}) {
            INFO(dtype_name(t) << " b " << b << " positions " << p << " channels " << src_c << " -> " << dst_c
                               << (src_nhwc ? " NHWC -> NCHW" : " NCHW -> NHWC"));
            std::vector<float> src = random_vector(size_t(b * src_c * p), ++seed);
            if (t == DType::bf16) src = from_bf16(to_bf16(src));
            const std::vector<float> want = host_relayout(src, src_nhwc, src_c, !src_nhwc, dst_c, b, p);
            const size_t es = dtype_bytes(t);
            Buffer sb(be, src.size() * es), db(be, want.size() * es);
            if (t == DType::bf16)
              sb.upload(to_bf16(src));
            else
              sb.upload(src);
            db.fill(-7.f, want.size() * es / 4);  // every element must be written
            launch_relayout(t, sb.get(), src_nhwc, src_c, db.get(), !src_nhwc, dst_c, b, p, be.stream());
            be.synchronize();
            const std::vector<float> got =
                t == DType::bf16 ? from_bf16(db.download<uint16_t>(want.size())) : db.download(want.size());
            REQUIRE(got == want);
          }
}

TEST_CASE("gpu filter conversions to (K, R, S, C) and back are exact", "[gpu][layout]") {
  CudaBackend& be = cuda_backend();
  struct FilterShape {
    int64_t k, c, cp, r, s;
  };
  // Channels padded and not, 1x1 to 12x12. To (K, R, S, C): one thread a value, except 7x7 over 70
  // channels (49 positions and 70 channels fill the 32 x 32 tiles of the transpose). Back: a block a
  // row through shared memory, except 7x7 over 256 channels (a row of 50 KB: the ways above).
  const FilterShape shapes[] = {
      {6, 5, 8, 3, 3},   {4, 3, 8, 3, 3},   {3, 64, 64, 3, 3},  {5, 130, 136, 3, 3},  {2, 70, 72, 7, 7},
      {3, 32, 32, 1, 1}, {2, 20, 24, 2, 2}, {2, 9, 16, 12, 12}, {64, 512, 512, 3, 3}, {2, 250, 256, 7, 7}};
  uint64_t seed = 42;
  for (DType t : {DType::bf16, DType::f32})
    for (const FilterShape& f : shapes) {
      INFO(dtype_name(t) << " k " << f.k << " c " << f.c << " cp " << f.cp << " " << f.r << "x" << f.s);
      const int64_t rs = f.r * f.s;
      std::vector<float> w = random_vector(size_t(f.k * f.c * rs), ++seed);
      const std::vector<float> wr = t == DType::bf16 ? from_bf16(to_bf16(w)) : w;
      const size_t es = dtype_bytes(t), typed_elems = size_t(f.k * f.cp * rs);
      Buffer wb(be, w.size() * 4), typed(be, typed_elems * es), back(be, w.size() * 4);
      wb.upload(w);
      typed.fill(-7.f, typed_elems * es / 4);  // every element, the padding channels too, is written
      back.fill(-7.f, w.size());
      launch_filter_to_krsc(wb.as(), t, typed.get(), f.k, f.c, f.cp, f.r, f.s, be.stream());
      launch_krsc_to_filter(t, typed.get(), back.as(), f.k, f.c, f.cp, f.r, f.s, be.stream());
      be.synchronize();
      const std::vector<float> krsc =
          t == DType::bf16 ? from_bf16(typed.download<uint16_t>(typed_elems)) : typed.download(typed_elems);
      REQUIRE(krsc == host_relayout(wr, false, f.c, true, f.cp, f.k, rs));
      REQUIRE(back.download(w.size()) == wr);
    }
}
