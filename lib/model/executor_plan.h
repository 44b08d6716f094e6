// The executor's private plan of one batch size (lib/model/executor.h): where every tensor of a
// step lives in the activation arena, the kernels bound to them, the dtype conversions between
// them and where each backward writes its input gradients. Made in executor.cc (planning), run
// in executor_step.cc (a step) and the other executor_*.cc files; nothing outside them includes
// this header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "lib/backend/layer_kernel.h"
#include "lib/model/executor.h"

namespace trainer {

// Where a kernel writes the gradient of one of its inputs. A tensor that several layers consume
// (directly or through views such as flatten) gets the sum of their gradients: the first consumer
// to run backward writes the tensor's gradient, later ones add into it, natively where the kernel
// can (LayerKernel::accumulates_input_grads), else through the scratch gradient and one
// Backend::accumulate after their backward.
struct InputGrad {
  bool wanted = false;      // false: the input is (a view of) the model's input
  bool accumulate = false;  // add into the gradient rather than overwrite it
  bool scratch = false;     // written to the plan's scratch gradient, then accumulated
  bool converted = false;   // the input comes through a dtype conversion (Plan::Edge): the kernel
                            // writes the edge's gradient, which is converted into the tensor's
  size_t tensor = 0;        // the gradient's tensor (index into Plan::grad): its storage root
  int64_t floats = 0;       // elements of the tensor at this batch size
};

// A dtype conversion between a tensor and a kernel that runs in another dtype (kernels that keep
// f32 next to low-precision ones, the loss, which reads f32): forward converts the tensor into
// the edge's copy, backward converts the copy's gradient back (added where InputGrad says so).
struct Edge {
  size_t tensor = 0;  // the source: index into Plan::act
  DType from = DType::f32, to = DType::f32;
  size_t act = 0;   // byte offset of the converted copy
  size_t grad = 0;  // and of its gradient; 0: no gradient wanted (the model's input)
  int64_t n = 0;    // elements
};

// Several activation slots (micro-batches): a run of parameter gradients that one layer's backward
// writes into the executor's gradient scratch, then copied (the step's first micro-batch) or added
// (the others) into the gradient arena right after that backward. In floats.
struct GradPiece {
  int64_t arena = 0;    // offset in the gradient arena
  int64_t scratch = 0;  // offset in the scratch
  int64_t n = 0;
};

// What the activation arena's bytes hold (Executor::memory_breakdown).
enum ArenaUse {
  kUseOutputs,      // the input batch and the layers' outputs (kept for backward)
  kUseConversions,  // dtype-converted copies of tensors (Edge::act)
  kUseGradients,    // the gradients of the outputs and of the copies, shared by lifetime
  kUseWorkspaces,   // kernels' own and kept workspaces
  kUseTransient,    // the one region of transient workspaces (library scratch)
  kUseLabels,       // labels and the scratch gradient
  kArenaUses
};

// The layout of one batch size inside the activation arena, and its kernels.
struct Executor::Plan {
  int64_t batch = 0;
  int slot = 0;  // the activation slot (ExecutorOptions::activation_slots) its tensors live in
  std::vector<std::unique_ptr<LayerKernel>> kernels;  // null for views (flatten) and fused relus
  // Per layer: a relu or gelu that runs inside the kernel of the layer before it (KernelContext::
  // fused_relu, fused_gelu): like a view, no kernel, and its output and gradient are that layer's.
  std::vector<bool> fused_activation;
  // Elements between rows of the model's output (and its gradient) where the last layer pads them
  // (LayerKernel::output_pitch); 0: packed.
  int64_t out_pitch = 0;
  // Per layer: the layer whose bias this batchnorm takes (KernelContext::takes_bias), -1: none.
  std::vector<int> takes_bias_of;
  // Byte offsets into the activation arena. Index 0 is the input; index i+1 is layer i's output.
  std::vector<size_t> act, grad;
  std::vector<std::shared_ptr<const Layout>> layout;  // of act[i] and grad[i]; null: plain
  std::vector<DType> dtype;                           // of act[i] and grad[i]
  std::vector<Edge> edges;
  std::vector<std::vector<int>> input_edge;  // per layer and input: index into edges, -1: none
  int output_edge = -1;           // the model's output converted to f32 for the loss, -1: it is f32
  size_t out = 0, out_grad = 0;   // the model output the loss and predict read, and its gradient
  DType out_dtype = DType::f32;   // theirs: f32, or 16-bit where the loss takes it (LossKernel::takes)
  std::vector<size_t> workspace;  // per layer
  std::vector<size_t> kept;       // per layer: its kept workspace (LayerKernel::kept_workspace_bytes)
  // Per layer: its transient workspace is the executor's one region shared by every activation
  // slot (several slots only), not one in this plan's arena.
  std::vector<bool> shared_workspace;
  // Per layer and input: where backward writes that input's gradient (see plan_gradients()).
  std::vector<std::vector<InputGrad>> input_grads;
  size_t scratch = 0;  // one gradient buffer for consumers that cannot add into a shared gradient
  // Several activation slots: per layer, the runs its backward writes into the gradient scratch
  // (plan_gradient_pieces()); per parameter (index into Model::params()), the layer whose backward
  // writes its gradient (a bias a batchnorm takes: the batchnorm) and where in the scratch.
  std::vector<std::vector<GradPiece>> grad_pieces;
  std::vector<int> grad_writer;
  std::vector<int64_t> grad_at;
  size_t labels = 0, bytes = 0;
  size_t used[kArenaUses] = {};   // bytes of the arena per ArenaUse (aligned)
  size_t gradients_unshared = 0;  // what the gradients would take with a place each
  int outputs_in_place = 0;       // layers whose output took an input's memory (overwritable_input)
  // Inputs whose gradient is the memory of their add's output gradient (kCopiesOutputGradient).
  int gradients_shared = 0;
  // Two-input adds whose forward the layer after them may do (KernelContext::add_to_next); the
  // kernels' binds say which they do (AddHandoff::taken).
  std::vector<std::shared_ptr<AddHandoff>> add_handoffs;
  // The batchnorms' normalize handoffs (KernelContext::normalize_to_next), taken or not.
  std::vector<std::shared_ptr<NormalizeHandoff>> normalize_handoffs;
  size_t raw_input = 0;  // training batches land here when augmenting; the augmented copy is act[0]
  // The loss on the last layer's input, that layer skipped in training and evaluation steps: a
  // final softmax under cross_entropy_probs, or log_softmax under nll, is the cross-entropy of
  // its input logits (Executor::choose_loss_on_logits). Prediction still runs the layer.
  bool loss_on_logits = false;
  float* logits = nullptr;   // (B, C) f32, plain: the skipped layer's input
  float* dlogits = nullptr;  // where the skipped layer's backward would write that input's gradient
  int train_graph = -1, eval_graph = -1;          // recorded steps (backends with capture)
  int train_eager_runs = 0, eval_eager_runs = 0;  // steps run before recording
  // A pipeline stage's recorded pieces (executor_stage.cc, run_stage_captured).
  int stage_graph[kStagePieces] = {-1, -1, -1, -1, -1, -1, -1, -1}, stage_eager_runs[kStagePieces] = {};
};

}  // namespace trainer
