// fastest_candidate (see graph_timer.h).
#include "kernels/cuda/graph_timer.h"

#include <algorithm>
#include <cmath>

#include "kernels/cuda/cuda_check.h"

namespace trainer::cuda {
namespace {

// CUDA events that time, destroyed with the object.
class TimingEvents {
 public:
  explicit TimingEvents(size_t n) {
    events_.reserve(n);
    try {
      for (size_t i = 0; i < n; ++i) {
        cudaEvent_t e = nullptr;
        CUDA_CHECK(cudaEventCreate(&e));
        events_.push_back(e);
      }
    } catch (...) {  // a constructor that throws gets no destructor: give back what was made
      release();
      throw;
    }
  }
  ~TimingEvents() { release(); }
  TimingEvents(const TimingEvents&) = delete;
  TimingEvents& operator=(const TimingEvents&) = delete;
  cudaEvent_t operator[](size_t i) const { return events_[i]; }
  float ms_between(size_t a, size_t b) const {  // after both completed
    float ms = 0.f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, events_[a], events_[b]));
    return ms;
  }

 private:
  void release() noexcept {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    events_.clear();
  }
  std::vector<cudaEvent_t> events_;
};

// Events, each candidate's graph and a round's graph, released however the timing ends.
struct TimingResources {
  TimingEvents events;
  std::vector<cudaGraph_t> single;  // candidate i's work, captured once
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  TimingResources(size_t n_events, size_t n_candidates) : events(n_events), single(n_candidates, nullptr) {}
  void drop_graph() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    exec = nullptr;
    graph = nullptr;
  }
  ~TimingResources() {
    drop_graph();
    for (cudaGraph_t g : single)
      if (g) cudaGraphDestroy(g);
  }
  TimingResources(const TimingResources&) = delete;
  TimingResources& operator=(const TimingResources&) = delete;
};

// Captures `body` on `stream` as *graph; a throw ends the capture first.
template <class Body>
void capture(cudaStream_t stream, cudaGraph_t* graph, const Body& body) {
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    body();
  } catch (...) {
    cudaGraph_t partial = nullptr;
    cudaStreamEndCapture(stream, &partial);
    if (partial) cudaGraphDestroy(partial);
    throw;
  }
  CUDA_CHECK(cudaStreamEndCapture(stream, graph));
}

// One round as r.exec, a chain: before the k-th candidate of `which` event k is recorded, then its
// graph runs repeats[which[k]] times; event which.size() after the last. Launched once, it has no
// host gaps between candidates and makes no call into the libraries.
void build_round(TimingResources& r, const std::vector<size_t>& which, const std::vector<int>& repeats) {
  r.drop_graph();
  CUDA_CHECK(cudaGraphCreate(&r.graph, 0));
  cudaGraphNode_t prev = nullptr;
  const auto record = [&](cudaEvent_t e) {
    cudaGraphNode_t n = nullptr;
    CUDA_CHECK(cudaGraphAddEventRecordNode(&n, r.graph, prev ? &prev : nullptr, prev ? 1 : 0, e));
    prev = n;
  };
  for (size_t k = 0; k < which.size(); ++k) {
    record(r.events[k]);
    for (int j = 0; j < repeats[which[k]]; ++j) {
      cudaGraphNode_t n = nullptr;
      CUDA_CHECK(cudaGraphAddChildGraphNode(&n, r.graph, &prev, 1, r.single[which[k]]));
      prev = n;
    }
  }
  record(r.events[which.size()]);
  CUDA_CHECK(cudaGraphInstantiate(&r.exec, r.graph, 0));
}

// Launches the round built last and waits for it; candidate which[k]'s milliseconds a run.
std::vector<float> run_round(cudaStream_t stream, TimingResources& r, const std::vector<size_t>& which,
                             const std::vector<int>& repeats) {
  CUDA_CHECK(cudaGraphLaunch(r.exec, stream));
  CUDA_CHECK(cudaEventSynchronize(r.events[which.size()]));
  std::vector<float> ms(which.size(), 0.f);
  for (size_t k = 0; k < which.size(); ++k) ms[k] = r.events.ms_between(k, k + 1) / float(repeats[which[k]]);
  return ms;
}

}  // namespace

Fastest fastest_candidate(cudaStream_t stream, size_t count, const std::function<void(size_t)>& run,
                          int rounds) {
  Fastest f;
  f.each.assign(count, 0.f);
  if (count == 0) return f;
  // Events: one before each candidate and one after the last.
  TimingResources r(count + 1, count);
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
    const float ms = r.events.ms_between(i, i + 1);
    if (ms > 0.f) repeats[i] = std::clamp(int(std::ceil(kRunMs / ms)), 1, kMaxRepeats);
  }
  // Each candidate captured once; the rounds replay it.
  for (size_t i = 0; i < count; ++i) capture(stream, &r.single[i], [&] { run(i); });
  std::vector<size_t> timed(count);
  for (size_t i = 0; i < count; ++i) timed[i] = i;
  for (int round = 0; round < rounds && !timed.empty(); ++round) {
    build_round(r, timed, repeats);
    const std::vector<float> ms = run_round(stream, r, timed, repeats);
    for (size_t k = 0; k < timed.size(); ++k)
      f.each[timed[k]] = round == 0 ? ms[k] : std::min(f.each[timed[k]], ms[k]);
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
