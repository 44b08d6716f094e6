// Executor: a Model made runnable on one Backend.
//
// Everything is planned and allocated in the constructor, before the first step:
//   - one arena: parameters | gradients | optimizer state slots (each laid out like the
//     parameters, so it can be all-reduced or updated as one flat vector);
//   - one activation arena sized for the largest batch: input, every layer's output and its
//     gradient (in the layer's activation dtype: bf16 where the backend stores low precision and
//     the kernel takes it), the dtype conversions at the edges between kernels of different
//     dtypes, kernel workspaces, labels;
//   - kernels (oneDNN primitives, cuDNN descriptors and algorithms) for each batch size the run
//     will see (full and tail batches of train and eval).
// A step then only launches work on the backend's stream: no allocation, no plan creation, and
// no host synchronization until metrics are read.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "lib/backend/backend.h"
#include "lib/backend/loss_kernel.h"
#include "lib/backend/step_kernels.h"
#include "lib/dist/communicator.h"
#include "lib/losses/losses.h"
#include "lib/model/gradient_buckets.h"
#include "lib/model/model.h"
#include "lib/model/step_runner.h"
#include "lib/optim/optimizer.h"

namespace trainer {

struct ExecutorOptions {
  std::vector<int64_t> batch_sizes;  // every batch size a step may use
  int64_t num_classes = 0;
  // The loss (lib/losses): the step runs the registry's kernel for it on this backend, over
  // num_classes (= the model's outputs) values a sample. A loss on float targets takes that many
  // targets a sample, and its metric sums take the confusion matrix's place
  // (MetricSums::confusion).
  LossConfig loss = loss_config("nll");
  std::vector<int64_t> top_k;  // top-k accuracies to accumulate (class indices; before the confusion matrix)
  MathMode math = MathMode::strict_fp32;
  // Under a 16-bit math: a layer that computes in 16 bits by itself (convolution, dense; not the
  // followers) does so only when its forward at the largest batch size is at least this many
  // FLOPs, else it stays f32 (config low_precision_min_mflops). Below some size tensor cores
  // save less than the conversions at the layer's edges cost, and our f32 kernels for small
  // layers beat cuDNN's 16-bit ones. 0: every such layer in 16 bits (the tests).
  double low_precision_min_flops = 0;
  bool deterministic = false;
  uint64_t seed = 0;
  // Record each step once as a CUDA graph and replay it (backends with capture only).
  bool use_graphs = true;
  // Every tensor between layers in plain layout (no backend-preferred layouts): for tests.
  bool plain_layouts = false;
  // A convolution's or dense layer's bias whose output goes to a batchnorm alone is taken by the
  // batchnorm (backends that register it: KernelContext::takes_bias); false: for tests.
  bool fold_bias = true;
  // A 16-bit copy of the parameters, refreshed after each update, for the kernels that want one
  // (LayerKernel::wants_low_precision_params) in bf16 or fp16 math; false: each converts its own
  // weights every step (for tests).
  bool low_precision_params = true;
  // > 0: scale the gradients to this global L2 norm before each update, on the device.
  float clip_grad_norm = 0.f;
  // Random crop / flip of training batches (data.augment), on the device at the start of each
  // training step; inactive by default. Evaluation and prediction never augment.
  AugmentSpec augment;
  // Data parallelism: this process (or thread) is one rank of `comm` (null or one rank: a single
  // process). Each train_step trains on this rank's shard of a global batch; its gradients,
  // weighted by shard rows / global rows, are summed over the ranks before the update, so every
  // rank applies the same update. Without `collective` the sum is the host Communicator's, on
  // host memory (a backend with host_memory() only: CPU ranks).
  Communicator* comm = nullptr;
  // The device collective of the same ranks (NCCL on GPUs; lib/backend/device_collective.h): the
  // weighting, the gradient sum and the OR of the non-finite flags are enqueued on the backend's
  // stream (the gradient buckets on the collective's side stream, forked from it and joined back
  // before the update), without a host wait, and stay inside the step's CUDA graph. Also with one rank (the
  // degenerate case the GPU tests check). Owned by the caller; outlives the executor.
  DeviceCollective* collective = nullptr;
  // With `collective`: the gradient arena is all-reduced in buckets of at most this many bytes
  // (device.bucket_mb; lib/model/gradient_buckets.h), each launched as soon as the backward pass
  // has written its gradients, beside the rest of the backward pass. 0, or a plan of one bucket:
  // one all-reduce of the whole arena after the backward pass.
  size_t bucket_bytes = 0;
  // With `collective`: the dtype the gradients are summed in (DeviceCollective::compress_sums;
  // device.gradient_compression); f32: as they are.
  DType gradient_compression = DType::f32;
  // Synchronized batchnorm (device.sync_batchnorm): in training, batchnorm kernels normalize by the
  // statistics of every rank's rows, summed through `collective` (on the device) or, without one,
  // `comm` (host memory); see lib/core/batchnorm_sync_formula.h. Needs one of them (with one rank
  // it computes what the unsynchronized kernels compute); not for pipeline stages.
  bool sync_batchnorm = false;
  // Loss scaling (lib/backend/backend.h, LossScaleState): the loss's gradient is multiplied by
  // the scale before the backward pass and the parameter gradients by its inverse after it; a step
  // whose gradients overflow is skipped. Off by default; the session turns it on under math fp16.
  bool loss_scaling = false;
  float loss_scale_init = 65536.f;
  LossScaleHyper loss_scale;
  // Model parallelism (lib/model/pipeline.h): this executor runs one stage of a model.
  //   input_gradient: the gradient of the stage's input is computed (a stage after the first);
  //   output_gradient_given: no loss; the gradient of the output comes from the next stage;
  //   first_layer: the stage's first layer in the whole model (dropout streams stay the same);
  //   activation_slots: copies of the activation arena, one per micro-batch in flight, each with
  //     its own kernels for every batch size; with several, each layer's backward writes its
  //     parameter gradients into a scratch the size of the largest layer's, added into the
  //     gradient arena right after (the step's first micro-batch copies), so the micro-batches
  //     sum there without a second gradient arena.
  bool input_gradient = false;
  bool output_gradient_given = false;
  int first_layer = 0;
  int activation_slots = 1;
  //   clip_stages: with clip_grad_norm, the norm is of the gradients of this many stages: the
  //     pipeline calls stage_clip_partials and stage_clip before stage_update, which then does
  //     not clip by this stage's norm alone.
  int clip_stages = 0;
};

// One line of the memory plan, for reports and the out-of-memory message.
struct MemoryItem {
  std::string what;
  size_t bytes;
};

class Executor : public StepRunner {
 public:
  Executor(const Model& model, Backend& backend, const Optimizer& optimizer, ExecutorOptions opt);
  ~Executor() override;
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Host <-> backend copies of the parameter and buffer arenas (checkpoints, init).
  void upload_params(const float* params, const float* buffers) override;
  void download_params(float* params, float* buffers) override;
  // The buffer arena alone (batchnorm running statistics), buffer_arena_floats() floats.
  void upload_buffers(const float* buffers) override;
  void download_buffers(float* buffers) override;
  // Optimizer state as n_state * param_arena_floats floats.
  int64_t optimizer_state_floats() const override;
  void upload_optimizer_state(const float* state) override;
  void download_optimizer_state(float* state) override;

  // x: (batch, input...) host floats, y: (batch) labels. lr and the update counter t (1-based)
  // feed the optimizer's per-step scalars. Data parallel: `batch` is this rank's shard (0 for an
  // empty one: the rank adds zero gradients and still updates) of a batch of `global_batch` rows.
  void train_step(int64_t batch, const float* x, const void* y, int64_t t, float lr,
                  int64_t global_batch = 0) override;
  // batch 0 (an empty shard) accumulates nothing.
  void eval_step(int64_t batch, const float* x, const void* y) override;
  // Forward only, copies the model output (batch, out...) to host memory.
  void predict(int64_t batch, const float* x, float* out) override;

  void reset_metrics() override;
  MetricSums read_metrics() override;  // synchronizes
  // Continues accumulating from saved sums (a resumed epoch): the device sums then go on exactly
  // as if the run had never stopped, float for float.
  void restore_metrics(const MetricSums& m) override;

  const std::vector<MemoryItem>& memory_plan() const { return memory_plan_; }
  // Bytes of one sample's target in a batch: a class index, or num_classes float values.
  size_t target_row_bytes() const {
    return size_t(o_.loss.on_values() ? o_.num_classes : o_.loss.positions) * 4;
  }
  // The loss's inputs a sample: num_classes, times the positions of a loss over every position.
  int64_t loss_width() const { return o_.num_classes * (o_.loss.on_values() ? 1 : o_.loss.positions); }
  size_t planned_bytes() const override;
  // Whether training and evaluation steps fold the model's final softmax / log_softmax into the
  // loss (see Executor::choose_loss_on_logits), for every planned batch size.
  bool loss_on_logits() const;
  // The relu and gelu layers that run inside the kernel of the layer before them (KernelContext::
  // fused_relu, fused_gelu), in the plan of the first batch size.
  int fused_activations() const;
  // Biases taken by the batchnorm after them (KernelContext::takes_bias), in the same plan.
  int folded_biases() const;
  // Layers whose output took the memory of their input (LayerKernel::may_overwrite_input), in the
  // same plan.
  int outputs_in_place() const;
  // Inputs that share their add's output gradient instead of a copy (kCopiesOutputGradient), in
  // the same plan.
  int gradients_shared() const;
  // Adds whose forward the layer after them computes (AddHandoff::taken), in the same plan.
  int adds_handed_over() const;
  // Batchnorms whose normalize pass the pooling after them does (NormalizeHandoff::taken), in the
  // same plan.
  int normalizes_handed_over() const;
  // How many layers' kernels write their output in a backend layout (channels-last) rather than
  // plain, in the plan of the largest batch.
  int outputs_in_backend_layouts() const;
  // Called in train_step between the backward pass and the optimizer update with the gradient
  // arena (backend memory, param_arena_floats() floats, the Model's param offsets), for tests that
  // inspect gradients; it turns step capture off. Empty: not called.
  using GradientHook = std::function<void(float* grads)>;
  void set_gradient_hook(GradientHook hook) { grad_hook_ = std::move(hook); }
  // Gradient clipping since the executor was made (zeros without clip_grad_norm); synchronizes.
  ClipRecord read_clip_record() override;
  // Loss scaling's state (synchronizes); a default state when loss scaling is off.
  bool loss_scaling() const override { return scaler_ != nullptr; }
  LossScaleState read_loss_scale() override;
  // Puts a checkpoint's state back (a resumed run continues at its scale).
  void restore_loss_scale(const LossScaleState& st) override;
  // Host-side Nadam state etc. travels with checkpoints.
  StepScalars& host_scalars() override { return host_scalars_; }
  // The buckets the device all-reduce uses, in launch (backward) order; empty without a collective.
  const std::vector<GradientBucket>& gradient_buckets() const { return buckets_; }

  // Model parallelism: one stage's part of a step, driven by lib/model/pipeline.h. Each call only
  // enqueues work on this executor's backend; `slot` (< activation_slots) picks the micro-batch's
  // copy of the activations. Backend memory of slot's plan for `batch` rows, all f32 and plain:
  struct StageTensors {
    float* input = nullptr;        // (batch, input...): the previous stage's output is copied here
    float* input_grad = nullptr;   // its gradient (input_gradient only), copied back to that stage
    float* output = nullptr;       // (batch, output...)
    float* output_grad = nullptr;  // written by the next stage (output_gradient_given)
  };
  StageTensors stage_tensors(int64_t batch, int slot);
  // The first call of each training step: the step's scalars (lr, t) and the weight of each
  // micro-batch's loss (its rows / the batch's rows; a loss stage only) to the device.
  void stage_begin_step(int64_t t, float lr, const std::vector<float>& micro_weights);
  // Host rows into slot's input (x: the first stage) and labels (y: a loss stage); either may be null.
  void stage_upload(int64_t batch, int slot, const float* x, const void* y, bool training);
  // Forward of slot's micro-batch; a loss stage adds its loss and metrics (with_loss: false for
  // prediction).
  void stage_forward(int64_t batch, int slot, bool training, bool with_loss = true);
  // Backward of slot's micro-batch, number `index` of `count` in the step: its loss's gradient is
  // scaled by its weight (a loss stage), and its parameter gradients are summed with the others'.
  void stage_backward(int64_t batch, int slot, int index, int count);
  // The update after every micro-batch's backward (batch: the step's rows): clipping, the
  // non-finite guard, the optimizer, the metric commit.
  void stage_update(int64_t batch);
  // Gradient clipping over the stages (clip_stages): this stage's kClipPartials sums of squares
  // into group `stage` of stage_clip_partials_buffer() (clip_stages groups, backend memory),
  // where the pipeline gathers every stage's; then the gradients scaled by the norm of them all.
  void stage_clip_partials(int stage);
  double* stage_clip_partials_buffer() { return clip_partials_; }
  void stage_clip();
  // The step's non-finite flags (StepScalars::nonfinite, backend memory): the pipeline copies the
  // loss stage's into the others' before their updates, so every stage skips the same steps.
  uint32_t* stage_nonfinite_flags() { return &scalars_->nonfinite; }
  // Backend bytes of the parameter arenas (parameters, gradients, optimizer state, gradient sum)
  // and of the activation arena (every slot).
  size_t parameter_bytes() const { return parameter_bytes_; }
  size_t activation_bytes() const { return activation_bytes_; }
  // Where the planned memory goes (trainer bench --memory): every allocation by what it is for,
  // the activation arena split by what it holds (its largest plan), in bytes, largest first within
  // the arena.
  std::vector<std::pair<std::string, size_t>> memory_breakdown() const;

 private:
  struct Plan;
  // The plan of `batch` rows in activation slot `slot`.
  Plan& plan_for(int64_t batch, int slot = 0);
  // The activation arena plan p's offsets are into: its slot's.
  char* arena(const Plan& p) const;
  // Layer i's kernel in plan p (null for views).
  LayerKernel* kernel(const Plan& p, size_t i) const;
  // The batch (and with `scalars` the step's scalars) to the device (Backend::upload_inputs).
  void upload(Plan& p, int64_t batch, const float* x, const void* y, bool training = false,
              bool scalars = false);
  void enqueue_forward(Plan& p, bool training, bool with_loss);
  // first_micro_batch: with several activation slots, the step's first micro-batch (its parameter
  // gradients are copied into the arena; later ones add theirs).
  void enqueue_backward_and_update(Plan& p, bool update = true, bool first_micro_batch = true);
  // The step of an empty shard with synchronized batchnorm: every kernel's collectives with zero
  // contributions and the gradient buckets, in a step's order, then the update.
  void enqueue_no_rows_step();
  // Data parallel on the device: the step's loss flags ORed over the replicas, overlapped
  // (executor_update.cc); once a step.
  void reduce_loss_flags();
  bool loss_flags_reduced_ = false;
  // Pipeline stages (lib/model/executor_stage.cc): plan p's boundary tensors, and the gradient the
  // loss writes (the logits' where the loss folds the final softmax in).
  StageTensors stage_tensors_of(const Plan& p) const;
  float* loss_gradient(const Plan& p) const;
  // Gradient all-reduce (data parallel), clipping, the non-finite guard, the optimizer, the
  // metric commit: everything after the gradients of this rank's `batch` rows exist.
  // `buckets_launched`: the gradient buckets the backward pass already launched.
  void enqueue_update(int64_t batch, size_t buckets_launched = 0);
  void reduce_gradients(int64_t batch);
  void reduce_gradients_on_device(size_t buckets_launched);
  // Several buckets: the all-reduce of bucket k runs beside the backward pass.
  bool overlapped() const { return buckets_.size() > 1; }
  // Launches the buckets from *next on whose gradients are complete once layer `layer` ran its
  // backward (every bucket when layer is 0).
  void launch_ready_buckets(size_t layer, size_t* next);
  // This process is one of several ranks (ExecutorOptions::comm).
  bool data_parallel() const { return o_.comm && o_.comm->size() > 1; }
  // The gradients are summed on the host between the backward pass and the update (no capture).
  bool host_reduce() const { return data_parallel() && !o_.collective; }
  void check_collective() const;
  void run_captured(int& graph, int& eager_runs, const std::function<void()>& enqueue);
  // The pieces of a pipeline stage's step, each recorded per plan like a whole step: the forward
  // by 2 * training + with_loss (0-3), the backward by 4 + whether it scales the loss gradient by
  // the micro-batch's weight + 2 * whether it is the step's first (which copies its parameter
  // gradients into the arena instead of adding them) (4-7).
  static constexpr int kStagePieces = 8;
  void run_stage_captured(Plan& p, int piece, const std::function<void()>& enqueue);
  void* allocate(size_t bytes, const std::string& what);
  // The dtype of layer i's activations (KernelContext::act_dtype), its inputs arriving in these
  // dtypes.
  DType layer_dtype(size_t i, const std::vector<DType>& inputs) const;
  std::vector<DType> plan_dtypes() const;
  bool output_layout_free(size_t i, const std::vector<int>& next,
                          const std::vector<DType>& planned_dtype) const;
  bool too_small_for_low_precision(const Layer& l) const;
  size_t plan_gradients(Plan& p) const;
  // Several activation slots: p.grad_pieces and p.grad_at; returns the scratch floats they need.
  int64_t plan_gradient_pieces(Plan& p) const;
  // Several activation slots: layer i's gradient pieces from the scratch into the arena, added, or
  // copied when `first` (the step's first micro-batch).
  void gather_gradients(const Plan& p, size_t i, bool first);
  // The relu (gelu) layer that layer i's kernel, in activation dtype dt, runs itself (-1: none).
  int fusable_gelu(size_t i, DType dt) const;
  int fusable_relu(size_t i, DType dt) const;
  int overwritable_input(const Plan& p, size_t i, DType dt, const std::vector<size_t>& root,
                         const std::vector<size_t>& out_size, size_t out_bytes) const;
  int bias_taker(size_t i, DType dt) const;
  int sole_consumer(size_t i, const char* type, DType dt) const;
  int bias_slot(int layer) const;
  // Sets p.loss_on_logits and its tensors where the model ends in a softmax the loss can fold in.
  void choose_loss_on_logits(Plan& p);
  // Whether the model ends in a softmax before sparse_categorical_crossentropy on probabilities,
  // or a log_softmax before nll: the pairs that fold into cross_entropy on the logits.
  bool loss_foldable() const;
  // Views of layer i's tensors in plan p, for LayerKernel::bind.
  KernelBinding binding(const Plan& p, size_t i) const;

  const Model& model_;
  Backend& be_;
  const Optimizer& opt_;
  std::unique_ptr<OptimizerKernel> opt_step_;  // the optimizer's update on this backend
  ExecutorOptions o_;
  std::map<std::pair<int, int64_t>, std::unique_ptr<Plan>> plans_;  // by (activation slot, batch)
  std::vector<void*> allocations_;
  std::vector<MemoryItem> memory_plan_;
  int64_t n_param_floats_ = 0;
  float* params_ = nullptr;  // arena: params | grads | state slots, each laid out like params
  float* grads_ = nullptr;
  void* params_low_ = nullptr;  // the 16-bit copy of params_ (ExecutorOptions::low_precision_params)
  DType params_low_dtype_ = DType::f32;
  std::vector<LowFilterLayout> low_filters_;  // copies laid out (K, R, S, C) (LayerKernel::low_param_krsc)
  void refresh_low_precision_params();
  std::vector<float*> state_;  // per optimizer state slot
  float* buffers_ = nullptr;
  std::vector<char*> slot_arenas_;    // per activation slot: its arena (one allocation, slot after slot)
  void* shared_workspace_ = nullptr;  // several slots: the transient kernel workspaces of all
  // activation_slots > 1: where a layer's backward writes its parameter gradients (the largest
  // layer's), before they are added into the arena (Plan::grad_pieces).
  float* grad_scratch_ = nullptr;
  LossScaleState* micro_weights_ = nullptr;         // activation_slots > 1: per slot, scale = its weight
  std::vector<LossScaleState> micro_weights_host_;  // their host copy, written each step
  size_t parameter_bytes_ = 0, activation_bytes_ = 0;
  StepScalars* scalars_ = nullptr;    // backend memory
  void* landing_ = nullptr;           // Backend::upload_inputs' landing zone, if it stages
  std::unique_ptr<LossKernel> loss_;  // the registry's kernel for o_.loss
  // A last softmax (log_softmax) before sparse_categorical_crossentropy (nll) is folded into
  // cross_entropy on its input, the logits, where the plan allows (Plan::loss_on_logits): this
  // kernel then runs in loss_'s place. Null when the model does not end in such a pair.
  std::unique_ptr<LossKernel> logits_loss_;
  // Floats of the metric block: the loss sum, the top-k counts, then the confusion matrix (C, C) or
  // a value loss's sums.
  size_t metric_floats() const;
  float* metrics_ = nullptr;              // backend memory: loss_sum, samples, topk..., confusion
  NonfiniteRecord* nonfinite_ = nullptr;  // backend memory, zeroed with the metrics
  LossScaleState* scaler_ = nullptr;      // backend memory, with loss scaling only
  ClipRecord* clip_ = nullptr;            // backend memory, with clip_grad_norm only
  bool grad_scale_in_step_ = false;       // the optimizer step applies the clip's factor
  bool low_copy_in_step_ = false;         // the optimizer step writes params_low_
  double* clip_partials_ = nullptr;       // backend memory: kClipPartials partial sums
  // The step's own kernels (lib/backend/step_kernels.h), made once when the executor plans: the
  // non-finite guard; loss scaling (also the micro-batches' weights); clipping, with
  // clip_grad_norm only; augmentation, with o_.augment active only.
  std::unique_ptr<GuardKernel> guard_;
  std::unique_ptr<LossScaleKernel> loss_scale_;
  std::unique_ptr<ClipKernel> clipper_;
  std::unique_ptr<AugmentKernel> augment_;
  StepScalars host_scalars_;
  int64_t samples_ = 0;
  int64_t global_batch_ = 0;  // the rows of the current step's global batch (data parallel)
  GradientHook grad_hook_;
  std::vector<GradientBucket> buckets_;  // with a collective: the all-reduce's buckets
};

}  // namespace trainer
