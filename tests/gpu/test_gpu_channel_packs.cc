// The channels-last passes by 16-byte packs (kernels/cuda/channel_packs.cuh) against the same
// kernels one value a thread: the same data placed one element off 16-byte alignment, which
// packs_fit refuses. Likewise fp32 NCHW batchnorm a float4 at a time (planes of whole float4s)
// against one value a thread. Batchnorm (statistics, normalize with and without a fused relu, backward,
// the synchronized variant's sums), bias add and gradient, tiled max and average pooling
// (fused relu), f32 and bf16, channel counts that fill one pack, many packs, a tile of 32 packs and
// more, and counts that are no whole packs (both runs one value a thread). Element-wise results
// must be the same bits (dx from the same sums too: a fused relu's mask recomputed from x by packs
// and read from the stored output one value a thread); sums (statistics, dgamma, dbeta, dbias) agree within
// 1e-6 relative (double sums in another order; 1e-3 for batchnorm's gradient sums of 16-bit values, which a
// thread adds in float) and with a host reference in double.
#include <cmath>
#include <cstring>

#include "kernels/cuda/batchnorm.cuh"
#include "kernels/cuda/bias.cuh"
#include "kernels/cuda/pool2d.cuh"
#include "lib/core/bf16.h"
#include "tests/gpu/gpu_test_util.h"

using namespace trainer;
using namespace trainer::gpu_test;
using namespace trainer::cuda;

namespace {

// A device tensor of n elements of dtype t, at a 16-byte aligned address (packs allowed) or one
// element past one (packs refused).
class Placed {
 public:
  Placed(CudaBackend& be, DType t, size_t n, bool aligned)
      : be_(be),
        es_(dtype_bytes(t)),
        n_(n),
        buf_(be, n * dtype_bytes(t) + 64),
        p_(static_cast<char*>(buf_.get()) + (aligned ? 0 : dtype_bytes(t))) {}
  void* get() const { return p_; }
  template <class E>
  E* as() const {
    return static_cast<E*>(p_);
  }
  void upload_bytes(const std::vector<uint8_t>& b) { be_.copy_to_device(p_, b.data(), b.size()); }
  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> b(n_ * es_);
    be_.copy_to_host(b.data(), p_, b.size());
    return b;
  }

 private:
  CudaBackend& be_;
  size_t es_, n_;
  Buffer buf_;
  char* p_;
};

// Values as the bytes of dtype t (bf16 rounded), and those values back as floats.
std::vector<uint8_t> encode(DType t, const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * dtype_bytes(t));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DType::f32) {
      std::memcpy(&b[4 * i], &v[i], 4);
    } else {
      const uint16_t h = bf16_from_float(v[i]);
      std::memcpy(&b[2 * i], &h, 2);
    }
  }
  return b;
}
std::vector<float> rounded(DType t, std::vector<float> v) {
  if (t == DType::bf16)
    for (float& f : v) f = float_from_bf16(bf16_from_float(f));
  return v;
}

double max_rel(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::abs(double(a[i]) - double(b[i])) / std::max(1e-3, std::abs(double(b[i]))));
  return m;
}

// One (B, S, C) channels-last or (B, C, S) NCHW batchnorm run: outputs of every call.
struct BnOut {
  std::vector<float> mean, inv, running_mean, running_var, dgamma, dbeta, sync_dgamma, sync_dbeta;
  std::vector<uint8_t> y, dx, sync_dx;
  std::vector<double> sums;
};

struct BnInputs {
  std::vector<uint8_t> x, dy;
  std::vector<float> gamma, beta;
};

BnOut run_batchnorm(CudaBackend& be, DType t, int64_t B, int64_t S, int64_t C, bool relu, bool aligned,
                    const BnInputs& in, const std::vector<float>* shared_stats,
                    const std::vector<double>* shared_sums, bool nhwc = true) {
  const BatchNormGeometry g = batchnorm_geometry(B, C, S, nhwc, t);
  const size_t n = size_t(B * S * C);
  Placed x(be, t, n, aligned), dy(be, t, n, aligned), y(be, t, n, aligned), dx(be, t, n, aligned),
      sync_dx(be, t, n, aligned);
  x.upload_bytes(in.x);
  dy.upload_bytes(in.dy);
  Buffer partial(be, batchnorm_partial_bytes(g)), sums(be, (2 * C + 1) * sizeof(double)),
      stats(be, 4 * C * sizeof(float)), params(be, 4 * C * sizeof(float)), grads(be, 4 * C * sizeof(float)),
      coef(be, 3 * C * sizeof(float)), weight(be, sizeof(float));
  float* mean = stats.as<float>();
  float* inv = mean + C;
  float* rmean = inv + C;
  float* rvar = rmean + C;
  float* gamma = params.as<float>();
  float* beta = gamma + C;
  float* dgamma = grads.as<float>();
  float* dbeta = dgamma + C;
  std::vector<float> init(size_t(4 * C));
  for (int64_t c = 0; c < C; ++c) {
    init[size_t(2 * C + c)] = 0.f;
    init[size_t(3 * C + c)] = 1.f;
  }
  stats.upload(init);
  params.upload([&] {
    std::vector<float> p = in.gamma;
    p.insert(p.end(), in.beta.begin(), in.beta.end());
    return p;
  }());
  weight.upload(std::vector<float>{1.f});
  launch_batchnorm_batch_stats(g, t, x.get(), 0.1f, 1e-5f, partial.as<double>(), mean, inv, rmean, rvar,
                               be.stream());
  BnOut o;
  be.synchronize();
  const std::vector<float> s = stats.download(size_t(4 * C));
  o.mean.assign(s.begin(), s.begin() + C);
  o.inv.assign(s.begin() + C, s.begin() + 2 * C);
  o.running_mean.assign(s.begin() + 2 * C, s.begin() + 3 * C);
  o.running_var.assign(s.begin() + 3 * C, s.end());
  // The element-wise passes take the same statistics in both runs (the aligned run's), so their
  // results can be compared bit for bit.
  if (shared_stats) stats.upload(*shared_stats);
  launch_batchnorm_normalize(g, t, x.get(), mean, inv, gamma, beta, relu, y.get(), be.stream());
  const void* z = relu ? y.get() : nullptr;
  launch_batchnorm_backward(g, t, x.get(), dy.get(), z, mean, inv, gamma, beta, true, partial.as<double>(),
                            coef.as<float>(), dgamma, dbeta, dx.get(), be.stream());
  be.synchronize();
  const std::vector<float> gr = grads.download(size_t(2 * C));
  o.dgamma.assign(gr.begin(), gr.begin() + C);
  o.dbeta.assign(gr.begin() + C, gr.end());
  launch_batchnorm_grad_sums(g, t, x.get(), dy.get(), z, mean, inv, gamma, beta, weight.as<float>(),
                             partial.as<double>(), sums.as<double>(), dgamma, dbeta, be.stream());
  be.synchronize();
  const std::vector<float> sg = grads.download(size_t(2 * C));
  o.sync_dgamma.assign(sg.begin(), sg.begin() + C);
  o.sync_dbeta.assign(sg.begin() + C, sg.end());
  o.sums = sums.download<double>(size_t(2 * C));
  // dx from the same sums in both runs (the aligned run's): the same bits, the fused relu's mask
  // recomputed from x by packs and read from z one value a thread.
  if (shared_sums) sums.upload(*shared_sums);
  launch_batchnorm_dx_from_sums(g, t, x.get(), dy.get(), z, mean, inv, gamma, beta, sums.as<double>(),
                                coef.as<float>(), sync_dx.get(), be.stream());
  be.synchronize();
  o.sync_dx = sync_dx.bytes();
  o.y = y.bytes();
  o.dx = dx.bytes();
  return o;
}

}  // namespace

TEST_CASE("gpu batchnorm by packs (channels-last) and float4s (NCHW fp32) equals one value a thread",
          "[gpu][packs]") {
  CudaBackend& be = cuda_backend();
  uint64_t seed = 40;
  for (bool nhwc : {true, false})
    for (DType t : {DType::f32, DType::bf16})
      for (int64_t C : {8, 12, 64, 256, 520})
        for (auto [B, S] : {std::pair<int64_t, int64_t>{3, 49}, {2, 4}, {16, 64}, {5, 196}})
          for (bool relu : {false, true}) {
            if (!nhwc && t != DType::f32) continue;  // NCHW goes by float4s in fp32 only
            INFO((nhwc ? "NHWC " : "NCHW ")
                 << dtype_name(t) << " B " << B << " S " << S << " C " << C << (relu ? " relu" : ""));
            const size_t n = size_t(B * S * C);
            // Value i's channel.
            const auto channel = [&, spatial = S](size_t i) {
              return nhwc ? i % size_t(C) : i / size_t(spatial) % size_t(C);
            };
            BnInputs in;
            std::vector<float> xv = random_vector(n, ++seed, -2.f, 3.f);
            for (size_t i = 0; i < n; ++i) xv[i] += 0.05f * float(channel(i));  // channel offsets
            xv = rounded(t, xv);
            const std::vector<float> dyv = rounded(t, random_vector(n, ++seed));
            in.x = encode(t, xv);
            in.dy = encode(t, dyv);
            in.gamma = random_vector(size_t(C), ++seed, 0.5f, 1.5f);
            in.beta = random_vector(size_t(C), ++seed);
            const BnOut a = run_batchnorm(be, t, B, S, C, relu, true, in, nullptr, nullptr, nhwc);
            std::vector<float> stats = a.mean;
            stats.insert(stats.end(), a.inv.begin(), a.inv.end());
            stats.insert(stats.end(), a.running_mean.begin(), a.running_mean.end());
            stats.insert(stats.end(), a.running_var.begin(), a.running_var.end());
            const BnOut b = run_batchnorm(be, t, B, S, C, relu, false, in, &stats, &a.sums, nhwc);
            // Statistics against each other and a host reference in double.
            std::vector<float> ref_mean(static_cast<size_t>(C)), ref_inv(static_cast<size_t>(C));
            for (int64_t c = 0; c < C; ++c) {
              double s = 0, q = 0;
              for (int64_t r = 0; r < B * S; ++r) {
                const double v = xv[size_t(nhwc ? r * C + c : (r / S * C + c) * S + r % S)];
                s += v;
                q += v * v;
              }
              const double m = s / double(B * S), var = std::max(0.0, q / double(B * S) - m * m);
              ref_mean[size_t(c)] = float(m);
              ref_inv[size_t(c)] = float(1.0 / std::sqrt(var + 1e-5));
            }
            CHECK(max_rel(b.mean, a.mean) < 1e-6);
            CHECK(max_rel(b.inv, a.inv) < 1e-6);
            CHECK(max_rel(a.mean, ref_mean) < 1e-5);
            CHECK(max_rel(a.inv, ref_inv) < 1e-5);
            CHECK(max_rel(b.running_var, a.running_var) < 1e-6);
            // Element-wise with the same statistics: the same bits.
            CHECK(b.y == a.y);
            CHECK(b.sync_dx == a.sync_dx);
            const double grad_sums = t == DType::f32 ? 1e-6 : 1e-3;
            CHECK(max_rel(b.dgamma, a.dgamma) < grad_sums);
            CHECK(max_rel(b.dbeta, a.dbeta) < grad_sums);
            CHECK(max_rel(b.sync_dgamma, a.sync_dgamma) < grad_sums);
            CHECK(max_rel(b.sync_dbeta, a.sync_dbeta) < grad_sums);
            // dx from each run's own gradient sums: equal up to their last bits.
            std::vector<float> fa(n), fb(n);
            for (size_t i = 0; i < n; ++i) {
              if (t == DType::f32) {
                std::memcpy(&fa[i], &a.dx[4 * i], 4);
                std::memcpy(&fb[i], &b.dx[4 * i], 4);
              } else {
                uint16_t ha, hb;
                std::memcpy(&ha, &a.dx[2 * i], 2);
                std::memcpy(&hb, &b.dx[2 * i], 2);
                fa[i] = float_from_bf16(ha);
                fb[i] = float_from_bf16(hb);
              }
            }
            double worst = 0;  // in units of the largest |dx|, which bf16 rounds at 2^-8 of itself
            double scale = 1e-30;
            for (float v : fa) scale = std::max(scale, double(std::abs(v)));
            for (size_t i = 0; i < n; ++i)
              worst = std::max(worst, std::abs(double(fa[i]) - double(fb[i])) / scale);
            CHECK(worst < (t == DType::f32 ? 1e-5 : 1e-2));
          }
}

TEST_CASE("gpu channels-last bias add and gradient by packs equal one value a thread", "[gpu][packs]") {
  CudaBackend& be = cuda_backend();
  uint64_t seed = 90;
  for (DType t : {DType::f32, DType::bf16})
    for (int64_t C : {4, 8, 20, 64, 512})
      for (auto [B, S] : {std::pair<int64_t, int64_t>{3, 49}, {1, 1}, {64, 16}})
        for (bool relu : {false, true}) {
          INFO(dtype_name(t) << " B " << B << " S " << S << " C " << C << (relu ? " relu" : ""));
          const size_t n = size_t(B * S * C);
          const std::vector<float> yv = rounded(t, random_vector(n, ++seed));
          const std::vector<float> bias = random_vector(size_t(C), ++seed);
          std::vector<std::vector<uint8_t>> added;
          std::vector<std::vector<float>> dbias;
          for (bool aligned : {true, false}) {
            Placed y(be, t, n, aligned);
            y.upload_bytes(encode(t, yv));
            Buffer b(be, size_t(C) * 4), db(be, size_t(C) * 4);
            b.upload(bias);
            const BiasGradSplit s = bias_grad_split(B, C, S, true, t);
            Buffer scratch(be, std::max<size_t>(bias_grad_scratch_bytes(s), 8));
            launch_bias_grad(s, t, y.get(), db.as<float>(), scratch.as<double>(), be.stream());
            launch_bias_add(t, y.get(), b.as<float>(), B, C, S, true, be.stream(), relu);
            be.synchronize();
            added.push_back(y.bytes());
            dbias.push_back(db.download(size_t(C)));
          }
          std::vector<float> ref(size_t(C), 0.f);
          for (int64_t c = 0; c < C; ++c) {
            double sum = 0;
            for (int64_t r = 0; r < B * S; ++r) sum += yv[size_t(r * C + c)];
            ref[size_t(c)] = float(sum);
          }
          CHECK(added[0] == added[1]);
          CHECK(max_rel(dbias[1], dbias[0]) < 1e-6);
          CHECK(max_rel(dbias[0], ref) < 1e-5);
        }
}

// The tiling windows (stride = window, no padding) and overlapping ones with padding (resnet's 3x3
// stride-2 pool with padding 1), which the generic kernels take.
TEST_CASE("gpu channels-last pooling by packs equals one value a thread", "[gpu][packs]") {
  CudaBackend& be = cuda_backend();
  uint64_t seed = 130;
  struct Geometry {
    int64_t h, k, s, pad;
  };
  for (DType t : {DType::f32, DType::bf16})
    for (int64_t C : {8, 12, 64, 512})
      for (const Geometry& q : {Geometry{6, 2, 2, 0},
                                {7, 2, 2, 0},
                                {9, 3, 3, 0},
                                {7, 3, 2, 1},
                                {8, 3, 1, 1},
                                Geometry{9, 3, 2, 0}})
        for (bool max : {true, false})
          for (bool relu : {false, true}) {
            const int64_t H = q.h, K = q.k;
            INFO(dtype_name(t) << " C " << C << " H " << H << " K " << K << " stride " << q.s << " pad "
                               << q.pad << (max ? " max" : " avg") << (relu ? " relu" : ""));
            PoolGeometry g;
            g.batch = 3;
            g.channels = C;
            g.h = g.w = H;
            g.kh = g.kw = K;
            g.sh = g.sw = q.s;
            g.pad_top = g.pad_left = q.pad;
            g.oh = g.ow = (H + 2 * q.pad - K) / q.s + 1;
            g.max = max;
            g.relu = relu;
            g.channels_last = true;
            const size_t n_in = size_t(g.batch * C * H * H), n_out = size_t(g.batch * C * g.oh * g.ow);
            // Ties in every window's first two values now and then: the first maximum wins.
            std::vector<float> xv = random_vector(n_in, ++seed);
            for (size_t i = 0; i + C < n_in; i += 7) xv[i + size_t(C)] = xv[i];
            xv = rounded(t, xv);
            const std::vector<float> dyv = rounded(t, random_vector(n_out, ++seed));
            std::vector<std::vector<uint8_t>> ys, dxs;
            std::vector<std::vector<uint8_t>> args;
            const size_t arg_bytes = pool2d_argmax_bytes(g);
            for (bool aligned : {true, false}) {
              Placed x(be, t, n_in, aligned), y(be, t, n_out, aligned), dy(be, t, n_out, aligned),
                  dx(be, t, n_in, aligned);
              Buffer arg(be, n_out * 4 + 64);
              void* argmax = arg.as<int32_t>() + (aligned ? 0 : 1);  // 4 bytes off: no packs
              x.upload_bytes(encode(t, xv));
              dy.upload_bytes(encode(t, dyv));
              launch_pool2d_forward(g, t, x.get(), y.get(), argmax, be.stream());
              launch_pool2d_backward(g, t, dy.get(), relu ? y.get() : nullptr, argmax, dx.get(), be.stream());
              be.synchronize();
              ys.push_back(y.bytes());
              dxs.push_back(dx.bytes());
              std::vector<uint8_t> a(max ? arg_bytes : 0);
              if (max) be.copy_to_host(a.data(), argmax, arg_bytes);
              args.push_back(a);
            }
            CHECK(ys[0] == ys[1]);
            CHECK(args[0] == args[1]);
            CHECK(dxs[0] == dxs[1]);
          }
}
