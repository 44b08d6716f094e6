#include "lib/backend/step_kernels.h"

#include <utility>

#include "lib/backend/backend.h"
#include "lib/core/error.h"

namespace trainer {

StepKernelRegistry& StepKernelRegistry::global() {
  static StepKernelRegistry r;
  return r;
}

void StepKernelRegistry::add(const std::string& backend, StepKernelSet set) {
  if (!set.guard || !set.loss_scale || !set.clip || !set.augment)
    throw InternalError("the " + backend + " backend registered an incomplete set of step kernels");
  sets_[backend] = std::move(set);
}

const StepKernelSet& StepKernelRegistry::of(const Backend& be) const {
  const auto it = sets_.find(be.name());
  if (it == sets_.end()) throw InternalError("the " + be.name() + " backend registered no step kernels");
  return it->second;
}

std::unique_ptr<GuardKernel> StepKernelRegistry::guard(Backend& be) const { return of(be).guard(be); }
std::unique_ptr<LossScaleKernel> StepKernelRegistry::loss_scale(Backend& be, const LossScaleHyper& h) const {
  return of(be).loss_scale(be, h);
}
std::unique_ptr<ClipKernel> StepKernelRegistry::clip(Backend& be, float max_norm) const {
  if (!(max_norm > 0)) throw InternalError("a clip kernel with max_norm " + std::to_string(max_norm));
  return of(be).clip(be, max_norm);
}
std::unique_ptr<AugmentKernel> StepKernelRegistry::augment(Backend& be, const AugmentSpec& spec) const {
  return of(be).augment(be, spec);
}

}  // namespace trainer
