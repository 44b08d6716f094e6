// LayerKernel: how one layer runs on one backend for one batch size.
//
// Kernels are created once per (layer, batch size) before training: that is where oneDNN
// primitives, cuDNN descriptors and algorithm choices are made. The step itself only executes.
// Lifecycle:
//   create (plans, no memory) -> workspace_bytes(), output_layout() -> bind(KernelBinding)
//   -> forward(training) / backward() ...
//
// Design: a kernel receives every tensor it touches once, in bind(), as typed views
// (TensorView: pointer, shape, dtype, layout) taken from the model's tensor slots; forward() and
// backward() take no pointers. Every arena (parameters, gradients, optimizer state, buffers,
// activations, workspaces) is sized and placed before the first step and never moves, so binding
// once is exact, and it is what a captured step (CUDA graph) replays anyway. The executor is the
// only place that computes where a tensor lives (lib/model/arena_layout.h): a kernel never
// computes an arena offset, it reads its views (params[1] is the bias, wherever it is).
// Views carry their dtype; the typed accessors (view.f32()) throw on a mismatch, so a kernel
// written for f32 cannot silently read bf16. A layer may have several inputs (inputs[i]).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lib/core/error.h"
#include "lib/core/optimizer_formulas.h"
#include "lib/core/shape.h"

namespace trainer {

class Backend;
class Communicator;
class DeviceCollective;
class Layer;

// Per-step scalars that live in backend memory, so a captured step (CUDA graph) can replay with
// new values: the host (or a device kernel) updates them before each step.
struct StepScalars {
  float lr = 0.f;
  // The optimizer's own per-step scalars, written by its rule's prepare() on the host
  // (lib/core/optimizer_formulas.h): the Adam family's bias corrections 1 - beta^t in [0] and [1],
  // Nadam's momentum schedule in [2..4]. Checkpoints keep them (Nadam's product runs on).
  float optim[kOptimizerScalars] = {0.f, 0.f, 0.f, 0.f, 0.f};
  uint64_t step = 0;  // global step counter, 0-based; seeds dropout masks
  uint64_t seed = 0;
  // Written on the device during a training step (the non-finite guard, lib/backend/backend.h); the
  // host's copy of these scalars before each step resets them to zero.
  uint32_t nonfinite = 0;  // NonfiniteBits found so far in this step
  float batch_loss = 0.f;  // this step's summed loss, added to the epoch's sum if finite
  // Data parallel on the device (DeviceCollective): this replica's shard rows / the global batch's
  // rows, the factor its gradients get in the all-reduce; set by the host before each step.
  float shard_weight = 1.f;
};

// strict_fp32: IEEE fp32 arithmetic. tf32: GPU tensor cores read fp32 operands as TF32. bf16: the
// matrix arithmetic (convolutions, dense) reads bf16 operands and accumulates in fp32; weights and
// optimizer state stay fp32. Where the tensors between layers are stored is the backend's choice
// (Backend::activation_dtype): the GPU stores them and their gradients in bf16 (half the memory
// traffic), the CPU keeps them fp32 and converts at each kernel's edge (AVX-512 BF16 / AMX).
// fp16: as bf16 with fp16 operands and activations, which have 3 more bits of mantissa but
// fp32's range cut to 6e-5..65504, so training scales the loss (train.loss_scale, dynamic by
// default) to keep small gradients from flushing to zero.
enum class MathMode { strict_fp32, tf32, bf16, fp16 };

// "fp32", "tf32", "bf16", "fp16": the config's and --math's names.
inline const char* math_name(MathMode m) {
  switch (m) {
    case MathMode::tf32:
      return "tf32";
    case MathMode::bf16:
      return "bf16";
    case MathMode::fp16:
      return "fp16";
    default:
      return "fp32";
  }
}
// math_name's names: what the config's `math` and --math accept.
inline std::vector<std::string> math_names() { return {"fp32", "tf32", "bf16", "fp16"}; }
// The inverse of math_name for its four names (anything else: strict fp32).
inline MathMode parse_math(const std::string& name) {
  return name == "tf32"   ? MathMode::tf32
         : name == "bf16" ? MathMode::bf16
         : name == "fp16" ? MathMode::fp16
                          : MathMode::strict_fp32;
}
// The math modes that store activations in 16 bits.
inline bool low_precision(MathMode m) { return m == MathMode::bf16 || m == MathMode::fp16; }

// How a tensor between two layers is laid out when it is not plain row-major (oneDNN's blocked
// nChw16c...). Opaque to lib: only the backend that made it looks inside (the CPU backend's
// DnnlLayout, kernels/cpu/dnnl_edge.h, holds a dnnl::memory::desc). A kernel makes its output's
// layout once, when it is created; the next kernel may keep the handle.
struct Layout {
  virtual ~Layout() = default;
};

// Element types of tensors. Parameters, gradients, optimizer state and buffers are always f32;
// activations and their gradients may be bf16 (KernelContext::act_dtype).
enum class DType : uint8_t { f32, bf16, f16 };
inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "fp32";
    case DType::bf16:
      return "bf16";
    case DType::f16:
      return "fp16";
  }
  return "?";
}
inline size_t dtype_bytes(DType t) { return t == DType::f32 ? 4 : 2; }

// One tensor in backend memory, as a kernel sees it. data may be null (an input gradient nobody
// wants, for the first layer). shape: the logical dims, batch first for activations.
struct TensorView {
  void* data = nullptr;
  Shape shape;
  DType dtype = DType::f32;
  std::shared_ptr<const Layout> layout;  // null: plain row-major

  bool empty() const { return data == nullptr; }
  // The data, checked to be of dtype t (kernels written for several dtypes); throws InternalError
  // on a mismatch (null data stays null).
  void* as(DType t) const {
    if (dtype != t)
      throw InternalError(std::string("a kernel read a ") + dtype_name(dtype) + " tensor " + shape.str() +
                          " as " + dtype_name(t));
    return data;
  }
  // The data as floats; throws InternalError unless dtype is f32 (null data stays null).
  float* f32() const {
    if (dtype != DType::f32)
      throw InternalError(std::string("a kernel read a ") + dtype_name(dtype) + " tensor " + shape.str() +
                          " as f32");
    return static_cast<float*>(data);
  }
};

// Every tensor one kernel touches, for bind().
struct KernelBinding {
  std::vector<TensorView> params, grads;  // one per ParamSpec of the layer, in declaration order
  // A 16-bit copy of each parameter (bf16 or fp16, the step's low-precision dtype), refreshed by
  // the executor after every change of the f32 parameters (each update, each upload), for kernels
  // that want_low_precision_params(): they read it instead of converting the weights themselves.
  // Empty, or data null, where there is none.
  std::vector<TensorView> params_low;
  // optimizer_state[slot][k]: the optimizer's state slot (momentum, moments...) of params[k],
  // for kernels that fuse the update; laid out like params.
  std::vector<std::vector<TensorView>> optimizer_state;
  std::vector<TensorView> buffers;      // one per BufferSpec (running statistics)
  std::vector<TensorView> inputs;       // one per input of the layer (add, concat: several)
  std::vector<TensorView> input_grads;  // one per input; data null where no gradient is wanted
  // Per input: 1 = add into input_grads[i] instead of overwriting it (the tensor has several
  // consumers and another one wrote first). Only set where accumulates_input_grads(); empty: none.
  std::vector<uint8_t> accumulate_input_grads;
  // Add into `grads` instead of overwriting them: a tied tensor (Model::params()) whose gradient a
  // later layer's backward wrote first. Only set where accumulates_param_grads().
  bool accumulate_param_grads = false;
  TensorView output, output_grad;  // output_grad has the output's shape and layout
  void* workspace = nullptr;       // workspace_bytes() of backend memory
  size_t workspace_bytes = 0;
  void* kept_workspace = nullptr;  // kept_workspace_bytes() of backend memory (null when 0)
  // KernelContext::takes_bias: the bias of the layer before, and its gradient (f32, channels).
  TensorView taken_bias, taken_bias_grad;

  const TensorView& input(size_t i = 0) const { return at(inputs, i, "input"); }
  const TensorView& input_grad(size_t i = 0) const { return at(input_grads, i, "input gradient"); }
  const TensorView& param(size_t i) const { return at(params, i, "parameter"); }
  // params_low[i]'s data if it exists in dtype t, else null (the kernel converts params[i]).
  const void* param_low(size_t i, DType t) const {
    return i < params_low.size() && params_low[i].dtype == t ? params_low[i].data : nullptr;
  }
  const TensorView& grad(size_t i) const { return at(grads, i, "parameter gradient"); }
  const TensorView& buffer(size_t i) const { return at(buffers, i, "buffer"); }

 private:
  static const TensorView& at(const std::vector<TensorView>& v, size_t i, const char* what) {
    if (i >= v.size())
      throw InternalError(std::string("a kernel asked for ") + what + " " + std::to_string(i) + " of " +
                          std::to_string(v.size()));
    return v[i];
  }
};

// The f32 pointers of a single-input layer's activations, as most kernels keep them after bind.
struct BoundActivations {
  float* x = nullptr;   // (batch, in...)
  float* dx = nullptr;  // null: the input's gradient is not wanted (first layer)
  float* y = nullptr;   // (batch, out...)
  float* dy = nullptr;
  BoundActivations() = default;
  explicit BoundActivations(const KernelBinding& b)
      : x(b.input().f32()), dx(b.input_grad().f32()), y(b.output.f32()), dy(b.output_grad.f32()) {}
};

// A single-input layer's activations in the kernel's activation dtype (KernelContext::act_dtype),
// for kernels written for several dtypes; bind checks every view's dtype.
struct TypedActivations {
  DType dtype = DType::f32;
  const void* x = nullptr;  // (batch, in...)
  void* dx = nullptr;       // null: the input's gradient is not wanted (first layer)
  void* y = nullptr;        // (batch, out...)
  const void* dy = nullptr;
  TypedActivations() = default;
  TypedActivations(const KernelBinding& b, DType t)
      : dtype(t), x(b.input().as(t)), dx(b.input_grad().as(t)), y(b.output.as(t)), dy(b.output_grad.as(t)) {}
};

// The f32 pointers of a several-input layer (add, concat) after bind, and per input whether its
// gradient is to be added into (KernelBinding::accumulate_input_grads) rather than written.
struct BoundInputs {
  std::vector<const float*> x;  // (batch, in_k...) per input
  std::vector<float*> dx;       // null where the input's gradient is not wanted
  std::vector<bool> accumulate;
  float* y = nullptr;  // (batch, out...)
  float* dy = nullptr;
  BoundInputs() = default;
  explicit BoundInputs(const KernelBinding& b) : y(b.output.f32()), dy(b.output_grad.f32()) {
    for (size_t k = 0; k < b.inputs.size(); ++k) {
      x.push_back(b.input(k).f32());
      dx.push_back(b.input_grad(k).f32());
      accumulate.push_back(k < b.accumulate_input_grads.size() && b.accumulate_input_grads[k]);
    }
  }
};

// A fused gelu's backward taken over by the one layer that reads the gelu's output
// (KernelContext::gelu_to_next, gelu_from_input): the producer's bind publishes its
// pre-activation; the consumer's bind, where its dx product can multiply by gelu' there (in
// cuBLASLt's DGELU epilogue), says so, and then writes the gradient at the pre-activation into the
// producer's output gradient: the producer's backward skips its own pass over the gelu.
struct GeluHandoff {
  const void* pre = nullptr;  // the producer's pre-activation (rows, ld), in the activation dtype
  int64_t ld = 0;
  bool taken = false;  // set by the consumer's bind
};

// A two-input add's forward taken over by the layer right after it, which reads the sum alone as
// its one input (KernelContext::add_to_next, add_from_input): the add's bind publishes its inputs
// and its output; the consumer's bind, where its input is that output, says it computes the sum
// itself (a layer norm reads a and b once, writes the sum beside its own output: GPT-2's residual
// stream, llm.c's fused residual forward), and the add's forward then does nothing. Backward is
// unchanged: the consumer reads the sum as its input, the add passes gradients on.
struct AddHandoff {
  const void* a = nullptr;  // the add's inputs and output, in its activation dtype, plain layout
  const void* b = nullptr;
  void* sum = nullptr;
  int64_t n = 0;       // elements
  bool ok = false;     // the add can hand over (two inputs, no layout changes)
  bool taken = false;  // set by the consumer's bind
};

// A batchnorm's normalize pass (with its fused relu) taken over by the pooling layer that alone
// reads its output (KernelContext::normalize_to_next, normalize_from_input): the batchnorm's bind
// publishes its input, the statistics and parameters its normalize reads and its output's memory;
// the pooling's bind, where its input is that memory and its kernel can apply them as it reads
// (VGG's conv -> batchnorm -> relu -> 2x2 max pool), says so, and then pools relu(bn(x)) straight
// from x: the batchnorm's output is never written, nor read back. Backward is unchanged: the
// batchnorm's recomputes from x what it needs (its relu's mask too), the pooling's reads its
// argmax; the batchnorm's output gradient is the pooling's input gradient as before.
struct NormalizeHandoff {
  const void* x = nullptr;  // the batchnorm's input and output, in its activation dtype
  const void* y = nullptr;
  const float *mean = nullptr, *inv = nullptr, *gamma = nullptr, *beta = nullptr;  // (C) f32
  bool relu = false;   // the batchnorm's fused relu
  bool ok = false;     // the batchnorm can hand over (channels-last packs, no output edge)
  bool taken = false;  // set by the consumer's bind
};

// A parameter whose 16-bit copy (KernelBinding::params_low) is laid out other than the f32
// tensor: a convolution's filter (K, C, R, S) kept as (K, R, S, C), channels innermost, the layout
// cuDNN's channels-last kernels read (LayerKernel::low_param_krsc). offset: the tensor's first
// float in the parameter arena (the executor fills it in).
struct LowFilterLayout {
  int64_t offset = 0, k = 0, c = 0, r = 0, s = 0;
};

struct KernelContext {
  Backend* backend = nullptr;
  int64_t batch = 0;
  const StepScalars* scalars = nullptr;  // backend memory
  int layer_index = 0;                   // distinguishes dropout streams
  MathMode math = MathMode::strict_fp32;
  // The dtype of every activation view the kernel is bound to: its inputs, their gradients, its
  // output and the output's gradient. Not f32 only for layer types registered with
  // kLowPrecisionActivations, in a math mode whose Backend::activation_dtype is not f32; the
  // executor converts at the edges to and from kernels that keep f32.
  DType act_dtype = DType::f32;
  bool deterministic = false;
  // The kernel may time candidate algorithms for its shape (cuDNN's, our tilings, fused graphs):
  // true for the plan's largest batch size, the one nearly every step runs. The other sizes (an
  // epoch's last partial batch, the validation set's remainder) run once an epoch and take the
  // libraries' heuristic choices: timing them cost a cold start as much as the main size did.
  bool measure = true;
  // The executor keeps a 16-bit copy of the parameters for the kernels that want one
  // (LayerKernel::wants_low_precision_params; ExecutorOptions::low_precision_params in a 16-bit
  // math): a kernel that will want it can plan without room for converting its own weights.
  bool low_precision_params = false;
  // Layouts between layers. input_layouts: the layout the computing layer before chose for each
  // input of this layer (and for the gradient of that input); null = plain row-major.
  // input_layout: the first input's. output_layout_free: the consumers of this layer's output
  // accept any layout, so the kernel may keep its preferred one (and report it through
  // output_layout()); false = the output and its gradient must be plain.
  std::vector<std::shared_ptr<const Layout>> input_layouts;
  std::shared_ptr<const Layout> input_layout;
  bool output_layout_free = false;
  // Synchronized batch statistics (device.sync_batchnorm; lib/core/batchnorm_sync_formula.h): a
  // kernel that normalizes by batch statistics (batchnorm) sums them over every data-parallel
  // replica in training, through the replicas' device collective on the backend's stream (GPU
  // backends) or their host Communicator (backends with host memory: CPU ranks). Both null: each
  // replica normalizes by its own rows. Owned by the executor's caller; outlive the kernel.
  DeviceCollective* stats_collective = nullptr;
  Communicator* stats_comm = nullptr;
  // The layer's output goes to a relu layer alone, and that relu runs inside this kernel (only
  // kernels registered with kFusesRelu): forward writes z = relu(y) as the output, and backward
  // reads the output's gradient as the relu's, dz, and takes dy = z > 0 ? dz : 0 * dz (the relu
  // kernels' exact rule) from the stored z. The relu layer gets no kernel; its output and its
  // gradient are this kernel's (the executor aliases them, as for a view). backward() may then
  // overwrite the output's gradient with dy (the CPU's does): nothing reads dz after it.
  bool fused_relu = false;
  // The same for a gelu in its tanh form (only kernels registered with kFusesGeluTanh): forward
  // writes z = gelu(y), backward reads dz and may overwrite it.
  bool fused_gelu = false;
  // With fused_gelu: the handoff of the gelu's backward to the layer after it, or null. And in
  // that layer's context (only kernels registered with kTakesGeluGrad): the same handoff.
  std::shared_ptr<GeluHandoff> gelu_to_next, gelu_from_input;
  // The handoff of a two-input add's forward to the layer after it (add_to_next, in the add's
  // context: only kernels registered with kHandsOverForward) and, in that layer's context
  // (kTakesAddForward), the same handoff (add_from_input).
  std::shared_ptr<AddHandoff> add_to_next, add_from_input;
  // The handoff of a batchnorm's normalize pass to the pooling layer that alone reads its output
  // (normalize_to_next, in the batchnorm's context: kernels registered with kHandsOverNormalize)
  // and, in that layer's context (kTakesNormalize), the same handoff (normalize_from_input).
  std::shared_ptr<NormalizeHandoff> normalize_to_next, normalize_from_input;
  // The output goes to the loss alone, which reads its rows (and writes their gradient) at any
  // pitch (LossKernel::takes_pitch): the kernel may pad its rows (LayerKernel::output_pitch).
  bool output_pitch_ok = false;
  // Bias folding (only kernels registered with kBiasToBatchnorm / kTakesBias). bias_to_batchnorm:
  // the layer's output goes to a batchnorm alone, which takes the bias: the kernel
  // neither adds it nor writes its gradient. takes_bias: this batchnorm's input lacks the bias of
  // the layer before it (KernelBinding::taken_bias): batchnorm(x + b) = batchnorm(x) with batch
  // statistics, so only the running mean (mean + b), the eval normalization (running mean - b)
  // and the bias's gradient involve b; the kernel writes that gradient.
  bool bias_to_batchnorm = false;
  bool takes_bias = false;
};

class LayerKernel {
 public:
  virtual ~LayerKernel() = default;
  // Bytes of backend memory this kernel keeps between forward and backward (pooling indices,
  // dropout masks) plus library scratch (cuDNN workspace). Aligned slices of one arena.
  virtual size_t workspace_bytes() const { return 0; }
  // True when nothing in the workspace is needed after the forward or backward call that wrote
  // it (library scratch, padded copies rebuilt each call): such workspaces share one region of
  // the arena, the largest of them, since the layers of a step run one after another on one
  // stream. False (the default): the workspace is the kernel's own for the whole step.
  virtual bool workspace_is_transient() const { return false; }
  // Bytes of backend memory that a kernel with a transient workspace still keeps from its
  // forward to its backward (the kernel's own for the whole step, KernelBinding::kept_workspace):
  // e.g. a low-precision convolution's weights, converted once by forward and read again by the
  // input gradient. A backward always follows a forward of the same plan in the same step.
  virtual size_t kept_workspace_bytes() const { return 0; }
  // The layout of y and dy when not plain (see KernelContext::output_layout_free); null = plain.
  virtual std::shared_ptr<const Layout> output_layout() const { return nullptr; }
  // Bytes of y (and of dy) in that layout (blocked layouts may pad channels); 0 = plain size,
  // batch * output numel floats.
  virtual size_t output_bytes() const { return 0; }
  // Elements from one row of y (and dy) to the next where the kernel pads its rows
  // (KernelContext::output_pitch_ok; output_bytes() then covers the padded rows); 0: packed.
  virtual int64_t output_pitch() const { return 0; }
  // Hands the kernel its tensors (see the design note above). May be called again with other
  // tensors (tests rebind with and without an input gradient); steps use the latest binding.
  virtual void bind(const KernelBinding& b) = 0;
  // output = f(inputs). training: dropout masks, batch statistics.
  virtual void forward(bool training) = 0;
  // True when backward() can add into an input gradient (KernelBinding::accumulate_input_grads);
  // otherwise the executor gives the kernel a scratch gradient and adds it with
  // Backend::accumulate (one more pass).
  virtual bool accumulates_input_grads() const { return false; }
  // True when forward may write its output over input k's memory and backward then reads neither
  // x_k (its memory holds y) nor needs it kept: the executor gives y x_k's memory where x_k's
  // producer alone writes it, this kernel alone reads it, in the same dtype and layout, and the
  // producer's backward does not read its output (backward_reads_output). A residual add over a
  // batchnorm's output and a relu over the add's: PyTorch's in-place ops, ResNet-18 at batch 128
  // in bf16 kept 6 tensors a block where PyTorch keeps 4.
  virtual bool may_overwrite_input(size_t /*k*/) const { return false; }
  // True when the kernel reads the 16-bit copy of its parameters (KernelBinding::params_low) where
  // the executor keeps one; the executor keeps one when some kernel wants it.
  virtual bool wants_low_precision_params() const { return false; }
  // With wants_low_precision_params: true, with the filter's dims (K, C, R, S) in *f, when
  // parameter i's copy must be laid out (K, R, S, C) (the optimizer's step writes it so, and the
  // executor's refresh relayouts it); false: laid out as the f32 tensor.
  virtual bool low_param_krsc(size_t /*i*/, LowFilterLayout* /*f*/) const { return false; }
  // False when backward reads no y (only inputs, dy and its own workspaces): then a consumer that
  // may_overwrite_input can take y's memory. True (the default) when it reads y or may.
  virtual bool backward_reads_output() const { return true; }
  // True when backward() can add into its parameter gradients (KernelBinding::
  // accumulate_param_grads): what a layer whose weight another layer shares (tie_to) needs.
  virtual bool accumulates_param_grads() const { return false; }
  // From output_grad (and the tensors of the last forward): writes input_grads (where wanted,
  // adding where accumulate_input_grads says so) and overwrites (never accumulates) the parameter
  // gradients.
  virtual void backward() = 0;
  // A training step in which this replica has no rows (an empty shard of a data-parallel batch):
  // a kernel that takes part in collectives in forward(true) and backward()
  // (KernelContext::stats_collective / stats_comm) makes the same calls with zero contributions,
  // since the other replicas wait for them, and updates what must stay identical on every
  // replica (running statistics); it reads no activations and writes no gradients. The executor
  // calls forward_no_rows() in the layers' forward order and backward_no_rows() in backward
  // order, as a step with rows would. Kernels without collectives: nothing to do.
  virtual void forward_no_rows() {}
  virtual void backward_no_rows() {}
};

}  // namespace trainer
