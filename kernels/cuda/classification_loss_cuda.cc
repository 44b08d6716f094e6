// The losses on class indices on the GPU (classification_loss.cu: the loss, the guard and the
// confusion matrix in one pass; topk_correct.cu per top-k metric). The block sums and the class
// weights live in the scratch the executor takes before the first step; the weights are copied
// there, and the ticket counter zeroed, when the scratch is bound.
#include <memory>

#include "kernels/cuda/classification_loss.cuh"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/token_loss.cuh"
#include "kernels/cuda/topk_correct.cuh"
#include "lib/core/error.h"

namespace trainer {
namespace {

class ClassificationLossCuda : public LossKernel {
 public:
  explicit ClassificationLossCuda(const LossSpec& s) : s_(s), be_(static_cast<CudaBackend&>(*s.backend)) {
    if (s.on_values())
      throw InternalError("loss '" + s.type + "': the classification kernel takes class indices");
    if (s.positions > 1 && (s.scores != ClassScores::logits || s.smoothing != 0.f ||
                            !s.class_weights.empty() || !s.top_k.empty()))
      throw InternalError("loss '" + s.type +
                          "' over positions: logits only, no smoothing, weights or top-k");
  }

  size_t scratch_bytes() const override {
    if (s_.positions > 1) return cuda::token_loss_scratch_bytes(s_.max_batch * s_.positions);
    return sizeof(cuda::LossScratch) + s_.class_weights.size() * sizeof(float);
  }
  void bind(void* scratch) override {
    if (s_.positions > 1) {
      tokens_ = static_cast<cuda::TokenLossScratch*>(scratch);
      return;
    }
    scratch_ = static_cast<cuda::LossScratch*>(scratch);
    be_.zero(scratch_, sizeof(cuda::LossScratch));
    if (s_.class_weights.empty()) return;
    weights_ = reinterpret_cast<float*>(scratch_ + 1);
    be_.copy_to_device(weights_, s_.class_weights.data(), s_.class_weights.size() * sizeof(float));
  }

  // A loss over positions reads 16-bit logits and writes their gradient in 16 bits (the f32
  // arithmetic of the f32 path: a converted copy would give the same numbers).
  bool takes(DType t) const override { return t == DType::f32 || s_.positions > 1; }
  bool takes_pitch() const override { return s_.positions > 1; }

  void run(const LossRun& r) override {
    if (s_.positions > 1) {
      if (!tokens_) throw InternalError("token loss kernel run before its scratch was bound");
      cuda::launch_token_loss(r.dtype, r.out, static_cast<const int32_t*>(r.targets), r.batch * s_.positions,
                              s_.width, r.pitch ? r.pitch : s_.width, s_.ignore_index, r.batch, r.dout,
                              r.loss_sum, tokens_, be_.stream(), r.guard, r.guard_bit, r.sums);
      return;
    }
    if (!scratch_) throw InternalError("classification loss kernel run before its scratch was bound");
    const auto* labels = static_cast<const int32_t*>(r.targets);
    float* confusion = r.sums ? r.sums + s_.top_k.size() : nullptr;
    cuda::launch_classification_loss(s_.scores, r.out_f32(), labels, r.batch, s_.width, r.dout_f32(),
                                     r.loss_sum, s_.smoothing, scratch_, be_.stream(), r.guard, r.guard_bit,
                                     confusion, r.training ? weights_ : nullptr);
    if (!r.sums) return;
    for (size_t k = 0; k < s_.top_k.size(); ++k)
      cuda::launch_topk_correct(r.out_f32(), labels, r.batch, s_.width, s_.top_k[k], r.sums + k,
                                be_.stream());
  }

 private:
  LossSpec s_;
  CudaBackend& be_;
  cuda::LossScratch* scratch_ = nullptr;
  float* weights_ = nullptr;                  // null: no class weights
  cuda::TokenLossScratch* tokens_ = nullptr;  // a loss over positions: its scratch
};

}  // namespace

std::unique_ptr<LossKernel> make_classification_loss_cuda(const LossSpec& s) {
  return std::make_unique<ClassificationLossCuda>(s);
}

}  // namespace trainer
