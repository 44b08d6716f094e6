// CudnnConv::choose_direct: our kernels (direct_conv.cuh), every tiling of each direction, against
// the cuDNN algorithms choose_algorithms kept, timed the same way on the same buffers, once per
// shape per process. Each direction keeps the fastest; the direct forward's time includes the
// bias it fuses and the cuDNN time does not include the bias kernel it would need, so ties go to
// cuDNN. A direction whose cuDNN time is under what the direct kernels could take at
// kDirectPeakShare of the FP32 units' peak is not timed against them: they reach 10-19 TFLOP/s of
// an H200's 67 (at most 28%), and the 64-channel 3x3 convolutions of 32 x 32 maps that cuDNN's
// Winograd algorithms win by 1.5-3.3x took 0.4-0.7 s a direction to time (resnet18_cifar's cold
// first step in fp32: 3.8 s, 2.8 of them timing tilings that lost).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cuda/algo_disk_cache.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cudnn_conv.h"
#include "kernels/cuda/graph_timer.h"
#include "kernels/cuda/measure_buffers.h"

namespace trainer::cuda {
namespace {

constexpr float kOne = 1.f, kZero = 0.f;
constexpr double kDirectPeakShare = 1.0 / 3;  // of CudaBackend::fp32_core_flops(): more than they reach
constexpr DirectConv::Direction kDirections[3] = {DirectConv::kForward, DirectConv::kBackwardData,
                                                  DirectConv::kBackwardFilter};

std::mutex g_direct_mutex;
// Per shape: the tiling each direction runs, -1 for cuDNN.
std::map<std::string, std::array<int, 3>>& direct_cache() {
  static std::map<std::string, std::array<int, 3>> m;
  return m;
}

}  // namespace

void CudnnConv::choose_direct(const std::string& what, const std::string& shape_key, size_t x_bytes,
                              size_t w_bytes, size_t y_bytes) {
  if (!direct_ ||
      !(direct_->forward_fits() || direct_->backward_data_fits() || direct_->backward_filter_fits()))
    return;
  const std::string key = "gpu" + std::to_string(be_.device()) + " " + shape_key;
  std::array<int, 3> use{-1, -1, -1};
  bool cached = false;
  {
    std::lock_guard<std::mutex> lock(g_direct_mutex);
    auto it = direct_cache().find(key);
    if (it != direct_cache().end()) {
      use = it->second;
      cached = true;
    }
  }
  // A choice timed by an earlier process on this GPU, driver and cuDNN, against the same cuDNN
  // algorithms (kernels/cuda/algo_disk_cache.h), if each tiling is still one of this shape's.
  // "direct2": the tilings gained the 3x3 correlation; choices timed without it are timed again.
  const std::string disk_key = gpu_identity(be_.device()) + " direct2 " + shape_key + " against " +
                               std::to_string(int(fwd_algo_)) + "," + std::to_string(int(bwd_data_algo_)) +
                               "," + std::to_string(int(bwd_filter_algo_));
  if (std::string stored; !cached && conv_algo_cache().get(disk_key, &stored)) {
    std::istringstream in(stored);
    std::array<int, 3> v{};
    bool ok = bool(in >> v[0] >> v[1] >> v[2]);
    std::string rest;
    ok = ok && !(in >> rest);
    for (int d = 0; ok && d < 3; ++d)
      ok = v[size_t(d)] >= -1 && v[size_t(d)] < direct_->tilings(kDirections[d]);
    if (ok) {
      use = v;
      cached = true;
      std::lock_guard<std::mutex> lock(g_direct_mutex);
      direct_cache()[key] = use;
    }
  }
  if (!cached) {
    try {
      MeasureBuffers buf(be_.allocator());
      // x_bytes: the input cuDNN sees (padded when the padding is asymmetric), at least the raw x.
      auto* x = static_cast<float*>(buf.take(x_bytes, what + ": timing direct kernels (input)"));
      auto* dx = static_cast<float*>(buf.take(x_bytes, what + ": timing direct kernels (input gradient)"));
      auto* w = static_cast<float*>(buf.take(w_bytes, what + ": timing direct kernels (weights)"));
      auto* dw = static_cast<float*>(buf.take(w_bytes, what + ": timing direct kernels (weight gradient)"));
      auto* bias = static_cast<float*>(buf.take(size_t(k_) * sizeof(float), what + ": timing (bias)"));
      auto* y = static_cast<float*>(buf.take(y_bytes, what + ": timing direct kernels (output)"));
      auto* dy = static_cast<float*>(buf.take(y_bytes, what + ": timing direct kernels (output gradient)"));
      const size_t ws_bytes = std::max({fwd_ws_, bwd_data_ws_, bwd_filter_ws_, direct_->max_scratch_bytes()});
      void* ws = buf.take(ws_bytes, what + ": timing direct kernels (scratch)");
      for (auto [p, n] :
           {std::pair<void*, size_t>{x, x_bytes}, {w, w_bytes}, {bias, size_t(k_) * 4}, {dy, y_bytes}})
        be_.zero(p, n);
      const cudnnHandle_t h = be_.cudnn();
      const cudaStream_t st = be_.stream();
      const char* names[3] = {"forward", "backward-data", "backward-filter"};
      const std::function<void()> cudnn_run[3] = {
          [&] {
            CUDNN_CHECK(cudnnConvolutionForward(h, &kOne, x_desc_, x, w_desc_, w, conv_desc_[kFwd], fwd_algo_,
                                                ws, fwd_ws_, &kZero, y_desc_, y));
          },
          [&] {
            CUDNN_CHECK(cudnnConvolutionBackwardData(h, &kOne, w_desc_, w, y_desc_, dy, conv_desc_[kBwdData],
                                                     bwd_data_algo_, ws, bwd_data_ws_, &kZero, x_desc_, dx));
          },
          [&] {
            CUDNN_CHECK(cudnnConvolutionBackwardFilter(h, &kOne, x_desc_, x, y_desc_, dy,
                                                       conv_desc_[kBwdFilter], bwd_filter_algo_, ws,
                                                       bwd_filter_ws_, &kZero, w_desc_, dw));
          }};
      const std::function<void()> direct_run[3] = {
          [&] { direct_->forward(x, w, bias, y, ws, st); },
          [&] { direct_->backward_data(dy, w, dx, ws, st); },
          [&] { direct_->backward_filter(x, dy, dw, bias, ws, st); }};
      // The fastest the direct kernels could run one direction, in ms (0: no peak known).
      const double peak = be_.fp32_core_flops();
      const double ceiling_ms = peak > 0 ? 2 * macs_ / (kDirectPeakShare * peak) * 1e3 : 0;
      for (int d = 0; d < 3; ++d) {
        const int count = direct_->tilings(kDirections[d]);
        if (count == 0) continue;
        if (ceiling_ms > 0) {
          // As cuDNN's list measured it, or alone.
          const float alone = chosen_ms_[d] >= 0
                                  ? chosen_ms_[d]
                                  : fastest_candidate(st, 1, [&](size_t) { cudnn_run[d](); }).ms;
          if (alone <= ceiling_ms) {
            spdlog::debug(
                "{}: {} cuDNN {:.4f} ms, under the direct kernels' {:.4f} ms at {:.0f}% of the FP32 peak: "
                "not timed",
                what, names[d], alone, ceiling_ms, 100 * kDirectPeakShare);
            continue;
          }
        }
        // Candidate 0 is cuDNN's choice, candidate 1 + t our tiling t; ours against each other.
        const Fastest f = fastest_candidate(st, size_t(count) + 1, [&](size_t i) {
          if (i == 0) return cudnn_run[d]();
          direct_->select(kDirections[d], int(i) - 1);
          direct_run[d]();
        });
        const float cudnn_ms = f.each[0];
        const auto fastest_tiling = std::min_element(f.each.begin() + 1, f.each.end());
        const float best_ms = *fastest_tiling;
        use[size_t(d)] = int(fastest_tiling - f.each.begin()) - 1;
        const std::string tiling = direct_->describe(kDirections[d], use[size_t(d)]);
        if (!(best_ms < cudnn_ms)) use[size_t(d)] = -1;
        spdlog::debug("{}: {} direct {:.4f} ms ({}, fastest of {}), cuDNN {:.4f} ms: {}", what, names[d],
                      best_ms, tiling, count, cudnn_ms, use[size_t(d)] >= 0 ? "direct" : "cuDNN");
      }
    } catch (const OutOfMemoryError& e) {
      spdlog::debug("{}: timing the direct kernels does not fit ({}); cuDNN for all directions", what,
                    e.what());
      return;
    } catch (const RuntimeError& e) {  // e.g. a cuDNN call that cannot be captured in a graph
      spdlog::debug("{}: timing the direct kernels failed ({}); cuDNN for all directions", what, e.what());
      return;
    }
    conv_algo_cache().put(
        disk_key, std::to_string(use[0]) + " " + std::to_string(use[1]) + " " + std::to_string(use[2]));
    std::lock_guard<std::mutex> lock(g_direct_mutex);
    direct_cache()[key] = use;
  }
  for (int d = 0; d < 3; ++d)
    if (use[size_t(d)] >= 0) direct_->select(kDirections[d], use[size_t(d)]);
  direct_fwd_ = use[0] >= 0;
  direct_bwd_data_ = use[1] >= 0;
  direct_bwd_filter_ = use[2] >= 0;
  // The directions take the one scratch in turn (same stream).
  const bool used[3] = {direct_fwd_, direct_bwd_data_, direct_bwd_filter_};
  for (int d = 0; d < 3; ++d)
    if (used[d]) scratch_bytes_ = std::max(scratch_bytes_, align_up(direct_->scratch_bytes(kDirections[d])));
}

}  // namespace trainer::cuda
