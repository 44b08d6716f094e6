// The conformance table (after ggml's test-backend-ops): one row per (layer type, dtype), each
// with a float64 reference and a grid of cases. tests/conformance/harness.h runs every case of a
// row on a backend through the same checks:
//   reference  forward (and running statistics) against the row's float64 reference:
//              |y - ref| <= 1e-4 (1 + |ref|) per element; buffers max(1e-6, 1e-5 |ref|)
//   gradients  backward against central finite differences of L = sum(y * dy), step h:
//              |analytic - numeric| <= 2e-3 + 2e-2 |numeric| for every input and parameter element
//   cross      (GPU binary) the backend against the CPU on the same data, per tensor
//              rel = ||a - cpu|| / ||cpu|| < bound (bound 0: bit-identical)
// A bf16 (fp16) row repeats its f32 row's cases as `math: bf16` (fp16) runs them (harness.h:
// run_low_precision_case): the kernel with bf16 arithmetic, and with bf16 activations where the
// backend stores them (Backend::activation_dtype) and the kernel takes them, against the same
// backend's f32 run on the same data (x and dy rounded to bf16 for both): rel error <
// kLowPrecisionBound (y, dx, buffers) and kLowPrecisionGradBound (parameter gradients); a kernel
// with parameters that stores bf16 must also differ from f32 (rel > 1e-5: bf16 really ran).
// and, on every case: backward without dx (a first layer) gives bit-identical parameter
// gradients, y and buffers; eval forward leaves the buffers untouched; parameter padding is never
// read (it holds NaN) nor written (it keeps its sentinel); gradients are overwritten, never added.
//
// Adding a layer type adds a row here (tests/test_conformance_coverage.cc fails until it has
// one); adding a dtype adds rows with that dtype. Types without a kernel (a view, a macro) have a
// row saying why.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lib/backend/layer_kernel.h"
#include "lib/core/shape.h"
#include "tests/conformance/reference.h"

namespace trainer::conformance {

// The element types of the kernel contract (DType, lib/backend/layer_kernel.h) that layers are
// tested in; each layer type needs a row per entry.
constexpr DType kDTypes[] = {DType::f32, DType::bf16, DType::f16};
// bf16 against f32 (bf16 keeps 8 significant bits: one rounding is at most 2^-9 = 2e-3 relative).
constexpr double kLowPrecisionBound = 1e-2, kLowPrecisionGradBound = 2e-2;
// fp16 against f32 (11 significant bits: one rounding at most 2^-12 = 2.4e-4 relative; the
// bounds are bf16's halved, not divided by 8, as the weights and every stored tensor round too).
constexpr double kF16Bound = 5e-3, kF16GradBound = 1e-2;

// Which checks a case runs (bits).
enum Check : unsigned {
  kReference = 1u,
  kGradients = 2u,
  kCross = 4u,
  kAll = kReference | kGradients | kCross,
};

// How a case's input x is drawn (all from the case's seed).
struct Inputs {
  enum class Kind {
    grid,      // a shuffled grid of distinct values in (-1, 1), spaced 2/n: no max-pool ties, no
               // relu input within h of its kink (the finite-difference cases)
    uniform,   // U(lo, hi)
    integers,  // floor(U(lo, hi)): ties in most pooling windows
    tokens,    // token ids in [0, vocab): a share `lo` of them 0 (padding), the rest uniform
  };
  Kind kind = Kind::grid;
  double lo = -1, hi = 1;
  int64_t vocab = 0;
  static Inputs grid() { return {}; }
  static Inputs uniform(double lo, double hi) { return {Kind::uniform, lo, hi, 0}; }
  static Inputs integers(double lo, double hi) { return {Kind::integers, lo, hi, 0}; }
  static Inputs tokens(int64_t vocab, double padding_share = 0) {
    return {Kind::tokens, padding_share, 0, vocab};
  }
};

// Per-tensor bounds of the cross-backend check (rel error; 0: bit-identical).
struct CrossBounds {
  double y = 1e-5, dx = 1e-5, grads = 1e-5, buffers = 1e-5;
};

struct Case {
  std::string yaml;  // the layer, as in a config: "{type: conv2d, filters: 3, kernel_size: 3}"
  Shape input;       // per sample
  // Layers of several inputs (add, concat): the inputs after the first, per sample. The host x
  // (and dx) holds every input's batch one after another: input 1's, then input 2's, ...
  std::vector<Shape> more_inputs;
  int64_t batch = 1;
  uint64_t seed = 1;
  unsigned checks = kAll;
  float h = 1e-2f;  // finite-difference step (1e-3 at kinks: relu, max pooling)
  Inputs inputs;
  bool training = true;
  int forwards = 1;  // forward passes before backward (running statistics move each time)
  std::vector<std::pair<size_t, float>> set_inputs;  // x[i] = v after drawing
  std::string expect_warning;                        // a warning this case must log ("" = none may be logged)
  bool exact_cross = false;                          // cross-backend y and dx bit-identical (max-pool ties)
  std::string note;                                  // why the case exists, shown on failure
  std::map<std::string, double> first_layer_margin;  // overrides the row's (Row::first_layer_margin)
  // The kernel runs a relu after the layer (KernelContext::fused_relu; backends registered with
  // kFusesRelu): y and the reference are relu'd, the gradients are those of the pair.
  bool fused_relu = false;
  // dx is 0 in real arithmetic and the kernels return rounding noise (layer_norm over one feature:
  // every term cancels): the 16-bit rows check |dx| <= the 16-bit bound x max |dy|, not that the
  // noise matches the f32 run's relatively.
  bool dx_noise = false;
  // Inputs after the first that are not differentiable (a recurrent layer's token ids, which mask
  // the padding): how each is drawn (one per entry of more_inputs; empty: every input as the
  // first). Their dx must be exactly 0, and finite differences skip them.
  std::vector<Inputs> constant_inputs;
  // The bf16 and fp16 runs' bound on y, as a multiple of kLowPrecisionBound (kF16Bound): above 1
  // where the kernel rounds an intermediate twice by design (rotary attention rounds q and k as
  // the projection writes them and again when it turns them, as rotating bf16 tensors does).
  double low_precision_y_scale = 1.0;
};

struct Row;
struct CaseData;
struct RunOutput;
// Row-specific properties checked after each run, on every backend (e.g. dropout2d drops whole
// channels). Null: none.
using PropertyCheck = void (*)(const Row& row, const Case& c, const CaseData& data, const RunOutput& out);

struct Row {
  std::string type;
  DType dtype = DType::f32;
  ReferenceForward reference = nullptr;  // null: the type runs no kernel (see no_kernel)
  std::string no_kernel;                 // why there is no kernel: a view, a macro
  bool input_differentiable = true;      // false (token ids): dx must be exactly 0
  CrossBounds cross;
  // Backends whose parameter gradients without dx may differ from those with dx (a first layer
  // takes another path), by at most margin * max(1, |g|) per element; every other backend:
  // bit-identical.
  std::map<std::string, double> first_layer_margin;
  // The bf16 and fp16 rows' bound on dx, as a multiple of kLowPrecisionBound (kF16Bound): above 1
  // only where the gradient is a sum whose terms cancel by construction, so that their 16-bit
  // roundings no longer do (attention: dq and dk sum dS over the keys, and each row of dS sums to 0).
  double low_precision_dx_scale = 1.0;
  PropertyCheck property = nullptr;
  std::vector<Case> cases;
};

// Every row, in a fixed order.
const std::vector<Row>& conformance_table();

}  // namespace trainer::conformance
