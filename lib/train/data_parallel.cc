#include "lib/train/data_parallel.h"

#include <algorithm>
#include <vector>

#include "lib/core/error.h"
#include "lib/memory/allocator.h"

namespace trainer {

MetricSums all_reduce_sums(Communicator& comm, const MetricSums& local) {
  if (comm.size() == 1) return local;
  // One message: loss_sum, samples, skipped samples, top-k counts, the confusion matrix. Counts
  // are whole numbers far below 2^53, exact in doubles.
  std::vector<double> v{local.loss_sum, double(local.samples), double(local.nonfinite.samples)};
  v.insert(v.end(), local.topk.begin(), local.topk.end());
  v.insert(v.end(), local.confusion.begin(), local.confusion.end());
  comm.all_reduce_sum(v.data(), int64_t(v.size()));
  MetricSums m = local;
  m.loss_sum = v[0];
  m.samples = int64_t(v[1]);
  // Every rank ORed its non-finite flags into each step before the update (Executor), so the
  // steps, the first step and the kinds are the same on every rank; only the samples differ.
  m.nonfinite.samples = uint64_t(v[2]);
  auto at = v.begin() + 3;
  std::copy(at, at + long(m.topk.size()), m.topk.begin());
  at += long(m.topk.size());
  std::copy(at, at + long(m.confusion.size()), m.confusion.begin());
  return m;
}

void broadcast_state(Communicator& comm, StepRunner& ex, const Model& model) {
  if (comm.size() == 1) return;
  std::vector<float> params(size_t(model.param_arena_floats())),
      buffers(size_t(std::max<int64_t>(model.buffer_arena_floats(), 1))),
      state(size_t(std::max<int64_t>(ex.optimizer_state_floats(), 1)));
  ex.download_params(params.data(), buffers.data());
  if (ex.optimizer_state_floats()) ex.download_optimizer_state(state.data());
  comm.broadcast(params.data(), params.size() * sizeof(float), 0);
  comm.broadcast(buffers.data(), buffers.size() * sizeof(float), 0);
  comm.broadcast(state.data(), state.size() * sizeof(float), 0);
  ex.upload_params(params.data(), buffers.data());
  if (ex.optimizer_state_floats()) ex.upload_optimizer_state(state.data());
}

void broadcast_buffers(Communicator& comm, StepRunner& ex, const Model& model) {
  if (comm.size() == 1 || model.buffer_arena_floats() == 0) return;
  std::vector<float> buffers(size_t(model.buffer_arena_floats()));
  ex.download_buffers(buffers.data());
  comm.broadcast(buffers.data(), buffers.size() * sizeof(float), 0);
  ex.upload_buffers(buffers.data());
}

std::string gradient_reduction(const DeviceCollective* collective,
                               const std::vector<GradientBucket>& buckets) {
  if (!collective) return "";
  const std::string how =
      collective->description() + (collective->sums_dtype() == DType::f32
                                       ? ""
                                       : std::string("; sent as ") + dtype_name(collective->sums_dtype()));
  if (buckets.size() <= 1) return " on the devices (" + how + ")";
  int64_t largest = 0;
  for (const GradientBucket& b : buckets) largest = std::max(largest, b.floats());
  return " on the devices in " + std::to_string(buckets.size()) + " buckets of at most " +
         format_bytes(size_t(largest) * sizeof(float)) + ", overlapped with the backward pass (" + how + ")";
}

std::unique_ptr<DeviceCollective> join_device_collective(Communicator& comm, Backend& be) {
  // Every rank has the same build, so every rank refuses alike, before any collective.
  const std::string why = be.collectives_unavailable();
  if (!why.empty())
    throw UsageError("data parallelism over " + std::to_string(comm.size()) + " ranks (" +
                     comm.description() + ") on " + be.name() + ": " + why);
  std::vector<uint8_t> id;
  if (comm.is_root()) id = be.make_collective_id();
  // The id's size first (the same for every rank of one build, but not assumed). The broadcast is
  // also the point where every rank has made its backend: a rank that failed before it stops the
  // others here (the host world), not inside the collective's join, which would wait for it.
  uint64_t bytes = id.size();
  comm.broadcast(&bytes, sizeof bytes, 0);
  id.resize(size_t(bytes));
  comm.broadcast(id.data(), id.size(), 0);
  std::unique_ptr<DeviceCollective> c = be.join_collective(id, comm.rank(), comm.size());
  comm.add_failure_hook(c->abort_handle());
  return c;
}

}  // namespace trainer
