// Timing a piece of GPU work as a step runs it: recorded as a CUDA graph and replayed. Plan-time
// choices between kernels that compute the same thing (direct convolutions against cuDNN's,
// cuBLASLt's candidate algorithms) use it; never inside a step.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <vector>

namespace trainer::cuda {

// Candidates 0 .. count-1, timed as a step would run them, in `rounds` interleaved rounds; each
// one's fastest. Ties keep the lower index. First every candidate runs once eagerly (libraries
// and lazily loaded kernels finish their set-up; its time, launch gaps included, sizes its
// repeats: about kRunMs of runs, 1 to kMaxRepeats). Then each candidate is captured once as a
// graph, and each round is one CUDA graph that replays them as child graphs, an event before each
// candidate's repeats and one after the last, launched once; waits for the stream. Timing eager
// launches would measure the host: cuDNN's calls take tens of microseconds to enqueue, more than
// small kernels run. A graph of its own and a host wait for each candidate, as this did before,
// cost about 1 ms a candidate, 20 times what a 28 x 28 convolution's kernels run; capturing each
// round anew called the libraries once a repeat a round (up to 30 calls of cuDNN's a candidate,
// about half of a cold plan's timing on the host). One timing each picked differently from run to
// run and GPU to GPU (clocks still rising at start-up; mnist_cnn's filter gradients went to cuDNN
// on one H100 and to our kernels on an H200). After a round only candidate 0 and those within
// kContenders of the fastest are timed again: run to run differences, rising clocks included, stay
// well under 2x.
constexpr float kContenders = 2.f;  // a candidate this much slower than the fastest is out
constexpr float kRunMs = 0.1f;      // GPU time per candidate per round, about
constexpr int kMaxRepeats = 10;
struct Fastest {
  size_t index = 0;
  float ms = 0.f;
  std::vector<float> each;  // per candidate
};
Fastest fastest_candidate(cudaStream_t stream, size_t count, const std::function<void(size_t)>& run,
                          int rounds = 3);
}  // namespace trainer::cuda
