// The losses on float targets on the GPU (value_loss.cu): the column partial sums and the
// pos_weight values live in the scratch the executor takes before the first step; the weights are
// copied there once, when the scratch is bound.
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/value_loss.cuh"
#include "lib/core/error.h"

namespace trainer {
namespace {

class ValueLossCuda : public LossKernel {
 public:
  explicit ValueLossCuda(const LossSpec& s) : s_(s), be_(static_cast<CudaBackend&>(*s.backend)) {
    a_.formula = s.formula;
    a_.width = s.width;
    a_.delta = s.delta;
    a_.scale = s.scale;
    a_.binary_metrics = s.binary_metrics;
  }

  size_t scratch_bytes() const override {
    return size_t(s_.width) * sizeof(double) + (s_.pos_weight.empty() ? 0 : size_t(s_.width) * sizeof(float));
  }
  void bind(void* scratch) override {
    partials_ = static_cast<double*>(scratch);
    if (s_.pos_weight.empty()) return;
    float* w = reinterpret_cast<float*>(partials_ + s_.width);
    std::vector<float> host(size_t(s_.width));
    for (size_t k = 0; k < host.size(); ++k) host[k] = s_.pos_weight[s_.pos_weight.size() == 1 ? 0 : k];
    be_.copy_to_device(w, host.data(), host.size() * sizeof(float));
    a_.pos_weight = w;
  }

  void run(const LossRun& r) override {
    if (!partials_) throw InternalError("value loss kernel run before its scratch was bound");
    cuda::ValueLossArgs a = a_;
    a.batch = r.batch;
    cuda::launch_value_loss(a, r.out_f32(), static_cast<const float*>(r.targets), r.dout_f32(), r.loss_sum,
                            partials_, r.guard, r.guard_bit, r.sums, be_.stream());
  }

 private:
  LossSpec s_;
  CudaBackend& be_;
  cuda::ValueLossArgs a_;
  double* partials_ = nullptr;
};

}  // namespace

std::unique_ptr<LossKernel> make_value_loss_cuda(const LossSpec& s) {
  return std::make_unique<ValueLossCuda>(s);
}

}  // namespace trainer
