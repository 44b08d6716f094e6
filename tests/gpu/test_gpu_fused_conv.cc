// cuDNN's fused forward graph y = [relu](conv(x, W) [+ b]) (build_conv_forward_graph, which
// CudnnConv times against the convolution and our bias/relu kernel in 16-bit math) against a
// float64 reference on the host, for every configuration of the heuristics' first few that
// builds: bias and relu, bias alone, relu alone; 3x3 with padding 1, a stride of 2, 1x1; bf16 and fp16.
// x channels-last (N, H, W, C), W (K, R, S, C), y channels-last, b f32. CudnnConv only fuses in
// non-deterministic runs, which the executor's tests do not make, so this is the graph's
// correctness test.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "kernels/cuda/cudnn_conv.h"
#include "kernels/cuda/graph_timer.h"
#include "lib/backend/algo_cache.h"
#include "lib/core/bf16.h"
#include "lib/core/fp16.h"
#include "tests/gpu/fusion_run.h"
#include "tests/gpu/gpu_test_util.h"

using namespace trainer;
using namespace trainer::gpu_test;
using namespace trainer::cuda;

namespace {

const float kOneF = 1.f, kZeroF = 0.f;

// The plans of g that run on ptrs with workspace ws (each tried once, eagerly), by index.
std::vector<int> plans_that_run(CudaBackend& be, CudnnGraph& g, const GraphPointers& ptrs, void* ws) {
  std::vector<int> runs;
  for (int p = 0; p < g.plan_count(); ++p) {
    g.select(p);
    if (g.try_run(ptrs, ws) == CUDNN_STATUS_SUCCESS) runs.push_back(p);
  }
  be.synchronize();
  return runs;
}

std::vector<uint16_t> to_16(const std::vector<float>& v, DType t = DType::bf16) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = t == DType::bf16 ? bf16_from_float(v[i]) : f16_from_float(v[i]);
  return out;
}

float from_16(uint16_t v, DType t) { return t == DType::bf16 ? float_from_bf16(v) : float_from_f16(v); }

// y (N, OH, OW, K) in double from x (N, H, W, C) and W (K, R, S, C) rounded to t.
std::vector<double> reference(const ConvShape& s, const std::vector<float>& x, const std::vector<float>& w,
                              const std::vector<float>& b, DType t) {
  const auto r16 = [t](float v) { return double(t == DType::bf16 ? round_to_bf16(v) : round_to_f16(v)); };
  std::vector<double> y(size_t(s.batch * s.oh * s.ow * s.filters));
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t p = 0; p < s.oh; ++p)
      for (int64_t q = 0; q < s.ow; ++q)
        for (int64_t k = 0; k < s.filters; ++k) {
          double acc = s.bias ? b[size_t(k)] : 0.0;
          for (int64_t i = 0; i < s.kh; ++i)
            for (int64_t j = 0; j < s.kw; ++j) {
              const int64_t yy = p * s.sh + i - s.pad_top, xx = q * s.sw + j - s.pad_left;
              if (yy < 0 || yy >= s.h || xx < 0 || xx >= s.w) continue;
              for (int64_t c = 0; c < s.channels; ++c)
                acc += r16(x[size_t(((n * s.h + yy) * s.w + xx) * s.channels + c)]) *
                       r16(w[size_t(((k * s.kh + i) * s.kw + j) * s.channels + c)]);
            }
          if (s.relu) acc = std::max(acc, 0.0);
          y[size_t(((n * s.oh + p) * s.ow + q) * s.filters + k)] = acc;
        }
  return y;
}

ConvShape shape(int64_t n, int64_t c, int64_t hw, int64_t k, int64_t r, int64_t stride, int64_t pad,
                bool bias, bool relu) {
  ConvShape s;
  s.batch = n;
  s.channels = c;
  s.h = s.w = hw;
  s.filters = k;
  s.kh = s.kw = r;
  s.sh = s.sw = stride;
  s.pad_top = s.pad_bottom = s.pad_left = s.pad_right = pad;
  s.oh = s.ow = (hw + 2 * pad - r) / stride + 1;
  s.bias = bias;
  s.relu = relu;
  return s;
}

}  // namespace

namespace {

void check_fused_graphs(DType t) {
  CudaBackend& be = cuda_backend();
  int tried = 0;
  for (const ConvShape& s :
       {shape(4, 16, 8, 32, 3, 1, 1, true, true), shape(3, 32, 9, 16, 3, 2, 1, true, false),
        shape(2, 64, 6, 64, 1, 1, 0, false, true), shape(8, 8, 12, 24, 3, 1, 1, true, true)}) {
    const std::string what =
        fmt::format("{} {}x{}x{}x{} -> {} filters {}x{} stride {}{}{}", dtype_name(t), s.batch, s.channels,
                    s.h, s.w, s.filters, s.kh, s.kw, s.sh, s.bias ? " + bias" : "", s.relu ? " + relu" : "");
    CudnnGraph g(be.cudnn());
    build_conv_forward_graph(g, s, s.channels, t);
    std::string why;
    const int n = g.finalize(&why);
    if (n == 0) {
      std::cout << "SKIPPED: cuDNN has no engine for the fused graph " << what << ": " << why << "\n";
      continue;
    }
    const auto x = random_vector(size_t(s.batch * s.h * s.w * s.channels), 1, -1.f, 1.f);
    const auto w = random_vector(size_t(s.filters * s.kh * s.kw * s.channels), 2, -0.3f, 0.3f);
    const auto b = random_vector(size_t(s.filters), 3, -0.5f, 0.5f);
    const auto ref = reference(s, x, w, b, t);
    Buffer dx(be, x.size() * 2), dw(be, w.size() * 2), db(be, b.size() * 4), dy(be, ref.size() * 2);
    dx.upload(to_16(x, t));
    dw.upload(to_16(w, t));
    db.upload(b);
    for (int i = 0; i < n && g.plan_count() < 3; ++i) g.make_plan(i, size_t(256) << 20, &why);
    REQUIRE(g.plan_count() > 0);
    for (int p = 0; p < g.plan_count(); ++p) {
      g.select(p);
      Buffer ws(be, std::max<size_t>(g.plan_workspace(p), 16));
      GraphPointers ptrs = {{kGraphX, dx.get()}, {kGraphW, dw.get()}, {kGraphY, dy.get()}};
      if (s.bias) ptrs.add(kGraphB, db.get());
      be.zero(dy.get(), ref.size() * 2);
      g.run(ptrs, ws.get());
      be.synchronize();
      const auto got16 = dy.download<uint16_t>(ref.size());
      std::vector<float> got(got16.size());
      std::vector<float> reff(ref.size());
      for (size_t i = 0; i < got.size(); ++i) {
        got[i] = from_16(got16[i], t);
        reff[i] = float(ref[i]);
      }
      const double e = rel_error(got, reff);
      bool nonneg = true;
      for (float v : got) nonneg = nonneg && (!s.relu || v >= 0.f);
      INFO(what << ", " << g.plan_name(p) << ": rel " << e);
      std::cout << "fused conv " << what << ", " << g.plan_name(p) << ": rel " << e << "\n";
      CHECK(e < 8e-3);  // one rounding to bf16 (2^-9 relative) and f32 sums in another order
      CHECK(nonneg);
      ++tried;
      if (p != 0) continue;
      // Plan 0 through the disk cache (its JSON in a TSV file, read back by a new AlgoCache) into a
      // graph that declares nothing: the same bits.
      const std::string json = g.plan_json(p);
      if (json.empty()) {
        std::cout << "fused conv " << what << ": " << g.plan_name(p) << " cannot be serialized\n";
        continue;
      }
      char dir[] = "/tmp/fused_plan_XXXXXX";
      REQUIRE(mkdtemp(dir) != nullptr);
      const std::string file = std::string(dir) + "/plans.tsv";
      AlgoCache(file).put("plan", json);
      std::string back;
      REQUIRE(AlgoCache(file).get("plan", &back));
      CudnnGraph loaded(be.cudnn());
      std::string why2;
      const bool loaded_ok = loaded.load_plan(back, size_t(256) << 20, &why2);
      INFO("loading: " << why2);
      REQUIRE(loaded_ok);
      Buffer ws2(be, std::max<size_t>(loaded.plan_workspace(0), 16));
      be.zero(dy.get(), ref.size() * 2);
      loaded.run(ptrs, ws2.get());
      be.synchronize();
      CHECK(dy.download<uint16_t>(ref.size()) == got16);
      std::cout << "fused conv " << what << ": " << loaded.plan_name(0) << " (" << json.size()
                << " bytes of JSON) gives the same bits\n";
      std::remove(file.c_str());
      rmdir(dir);
    }
  }
  std::cout << "fused conv " << dtype_name(t) << ": " << tried << " plans checked\n";
}

}  // namespace

namespace {

// dW (K, R, S, C) in double from x (N, H, W, C) and dy (N, OH, OW, K) rounded to t.
std::vector<double> wgrad_reference(const ConvShape& s, const std::vector<float>& x,
                                    const std::vector<float>& dy, DType t) {
  const auto r16 = [t](float v) { return double(t == DType::bf16 ? round_to_bf16(v) : round_to_f16(v)); };
  std::vector<double> dw(size_t(s.filters * s.kh * s.kw * s.channels), 0.0);
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t p = 0; p < s.oh; ++p)
      for (int64_t q = 0; q < s.ow; ++q)
        for (int64_t i = 0; i < s.kh; ++i)
          for (int64_t j = 0; j < s.kw; ++j) {
            const int64_t yy = p * s.sh + i - s.pad_top, xx = q * s.sw + j - s.pad_left;
            if (yy < 0 || yy >= s.h || xx < 0 || xx >= s.w) continue;
            for (int64_t k = 0; k < s.filters; ++k) {
              const double g = r16(dy[size_t(((n * s.oh + p) * s.ow + q) * s.filters + k)]);
              for (int64_t c = 0; c < s.channels; ++c)
                dw[size_t(((k * s.kh + i) * s.kw + j) * s.channels + c)] +=
                    g * r16(x[size_t(((n * s.h + yy) * s.w + xx) * s.channels + c)]);
            }
          }
  return dw;
}

// The filter-gradient graph (build_conv_wgrad_graph, which CudnnConv times against its legacy
// algorithm) for each of the heuristics' first configurations that build and run, against the
// float64 reference: one rounding to t of sums of up to N OH OW terms.
void check_wgrad_graphs(DType t) {
  CudaBackend& be = cuda_backend();
  int tried = 0;
  for (const ConvShape& s :
       {shape(4, 16, 8, 32, 3, 1, 1, false, false), shape(3, 32, 9, 16, 3, 2, 1, false, false),
        shape(2, 64, 6, 64, 1, 1, 0, false, false), shape(16, 8, 12, 24, 3, 1, 1, false, false)}) {
    const std::string what = fmt::format("{} {}x{}x{}x{} -> {} filters {}x{} stride {}", dtype_name(t),
                                         s.batch, s.channels, s.h, s.w, s.filters, s.kh, s.kw, s.sh);
    CudnnGraph g(be.cudnn());
    build_conv_wgrad_graph(g, s, s.channels, t);
    std::string why;
    const int n = g.finalize(&why);
    if (n == 0) {
      std::cout << "SKIPPED: cuDNN has no engine for the filter-gradient graph " << what << ": " << why
                << "\n";
      continue;
    }
    const auto x = random_vector(size_t(s.batch * s.h * s.w * s.channels), 11, -1.f, 1.f);
    const auto dy = random_vector(size_t(s.batch * s.oh * s.ow * s.filters), 12, -1.f, 1.f);
    const auto ref = wgrad_reference(s, x, dy, t);
    Buffer xb(be, x.size() * 2), dyb(be, dy.size() * 2), dwb(be, ref.size() * 2);
    xb.upload(to_16(x, t));
    dyb.upload(to_16(dy, t));
    for (int i = 0; i < n && g.plan_count() < 4; ++i) g.make_plan(i, size_t(256) << 20, &why);
    REQUIRE(g.plan_count() > 0);
    for (int p = 0; p < g.plan_count(); ++p) {
      g.select(p);
      Buffer ws(be, std::max<size_t>(g.plan_workspace(p), 16));
      const GraphPointers ptrs = {{kGraphX, xb.get()}, {kGraphY, dyb.get()}, {kGraphW, dwb.get()}};
      dwb.upload(std::vector<uint16_t>(ref.size(), 0x7f7f));  // every element written
      if (g.try_run(ptrs, ws.get()) != CUDNN_STATUS_SUCCESS) {
        std::cout << "filter-gradient graph " << what << ", " << g.plan_name(p) << ": does not run here\n";
        continue;
      }
      be.synchronize();
      const auto got16 = dwb.download<uint16_t>(ref.size());
      std::vector<float> got(got16.size()), reff(ref.size());
      for (size_t i = 0; i < got.size(); ++i) {
        got[i] = from_16(got16[i], t);
        reff[i] = float(ref[i]);
      }
      const double e = rel_error(got, reff);
      INFO(what << ", " << g.plan_name(p) << ": rel " << e);
      std::cout << "filter-gradient graph " << what << ", " << g.plan_name(p) << ": rel " << e << "\n";
      CHECK(e < 8e-3);
      ++tried;
    }
  }
  std::cout << "filter-gradient graphs " << dtype_name(t) << ": " << tried << " plans checked\n";
  CHECK(tried > 0);
}

}  // namespace

TEST_CASE("gpu filter-gradient graphs match a float64 reference", "[gpu][bf16][fp16]") {
  for (const DType t : {DType::bf16, DType::f16})
    if (gpu_has_math(t == DType::bf16 ? MathMode::bf16 : MathMode::fp16)) check_wgrad_graphs(t);
}

TEST_CASE("gpu fused conv + bias + relu graphs match a float64 reference", "[gpu][bf16][fp16]") {
  for (const DType t : {DType::bf16, DType::f16})
    if (gpu_has_math(t == DType::bf16 ? MathMode::bf16 : MathMode::fp16)) check_fused_graphs(t);
}
// Not a check (hidden, run with its tag on a GPU): what cuDNN's graphs would buy on
// vgg11_bn_cifar's convolutions at batch 256 in bf16. Prints, per shape, each time as a step runs
// it (fastest_candidate): the forward with bias and relu, unfused against fused (CudnnConv's own
// choice, its debug line); the filter gradient as CudnnConv computes it (bf16 (K, R, S, C), then
// converted to the f32 (K, C, R, S) gradient) against one graph that writes f32 (K, C, R, S)
// itself, with the relative difference of the two; the forward alone as a graph against the
// forward with per-channel sums and sums of squares in its epilogue (batchnorm's statistics).
TEST_CASE("gpu fused conv probe on vgg11_bn_cifar's shapes", "[.probe]") {
  if (!gpu_has_math(MathMode::bf16)) return;
  CudaBackend& be = cuda_backend();
  const auto level = spdlog::get_level();
  spdlog::set_level(spdlog::level::debug);
  struct S {
    int64_t c, hw, k;
  };
  for (const S& v : {S{8, 32, 64}, S{64, 16, 128}, S{128, 8, 256}, S{256, 8, 256}, S{256, 4, 512},
                     S{512, 4, 512}, S{512, 2, 512}}) {
    const int64_t n = 256;
    ConvShape s = shape(n, v.c, v.hw, v.k, 3, 1, 1, true, true);
    KernelContext ctx;
    ctx.backend = &be;
    ctx.batch = n;
    ctx.math = MathMode::bf16;
    ctx.act_dtype = DType::bf16;
    const std::string what = fmt::format("conv {}x{}x{} -> {}", v.c, v.hw, v.hw, v.k);
    CudnnConv conv(be, s, ctx, what);
    Buffer ws(be, std::max<size_t>(conv.workspace_bytes(), 16)),
        kept(be, std::max<size_t>(conv.kept_bytes(), 16));
    conv.bind(ws.get(), kept.get());
    const size_t xs = size_t(n * v.hw * v.hw * v.c), ys = size_t(n * v.hw * v.hw * v.k),
                 wsz = size_t(v.k * v.c * 9);
    Buffer x(be, xs * 2), y(be, ys * 2), dy(be, ys * 2), w(be, wsz * 4), dw(be, wsz * 4), dw2(be, wsz * 4),
        b(be, size_t(v.k) * 4), sums(be, size_t(v.k) * 8);
    x.upload(to_16(random_vector(xs, 5)));
    dy.upload(to_16(random_vector(ys, 6)));
    w.upload(random_vector(wsz, 7, -0.1f, 0.1f));
    b.upload(random_vector(size_t(v.k), 8));
    conv.forward(x.get(), w.as<float>(), y.get(), b.as<float>(), true);  // converts W for backward
    // The filter gradient straight to f32 (K, C, R, S).
    CudnnGraph wg(be.cudnn());
    wg.tensor({1, CUDNN_DATA_BFLOAT16, {n, v.c, v.hw, v.hw}, nhwc_strides(n, v.c, v.hw, v.hw), false});
    wg.tensor({2, CUDNN_DATA_BFLOAT16, {n, v.k, v.hw, v.hw}, nhwc_strides(n, v.k, v.hw, v.hw), false});
    wg.tensor({3, CUDNN_DATA_FLOAT, {v.k, v.c, 3, 3}, nchw_strides(v.k, v.c, 3, 3), false});
    GraphConv gc;
    gc.pad_h = gc.pad_w = 1;
    wg.conv_wgrad(1, 2, 3, gc);
    std::string why;
    const int nw = wg.finalize(&why);
    for (int i = 0; i < nw && wg.plan_count() < 4; ++i)
      if (!wg.make_plan(i, size_t(256) << 20, &why)) std::cout << "  wgrad f32: " << why << "\n";
    Buffer wws(be, std::max<size_t>(wg.max_plan_workspace(), 16));
    const GraphPointers wptrs = {{1, x.get()}, {2, dy.get()}, {3, dw2.get()}};
    const std::vector<int> wruns = plans_that_run(be, wg, wptrs, wws.get());
    std::cout << what << ": filter-gradient graphs with f32 output: " << nw << " configurations, "
              << wruns.size() << " run" << (nw ? "" : " (" + why + ")") << "\n";
    if (!wruns.empty()) {
      const Fastest f = fastest_candidate(be.stream(), 1 + wruns.size(), [&](size_t i) {
        if (i == 0) {
          conv.backward(x.get(), w.as<float>(), dy.get(), dw.as<float>(), nullptr);
          return;
        }
        wg.select(wruns[i - 1]);
        wg.run(wptrs, wws.get());
      });
      wg.select(wruns[0]);
      wg.run(wptrs, wws.get());
      conv.backward(x.get(), w.as<float>(), dy.get(), dw.as<float>(), nullptr);
      be.synchronize();
      const double e = rel_error(dw2.download(wsz), dw.download(wsz));
      std::cout << "  as now (bf16 + conversion) " << f.each[0] * 1e3f << " us";
      for (size_t i = 1; i < f.each.size(); ++i)
        std::cout << "; " << wg.plan_name(wruns[i - 1]) << " " << f.each[i] * 1e3f << " us";
      std::cout << "; rel difference " << e << "\n";
    }
    // The filter gradient in bf16 (K, R, S, C), as CudnnConv writes it before its relayout: every
    // legacy algorithm cuDNN lists for the shape, and the graph API's engine configurations.
    {
      cudnnHandle_t h = be.cudnn();
      cudnnTensorDescriptor_t xd, yd;
      cudnnFilterDescriptor_t fd;
      cudnnConvolutionDescriptor_t cd;
      CUDNN_CHECK(cudnnCreateTensorDescriptor(&xd));
      CUDNN_CHECK(cudnnCreateTensorDescriptor(&yd));
      CUDNN_CHECK(cudnnCreateFilterDescriptor(&fd));
      CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&cd));
      CUDNN_CHECK(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NHWC, CUDNN_DATA_BFLOAT16, int(n), int(v.c),
                                             int(v.hw), int(v.hw)));
      CUDNN_CHECK(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NHWC, CUDNN_DATA_BFLOAT16, int(n), int(v.k),
                                             int(v.hw), int(v.hw)));
      CUDNN_CHECK(
          cudnnSetFilter4dDescriptor(fd, CUDNN_DATA_BFLOAT16, CUDNN_TENSOR_NHWC, int(v.k), int(v.c), 3, 3));
      CUDNN_CHECK(
          cudnnSetConvolution2dDescriptor(cd, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
      CUDNN_CHECK(cudnnSetConvolutionMathType(cd, CUDNN_TENSOR_OP_MATH));
      cudnnConvolutionBwdFilterAlgoPerf_t perf[16];
      int found = 0;
      CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, xd, yd, cd, fd, 16, &found, perf));
      Buffer dw16(be, wsz * 2);
      struct Legacy {
        cudnnConvolutionBwdFilterAlgo_t algo;
        cudnnMathType_t math;
        size_t ws;
      };
      std::vector<Legacy> legacy;
      for (int i = 0; i < found; ++i)
        if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= (size_t(512) << 20))
          legacy.push_back({perf[i].algo, perf[i].mathType, perf[i].memory});
      size_t lmax = 16;
      for (const Legacy& l : legacy) lmax = std::max(lmax, l.ws);
      Buffer lws(be, lmax);
      const auto run_legacy = [&](const Legacy& l) {
        CUDNN_CHECK(cudnnSetConvolutionMathType(cd, l.math));
        CUDNN_CHECK(cudnnConvolutionBackwardFilter(h, &kOneF, xd, x.get(), yd, dy.get(), cd, l.algo,
                                                   lws.get(), l.ws, &kZeroF, fd, dw16.get()));
      };
      CudnnGraph g16(be.cudnn());
      g16.tensor({1, CUDNN_DATA_BFLOAT16, {n, v.c, v.hw, v.hw}, nhwc_strides(n, v.c, v.hw, v.hw), false});
      g16.tensor({2, CUDNN_DATA_BFLOAT16, {n, v.k, v.hw, v.hw}, nhwc_strides(n, v.k, v.hw, v.hw), false});
      g16.tensor({3, CUDNN_DATA_BFLOAT16, {v.k, v.c, 3, 3}, nhwc_strides(v.k, v.c, 3, 3), false});
      g16.conv_wgrad(1, 2, 3, gc);
      std::string why16;
      const int n16 = g16.finalize(&why16);
      for (int i = 0; i < n16 && g16.plan_count() < 16; ++i) g16.make_plan(i, size_t(512) << 20, &why16);
      Buffer gws(be, std::max<size_t>(g16.max_plan_workspace(), 16));
      const GraphPointers gptrs = {{1, x.get()}, {2, dy.get()}, {3, dw16.get()}};
      const std::vector<int> gruns = plans_that_run(be, g16, gptrs, gws.get());
      const Fastest f = fastest_candidate(be.stream(), 1 + legacy.size() + gruns.size(), [&](size_t i) {
        if (i == 0) {
          conv.backward(x.get(), w.as<float>(), dy.get(), dw.as<float>(), nullptr);
        } else if (i <= legacy.size()) {
          run_legacy(legacy[i - 1]);
        } else {
          g16.select(gruns[i - 1 - legacy.size()]);
          g16.run(gptrs, gws.get());
        }
      });
      std::cout << what << ": filter gradient, CudnnConv as now (bf16 + relayout) " << f.each[0] * 1e3f
                << " us; legacy";
      for (size_t i = 0; i < legacy.size(); ++i)
        std::cout << " algo " << int(legacy[i].algo) << "/math " << int(legacy[i].math) << " "
                  << f.each[1 + i] * 1e3f << " us (ws " << (legacy[i].ws >> 10) << " KiB)";
      std::cout << "; graph (" << n16 << " configurations, " << gruns.size() << " run):";
      for (size_t i = 0; i < gruns.size(); ++i)
        std::cout << " " << g16.plan_name(gruns[i]) << " " << f.each[1 + legacy.size() + i] * 1e3f << " us;";
      std::cout << "\n";
      cudnnDestroyConvolutionDescriptor(cd);
      cudnnDestroyFilterDescriptor(fd);
      cudnnDestroyTensorDescriptor(yd);
      cudnnDestroyTensorDescriptor(xd);
    }
    // The forward with batchnorm's sums in its epilogue.
    for (int stats = 0; stats < 2; ++stats) {
      CudnnGraph fg(be.cudnn());
      fg.tensor({1, CUDNN_DATA_BFLOAT16, {n, v.c, v.hw, v.hw}, nhwc_strides(n, v.c, v.hw, v.hw), false});
      fg.tensor({2, CUDNN_DATA_BFLOAT16, {v.k, v.c, 3, 3}, nhwc_strides(v.k, v.c, 3, 3), false});
      fg.tensor({3, CUDNN_DATA_BFLOAT16, {n, v.k, v.hw, v.hw}, nhwc_strides(n, v.k, v.hw, v.hw), false});
      if (stats) {
        fg.tensor({4, CUDNN_DATA_FLOAT, {1, v.k, 1, 1}, {v.k, 1, 1, 1}, false});
        fg.tensor({5, CUDNN_DATA_FLOAT, {1, v.k, 1, 1}, {v.k, 1, 1, 1}, false});
      }
      fg.conv_fprop(1, 2, 3, gc);
      if (stats) fg.genstats(3, 4, 5);
      const int nf = fg.finalize(&why);
      for (int i = 0; i < nf && fg.plan_count() < 3; ++i)
        if (!fg.make_plan(i, size_t(256) << 20, &why)) std::cout << "  forward graph: " << why << "\n";
      Buffer fws(be, std::max<size_t>(fg.max_plan_workspace(), 16));
      GraphPointers fptrs = {{1, x.get()}, {2, kept.get()}, {3, y.get()}};
      if (stats) {
        fptrs.add(4, sums.get());
        fptrs.add(5, static_cast<char*>(sums.get()) + v.k * 4);
      }
      const std::vector<int> fruns = plans_that_run(be, fg, fptrs, fws.get());
      std::cout << what << ": forward graph" << (stats ? " with batchnorm sums" : "") << ": " << nf
                << " configurations, " << fruns.size() << " run" << (nf ? "" : " (" + why + ")");
      if (!fruns.empty()) {
        const Fastest f = fastest_candidate(be.stream(), fruns.size(), [&](size_t i) {
          fg.select(fruns[i]);
          fg.run(fptrs, fws.get());
        });
        for (size_t i = 0; i < f.each.size(); ++i)
          std::cout << "; " << fg.plan_name(fruns[i]) << " " << f.each[i] * 1e3f << " us";
      }
      std::cout << "\n";
    }
  }
  spdlog::set_level(level);
}

// The graphs inside the product: a bf16 conv net (conv + bias + relu, conv + bias, a 1x1 with a
// relu) trained four steps through the executor, not deterministic so that CudnnConv may take
// graphs, with TRAINER_CUDNN_FUSION=on (every convolution whose graphs run takes them: fused
// forward, filter gradient) against =off. The two differ in where the bias is added (before the
// one rounding to bf16, or after it) and in the filter gradients' engines (their sums in another
// order), so the results agree within bf16's rounding, and differ (the graphs ran).
TEST_CASE("gpu a bf16 conv net trains alike with and without cuDNN's fused conv graphs", "[gpu][bf16]") {
  if (!gpu_has_math(MathMode::bf16)) return;
  const Config c = parse_config(R"(model:
  input_shape: [8, 16, 16]
  layers:
    - {type: conv2d, name: c0, filters: 32, kernel_size: 3, padding: same, activation: relu}
    - {type: conv2d, name: c1, filters: 32, kernel_size: 3, padding: same}
    - {type: conv2d, name: c2, filters: 16, kernel_size: 1, activation: relu}
    - {type: global_avg_pool, name: gap}
    - {type: dense, name: fc, units: 6}
data: {train: {format: random}, num_classes: 6}
)",
                                "fused.yaml", {});
  const Model model(c.input_shape, c.layers, c.init, c.file);
  struct Taken {
    int fused = 0, wgrad = 0;
  };
  const auto run = [&](const char* mode) {
    setenv("TRAINER_CUDNN_FUSION", mode, 1);
    const int fused = fused_convolutions(), wgrad = graph_wgrads();
    FusionRun r = run_fusion(cuda_backend(), model, MathMode::bf16, false, nullptr, false);
    unsetenv("TRAINER_CUDNN_FUSION");
    return std::make_pair(r, Taken{fused_convolutions() - fused, graph_wgrads() - wgrad});
  };
  const auto [on, taken_on] = run("on");
  const auto [off, taken_off] = run("off");
  const double ep = rel_error(on.params, off.params), eo = rel_error(on.out, off.out);
  INFO("fused convolutions " << taken_on.fused << " / " << taken_off.fused << ", filter-gradient graphs "
                             << taken_on.wgrad << " / " << taken_off.wgrad << "; params rel " << ep
                             << ", outputs rel " << eo);
  std::cout << "fused conv net: " << taken_on.fused << " convolutions fused, " << taken_on.wgrad
            << " filter gradients through graphs; against neither: params rel " << ep << ", outputs rel "
            << eo << "\n";
  if (taken_on.fused == 0 && taken_on.wgrad == 0) {
    std::cout << "SKIPPED: cuDNN built no graph for this net\n";
    return;
  }
  CHECK(taken_off.fused == 0);
  CHECK(taken_off.wgrad == 0);
  CHECK(eo > 0);
  CHECK(eo < 2e-2);
  CHECK(ep < 1e-2);
  CHECK(std::abs(on.train.loss_sum - off.train.loss_sum) <= 1e-2 * std::abs(off.train.loss_sum));
}
