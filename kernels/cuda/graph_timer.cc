// graph_time_ms (see graph_timer.h).
#include "kernels/cuda/graph_timer.h"

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

}  // namespace trainer::cuda
