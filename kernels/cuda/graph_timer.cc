// fastest_candidate (see graph_timer.h).
#include "kernels/cuda/graph_timer.h"

#include <algorithm>
#include <cmath>

#include "kernels/cuda/cuda_check.h"

namespace trainer::cuda {
namespace {

// Events and a graph, released however the timing ends.
struct TimingResources {
  std::vector<cudaEvent_t> events;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  explicit TimingResources(size_t n_events) {
    events.reserve(n_events);
    for (size_t i = 0; i < n_events; ++i) {
      cudaEvent_t e = nullptr;
      CUDA_CHECK(cudaEventCreate(&e));
      events.push_back(e);
    }
  }
  void drop_graph() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    exec = nullptr;
    graph = nullptr;
  }
  ~TimingResources() {
    drop_graph();
    for (cudaEvent_t e : events) cudaEventDestroy(e);
  }
  TimingResources(const TimingResources&) = delete;
  TimingResources& operator=(const TimingResources&) = delete;
};

// Captures `body` on `stream` as r.graph and instantiates it; a throw ends the capture first.
template <class Body>
void capture(cudaStream_t stream, TimingResources& r, const Body& body) {
  r.drop_graph();
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    body();
  } catch (...) {
    cudaStreamEndCapture(stream, &r.graph);
    throw;
  }
  CUDA_CHECK(cudaStreamEndCapture(stream, &r.graph));
  CUDA_CHECK(cudaGraphInstantiate(&r.exec, r.graph, 0));
}

}  // namespace

Fastest fastest_candidate(cudaStream_t stream, size_t count, const std::function<void(size_t)>& run,
                          int rounds) {
  Fastest f;
  f.each.assign(count, 0.f);
  if (count == 0) return f;
  // Events: one before each candidate and one after the last, in the warm-up and in each round.
  TimingResources r(count + 1);
  // Warm-up, eagerly: libraries and lazily loaded kernels finish their set-up; the times (launch
  // gaps included) only size the repeats.
  for (size_t i = 0; i < count; ++i) {
    CUDA_CHECK(cudaEventRecord(r.events[i], stream));
    run(i);
  }
  CUDA_CHECK(cudaEventRecord(r.events[count], stream));
  CUDA_CHECK(cudaEventSynchronize(r.events[count]));
  std::vector<int> repeats(count, kMaxRepeats);
  for (size_t i = 0; i < count; ++i) {
    float ms = 0.f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, r.events[i], r.events[i + 1]));
    if (ms > 0.f) repeats[i] = std::clamp(int(std::ceil(kRunMs / ms)), 1, kMaxRepeats);
  }
  std::vector<size_t> timed(count);
  for (size_t i = 0; i < count; ++i) timed[i] = i;
  for (int round = 0; round < rounds && !timed.empty(); ++round) {
    capture(stream, r, [&] {
      for (size_t k = 0; k < timed.size(); ++k) {
        CUDA_CHECK(cudaEventRecordWithFlags(r.events[k], stream, cudaEventRecordExternal));
        for (int j = 0; j < repeats[timed[k]]; ++j) run(timed[k]);
      }
      CUDA_CHECK(cudaEventRecordWithFlags(r.events[timed.size()], stream, cudaEventRecordExternal));
    });
    CUDA_CHECK(cudaGraphLaunch(r.exec, stream));
    CUDA_CHECK(cudaEventSynchronize(r.events[timed.size()]));
    for (size_t k = 0; k < timed.size(); ++k) {
      float ms = 0.f;
      CUDA_CHECK(cudaEventElapsedTime(&ms, r.events[k], r.events[k + 1]));
      ms /= float(repeats[timed[k]]);
      f.each[timed[k]] = round == 0 ? ms : std::min(f.each[timed[k]], ms);
    }
    const float best = *std::min_element(f.each.begin(), f.each.end());
    timed.erase(std::remove_if(timed.begin(), timed.end(),
                               [&](size_t i) { return i > 0 && f.each[i] > kContenders * best; }),
                timed.end());
  }
  for (size_t i = 0; i < count; ++i)
    if (i == 0 || f.each[i] < f.ms) {
      f.index = i;
      f.ms = f.each[i];
    }
  return f;
}

}  // namespace trainer::cuda
