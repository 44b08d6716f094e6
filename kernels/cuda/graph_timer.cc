// graph_time_ms and fastest_candidate (see graph_timer.h).
#include "kernels/cuda/graph_timer.h"

#include <algorithm>

#include "kernels/cuda/cuda_check.h"

namespace trainer::cuda {

float graph_time_ms(cudaStream_t stream, const std::function<void()>& run) {
  constexpr int kRepeats = 10;
  run();
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  float ms = 0.f;
  const auto release = [&] {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
  };
  try {
    CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    try {
      for (int i = 0; i < kRepeats; ++i) run();
    } catch (...) {
      cudaStreamEndCapture(stream, &graph);
      throw;
    }
    CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CUDA_CHECK(cudaEventRecord(start, stream));
    CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CUDA_CHECK(cudaEventRecord(stop, stream));
    CUDA_CHECK(cudaEventSynchronize(stop));
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  } catch (...) {
    release();
    throw;
  }
  release();
  return ms / kRepeats;
}

Fastest fastest_candidate(cudaStream_t stream, size_t count, const std::function<void(size_t)>& run,
                          int rounds) {
  Fastest f;
  f.each.assign(count, 0.f);
  for (int round = 0; round < rounds; ++round) {
    const float best = round == 0 ? 0.f : *std::min_element(f.each.begin(), f.each.end());
    for (size_t i = 0; i < count; ++i) {
      if (round > 0 && i > 0 && f.each[i] > kContenders * best) continue;
      const float ms = graph_time_ms(stream, [&] { run(i); });
      f.each[i] = round == 0 ? ms : std::min(f.each[i], ms);
    }
  }
  for (size_t i = 0; i < count; ++i)
    if (i == 0 || f.each[i] < f.ms) {
      f.index = i;
      f.ms = f.each[i];
    }
  return f;
}

}  // namespace trainer::cuda
