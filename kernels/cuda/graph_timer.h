// Timing a piece of GPU work as a step runs it: recorded as a CUDA graph and replayed. Plan-time
// choices between kernels that compute the same thing (direct convolutions against cuDNN's,
// cuBLASLt's candidate algorithms) use it; never inside a step.
#pragma once

#include <cuda_runtime.h>

#include <functional>

namespace trainer::cuda {

// Milliseconds per call of `run` on the GPU: run once (libraries finish their lazy set-up), then
// 10 calls captured as one CUDA graph, replayed twice (warm, then timed between events). Timing
// eager launches instead would measure the host: cuDNN's calls take tens of microseconds to
// enqueue, more than small kernels run. Waits for the stream.
float graph_time_ms(cudaStream_t stream, const std::function<void()>& run);

}  // namespace trainer::cuda
