// Runs one case of the conformance table (conformance_table.h) on one backend, through the
// registry and the LayerKernel interface only: no concrete kernel is named here, so a backend is
// tested by handing its Backend& to run_case().
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lib/backend/backend.h"
#include "tests/conformance/conformance_table.h"

namespace trainer::conformance {

// The host data of one case, the same for every backend.
struct CaseData {
  std::unique_ptr<Layer> layer;
  int64_t batch = 0;
  bool training = true;
  int forwards = 1;
  bool fused_relu = false;            // Case::fused_relu
  std::vector<float> x, dy;           // dy is also r in the finite differences' L = sum(y * r)
  std::vector<float> params;          // the layer's tensors, laid out as Model does (ArenaLayout: one
                                      // aligned slot each); the slots' padding holds NaN, which no kernel
                                      // may read
  std::vector<size_t> param_offsets;  // of each ParamSpec's tensor in `params`, in floats
  std::vector<size_t> live;           // the tensors' elements in `params` (padding excluded)
  std::vector<float> buffers;         // the buffer specs' tensors, one after another
  StepScalars scalars;                // seed and step of dropout's mask
  int layer_index = 3;
};

// Draws a case's data from its seed (see Inputs; parameters U(-0.5, 0.5), gamma U(0.5, 1.5),
// buffers their init + U(-0.5, 0.5), dy U(-1, 1)).
CaseData make_case_data(const Case& c);

// What one run (forwards, then one backward) leaves in backend memory, read back.
struct RunOutput {
  std::vector<float> y, dx, grads, buffers;  // grads: the whole slice, padding included
};

constexpr float kGradientSentinel = 1e3f;  // grads and dx start here: backward must overwrite

// The layer's kernel on one backend, with its tensors in that backend's memory.
class KernelRun {
 public:
  // math: the mode the kernel is planned in; its activations are in the backend's
  // activation_dtype(math) where the kernel takes low precision (as the executor binds them).
  KernelRun(Backend& backend, const CaseData& data, MathMode math = MathMode::strict_fp32);
  ~KernelRun();
  KernelRun(const KernelRun&) = delete;
  KernelRun& operator=(const KernelRun&) = delete;

  // Uploads the case's data (grads and dx filled with the sentinel), runs data.forwards forward
  // passes and one backward pass (dx null when !with_dx) and reads everything back.
  RunOutput run(bool with_dx);
  // After run(): one more forward on the tensors now in backend memory; sum(y * dy) in double.
  double objective();
  void set_input(size_t i, float v);
  void set_param(size_t i, float v);

 private:
  KernelBinding binding(bool with_dx) const;
  struct Tensors;
  Backend& be_;
  const CaseData& d_;
  DType act_ = DType::f32;  // the activations' dtype; the host side is always float
  std::unique_ptr<LayerKernel> kernel_;
  std::unique_ptr<Tensors> t_;
};

// Every check of the case on `backend`; with `cpu`, also the cross-backend check against it.
// A bf16 row runs run_low_precision_case instead.
void run_case(const Row& row, const Case& c, Backend& backend, Backend* cpu);
// The case in math bf16 against the same backend's f32 run (conformance_table.h); says SKIPPED
// where the backend cannot compute bf16.
void run_low_precision_case(const Row& row, const Case& c, Backend& backend);

// A row whose type has no kernel: no backend registers one, and the layer is a view.
void run_kernelless_row(const Row& row, const std::string& backend);

// One CPU backend for the whole process (deliberately never destroyed).
Backend& cpu_backend();

// Rel error ||a - ref|| / ||ref|| (||a|| when ref is all zeros), over the elements `at` (all if
// empty).
double rel_error(const std::vector<float>& a, const std::vector<float>& ref,
                 const std::vector<size_t>& at = {});
bool same_bits(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace trainer::conformance
