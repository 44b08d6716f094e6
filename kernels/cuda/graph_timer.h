// Timing a piece of GPU work as a step runs it: recorded as a CUDA graph and replayed. Plan-time
// choices between kernels that compute the same thing (direct convolutions against cuDNN's,
// cuBLASLt's candidate algorithms) use it; never inside a step.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <vector>

namespace trainer::cuda {

// Milliseconds per call of `run` on the GPU: run once (libraries finish their lazy set-up), then
// 10 calls captured as one CUDA graph, replayed twice (warm, then timed between events). Timing
// eager launches instead would measure the host: cuDNN's calls take tens of microseconds to
// enqueue, more than small kernels run. Waits for the stream.
float graph_time_ms(cudaStream_t stream, const std::function<void()>& run);

// Candidates 0 .. count-1, each timed by graph_time_ms(run(i)) in `rounds` interleaved rounds
// (every candidate once, then again): each one's fastest. One timing each picked differently
// from run to run and GPU to GPU (clocks still rising at start-up; mnist_cnn's filter gradients
// went to cuDNN on one H100 and to our kernels on an H200). Ties keep the lower index. After the
// first round only candidate 0 and those within kContenders of the fastest are timed again: run
// to run differences, rising clocks included, stay well under 2x, and timing a convolution's slow
// tilings three times over took most of a cold first step (resnet18_cifar, fp32, H200: 2.8 of 3.8 s).
constexpr float kContenders = 2.f;  // a candidate this much slower than the fastest is out
struct Fastest {
  size_t index = 0;
  float ms = 0.f;
  std::vector<float> each;  // per candidate
};
Fastest fastest_candidate(cudaStream_t stream, size_t count, const std::function<void(size_t)>& run,
                          int rounds = 3);

}  // namespace trainer::cuda
