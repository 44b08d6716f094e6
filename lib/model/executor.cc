#include "lib/model/executor.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <map>

#include "lib/core/error.h"
#include "lib/layers/activation.h"
#include "lib/layers/dense.h"
#include "lib/losses/losses.h"
#include "lib/model/arena_layout.h"
#include "lib/model/executor_plan.h"
#include "lib/model/lifetime_packing.h"
#include "lib/registry/registry.h"

namespace trainer {

static size_t floats_bytes(int64_t n) { return align_up(size_t(n) * sizeof(float)); }
static size_t tensor_bytes(int64_t n, DType t) { return size_t(n) * dtype_bytes(t); }
// Model::check_batch_size() bounds each tensor; this bounds their sum (kernel workspaces included).
constexpr size_t kMaxArenaBytes = size_t(kMaxArenaElements) * sizeof(float);

// The batched shape (batch, per-sample dims...) of an activation.
static Shape batched(int64_t batch, const Shape& s) {
  std::vector<int64_t> d{batch};
  d.insert(d.end(), s.dims.begin(), s.dims.end());
  return Shape(std::move(d));
}

Executor::Executor(const Model& model, Backend& backend, const Optimizer& optimizer, ExecutorOptions opt)
    : model_(model), be_(backend), opt_(optimizer), o_(std::move(opt)) {
  if (o_.batch_sizes.empty()) throw InternalError("executor: no batch sizes");
  // The largest batch size: the loss's, the activations' and the landing zone's bound, and the one
  // plan whose kernels measure their algorithms (KernelContext::measure).
  const int64_t max_batch = *std::max_element(o_.batch_sizes.begin(), o_.batch_sizes.end());
  if (o_.activation_slots < 1) throw InternalError("executor: no activation slots");
  if (host_reduce() && !be_.host_memory())
    throw UsageError("data parallelism on " + be_.description() +
                     " needs device collectives, and none was joined: " +
                     (be_.collectives_unavailable().empty() ? std::string("internal: no collective given")
                                                            : be_.collectives_unavailable()));
  if (o_.collective && o_.comm && o_.collective->size() != o_.comm->size())
    throw InternalError("the device collective has " + std::to_string(o_.collective->size()) +
                        " replicas, the host world " + std::to_string(o_.comm->size()));
  if (o_.sync_batchnorm && !o_.collective && !(o_.comm && be_.host_memory()))
    throw InternalError("sync_batchnorm on " + be_.description() + " without a collective to sum over");
  if (o_.sync_batchnorm && (o_.activation_slots > 1 || o_.input_gradient || o_.output_gradient_given))
    throw UsageError("device.sync_batchnorm is not implemented for the stages of model.stages");
  for (const TensorSlot& t : model_.params())
    if (!t.shared_with.empty() && o_.activation_slots > 1)
      throw UsageError("'" + model_.layers()[t.shared_with[0]]->name() + "' ties its weight to '" +
                       model_.layers()[size_t(t.layer)]->name() +
                       "' (tie_to): tied weights are not implemented for the micro-batches of model.stages");
  const auto& layers = model_.layers();
  const Registry& reg = Registry::global();

  // 1. Small control block first: step scalars and metric accumulators.
  // The loss's kernel for this backend, and its scratch (block sums, class weights).
  if (!o_.loss.class_weights.empty() && int64_t(o_.loss.class_weights.size()) != o_.num_classes)
    throw ConfigError("loss.class_weights has " + std::to_string(o_.loss.class_weights.size()) +
                      " values for " + std::to_string(o_.num_classes) +
                      " classes: give one weight per class, in class id order");
  if (o_.loss.on_values() && !o_.top_k.empty())
    throw InternalError("executor: top-k counts with loss '" + o_.loss.type + "' on float targets");
  LossSpec spec = o_.loss.spec(o_.num_classes, o_.top_k);
  spec.backend = &be_;
  spec.max_batch = max_batch;
  const auto make_loss = [&](const LossSpec& s) {
    std::unique_ptr<LossKernel> k = LossRegistry::global().make_kernel(be_.name(), s);
    if (size_t bytes = k->scratch_bytes()) k->bind(allocate(bytes, "the loss's partial sums and weights"));
    return k;
  };
  loss_ = make_loss(spec);
  if (loss_foldable()) {
    spec.type = "cross_entropy";
    spec.scores = ClassScores::logits;
    logits_loss_ = make_loss(spec);
  }
  const size_t n_metrics = metric_floats();
  scalars_ = static_cast<StepScalars*>(allocate(sizeof(StepScalars), "step scalars"));
  metrics_ = static_cast<float*>(allocate(n_metrics * sizeof(float), "metric accumulators"));
  nonfinite_ = static_cast<NonfiniteRecord*>(allocate(sizeof(NonfiniteRecord), "non-finite step record"));
  const StepKernelRegistry& step_kernels = StepKernelRegistry::global();
  guard_ = step_kernels.guard(be_);
  loss_scale_ = step_kernels.loss_scale(be_, o_.loss_scale);
  if (o_.augment.active()) augment_ = step_kernels.augment(be_, o_.augment);
  if (o_.clip_grad_norm > 0) {
    clipper_ = step_kernels.clip(be_, o_.clip_grad_norm);
    clip_ = static_cast<ClipRecord*>(allocate(sizeof(ClipRecord), "gradient clipping record"));
    clip_partials_ = static_cast<double*>(allocate(
        size_t(std::max(o_.clip_stages, 1)) * kClipPartials * sizeof(double), "gradient norm partial sums"));
    const ClipRecord none;
    be_.copy_to_device(clip_, &none, sizeof none);
  }
  // The optimizer's step over the parameter arena, with its tensors (LAMB's norms are per tensor).
  {
    std::vector<ParamRange> tensors;
    for (const TensorSlot& t : model_.params()) tensors.push_back({t.offset, t.shape.numel()});
    opt_step_ = optimizer.make_kernel(be_, model_.param_arena_floats(), std::move(tensors));
    if (const size_t bytes = opt_step_->scratch_bytes())
      opt_step_->bind(allocate(bytes, "optimizer scratch (per-tensor sums)"));
    // Pipeline stages clip over every stage's norm first (stage_clip), which scales the arena.
    grad_scale_in_step_ = clip_ && !o_.clip_stages && opt_step_->fuse_grad_scale(clip_);
  }
  // The gradient sum reads each step's shard weight from the step scalars (device memory), in
  // buckets cut once here.
  if (o_.collective) {
    o_.collective->set_weight(&scalars_->shard_weight);
    buckets_ = plan_gradient_buckets(layer_gradients(model_), o_.bucket_bytes);
    if (o_.gradient_compression != DType::f32) {  // staging for the largest sum: a bucket, or the arena
      int64_t most = overlapped() ? 0 : model_.param_arena_floats();
      for (const GradientBucket& b : buckets_) most = std::max(most, b.floats());
      o_.collective->compress_sums(o_.gradient_compression, most);
    }
    spdlog::debug("gradient all-reduce: {} of at most {}{}", describe_buckets(buckets_),
                  o_.bucket_bytes ? format_bytes(o_.bucket_bytes) : std::string("(no cap)"),
                  overlapped() ? ", launched during the backward pass" : ", after the backward pass");
  }
  if (o_.loss_scaling) {
    scaler_ = static_cast<LossScaleState*>(allocate(sizeof(LossScaleState), "loss scale"));
    LossScaleState start;
    start.scale = o_.loss_scale_init;
    start.inv_scale = 1.f / o_.loss_scale_init;
    be_.copy_to_device(scaler_, &start, sizeof start);
  }

  // 2. Plans: kernels per batch size (primitives/descriptors created here), arena layout.
  // Whether the loss reads a model output of 16-bit dtype t as it is (LossKernel::takes), with no
  // f32 copy between them: the last layer's kernel may then also pad its rows for it.
  const auto loss_takes_as_is = [&](DType t) {
    return t != DType::f32 && loss_ && !o_.output_gradient_given && !o_.loss_scaling &&
           o_.activation_slots == 1 && loss_->takes(t);
  };
  size_t act_bytes = 0;
  size_t shared_transient_bytes = 0;          // several activation slots: the transient workspaces of all
  std::vector<std::pair<int, int64_t>> keys;  // (activation slot, batch)
  for (int slot = 0; slot < o_.activation_slots; ++slot)
    for (int64_t b : o_.batch_sizes) keys.emplace_back(slot, b);
  for (const auto& key : keys) {
    // Plain names, not structured bindings: the lambdas below capture them (C++17 forbids
    // capturing a structured binding; GCC allows it, clang does not).
    const int slot = key.first;
    const int64_t b = key.second;
    if (plans_.count({slot, b})) continue;
    model_.check_batch_size(b);  // every tensor of this batch fits: the products below cannot overflow
    auto p = std::make_unique<Plan>();
    p->batch = b;
    p->slot = slot;
    ArenaLayout arena(kMaxArenaBytes);
    auto take = [&](size_t bytes, ArenaUse use) {
      p->used[use] += align_up(bytes);
      size_t at = 0;
      if (!arena.place(bytes, &at))
        throw ConfigError("the activations and workspaces of batch size " + std::to_string(b) +
                          " need more than 2^42 bytes (4 TiB): lower data.batch_size or use smaller layers");
      return at;
    };
    const size_t input_bytes = size_t(b * model_.input_shape().numel()) * sizeof(float);
    p->act.push_back(take(input_bytes, kUseOutputs));
    p->grad.push_back(o_.input_gradient ? take(input_bytes, kUseGradients)
                                        : 0);  // the model's input needs none
    if (o_.augment.active()) p->raw_input = take(input_bytes, kUseOutputs);
    p->layout.push_back(nullptr);
    p->dtype.push_back(DType::f32);  // the host's batch
    p->input_edge.assign(layers.size(), {});
    p->fused_activation.assign(layers.size(), false);
    p->takes_bias_of.assign(layers.size(), -1);
    // Storage roots (views share their input's memory): the model's input (root 0) has no gradient.
    std::vector<size_t> root(layers.size() + 1, 0);
    std::vector<size_t> out_size(layers.size() + 1, 0);  // bytes of each storage root's output
    // The gradients of the layers' outputs and of the dtype conversions are placed after the loop,
    // sharing memory where their lives in the backward pass do not overlap (below the loop).
    std::vector<size_t> grad_bytes(layers.size() + 1, 0);  // per storage root
    std::vector<size_t> edge_user;                         // per edge: the layer it feeds (L: the loss)
    // A conversion of tensor t to dtype `to` (with a gradient unless t is the model's input) for
    // the layer `user`.
    auto add_edge = [&](size_t t, DType to, size_t user) {
      if (p->layout[t])
        throw InternalError("a dtype conversion of a tensor in a backend layout (layer " + std::to_string(t) +
                            ")");
      Edge e;
      e.tensor = t;
      e.from = p->dtype[t];
      e.to = to;
      e.n = b * (t == 0 ? model_.input_shape() : layers[t - 1]->output_shape()).numel();
      e.act = take(tensor_bytes(e.n, to), kUseConversions);
      p->edges.push_back(e);
      edge_user.push_back(user);
      return int(p->edges.size() - 1);
    };
    size_t transient_bytes = 0;  // the largest transient workspace: one region for all of them
    std::vector<size_t> transient_users;
    // Each tensor's dtype, known before its consumers' kernels are made (the layout choice below
    // needs every consumer's).
    const std::vector<DType> planned_dtype = plan_dtypes();
    std::map<size_t, std::shared_ptr<GeluHandoff>> gelu_handoffs;            // by the layer that takes one
    std::map<size_t, std::shared_ptr<NormalizeHandoff>> normalize_handoffs;  // likewise
    size_t add_handoff_to = 0;  // the layer the last add handed its forward to (add_handoffs.back())
    for (size_t i = 0; i < layers.size(); ++i) {
      const Layer& l = *layers[i];
      const std::vector<int>& from = model_.layer_inputs(i);
      // A view, or a relu its input's kernel runs: the output is the input's memory (and its
      // gradient's).
      if (l.aliases_input() || p->fused_activation[i]) {
        const size_t t = size_t(from[0] + 1);
        p->kernels.push_back(nullptr);
        p->act.push_back(p->act[t]);
        p->grad.push_back(p->grad[t]);
        p->layout.push_back(p->layout[t]);
        p->dtype.push_back(p->dtype[t]);
        p->workspace.push_back(0);
        p->kept.push_back(0);
        p->input_edge[i].assign(from.size(), -1);
        root[i + 1] = root[t];
        out_size[i + 1] = out_size[t];
        continue;
      }
      root[i + 1] = i + 1;
      const DType dt = planned_dtype[i + 1];  // layer_dtype of its inputs' dtypes (plan_dtypes)
      for (int f : from) {
        const size_t t = size_t(f + 1);
        p->input_edge[i].push_back(p->dtype[t] == dt ? -1 : add_edge(t, dt, i));
      }
      KernelContext ctx;
      ctx.backend = &be_;
      ctx.batch = b;
      ctx.scalars = scalars_;
      ctx.layer_index = o_.first_layer + int(i);
      // A layer kept f32 for its size computes as in fp32 (its math would otherwise let the
      // libraries convert its operands to 16 bits or TF32, which a layer that small does not pay).
      ctx.math = too_small_for_low_precision(*layers[i]) ? MathMode::strict_fp32 : o_.math;
      ctx.act_dtype = dt;
      ctx.deterministic = o_.deterministic;
      ctx.measure = b == max_batch;
      ctx.low_precision_params = o_.low_precision_params && be_.activation_dtype(o_.math) != DType::f32;
      if (o_.sync_batchnorm) {  // on the device where there is a collective, else on the host
        ctx.stats_collective = o_.collective;
        ctx.stats_comm = o_.collective ? nullptr : o_.comm;
      }
      // Layouts: a kernel may keep its preferred output layout only when every layer that takes
      // its output runs a kernel that accepts any layout, in the same dtype (see
      // output_layout_free). A kernel that runs the relu after it answers for the relu's output.
      for (size_t k = 0; k < from.size(); ++k)
        ctx.input_layouts.push_back(p->input_edge[i][k] < 0 ? p->layout[size_t(from[k] + 1)] : nullptr);
      ctx.input_layout = ctx.input_layouts[0];
      std::vector<int> next = model_.consumers(int(i));
      const int relu = fusable_relu(i, dt), gelu = relu < 0 ? fusable_gelu(i, dt) : -1;
      if (const int act = std::max(relu, gelu); act >= 0) {
        ctx.fused_relu = relu >= 0;
        ctx.fused_gelu = gelu >= 0;
        p->fused_activation[size_t(act)] = true;
        next = model_.consumers(act);
      }
      // The fused gelu's backward handed to the layer that alone reads its output, in its dtype.
      if (gelu >= 0 && next.size() == 1 && model_.layer_inputs(size_t(next[0])) == std::vector<int>{gelu} &&
          (reg.kernel_caps(layers[size_t(next[0])]->type(), be_.name()) & kTakesGeluGrad) &&
          planned_dtype[size_t(next[0]) + 1] == dt) {
        ctx.gelu_to_next = std::make_shared<GeluHandoff>();
        gelu_handoffs[size_t(next[0])] = ctx.gelu_to_next;
      }
      if (auto h = gelu_handoffs.find(i); h != gelu_handoffs.end()) ctx.gelu_from_input = h->second;
      // A batchnorm's normalize pass (its relu too, when fused) done by the layer that alone reads
      // its output, as its only input, in its dtype (the consumer's bind checks the pointer and
      // the layout it can read).
      if (gelu < 0 && next.size() == 1 && (reg.kernel_caps(l.type(), be_.name()) & kHandsOverNormalize) &&
          model_.layer_inputs(size_t(next[0])) == std::vector<int>{relu >= 0 ? relu : int(i)} &&
          (reg.kernel_caps(layers[size_t(next[0])]->type(), be_.name()) & kTakesNormalize) &&
          planned_dtype[size_t(next[0]) + 1] == dt) {
        ctx.normalize_to_next = std::make_shared<NormalizeHandoff>();
        normalize_handoffs[size_t(next[0])] = ctx.normalize_to_next;
        p->normalize_handoffs.push_back(ctx.normalize_to_next);
      }
      if (auto h = normalize_handoffs.find(i); h != normalize_handoffs.end())
        ctx.normalize_from_input = h->second;
      // A two-input add's forward done by the layer right after it where that layer reads the sum
      // alone, as its only input, in the add's dtype and plain (the consumer's bind checks the
      // pointer: a conversion edge between them leaves the add its own forward).
      if (i > 0 && add_handoff_to == i) ctx.add_from_input = p->add_handoffs.back();
      if (from.size() == 2 && i + 1 < layers.size() &&
          (reg.kernel_caps(l.type(), be_.name()) & kHandsOverForward) &&
          model_.layer_inputs(i + 1) == std::vector<int>{int(i)} &&
          (reg.kernel_caps(layers[i + 1]->type(), be_.name()) & kTakesAddForward) &&
          !layers[i + 1]->aliases_input() && planned_dtype[i + 2] == dt) {
        ctx.add_to_next = std::make_shared<AddHandoff>();
        p->add_handoffs.push_back(ctx.add_to_next);
        add_handoff_to = i + 1;
      }
      // The last layer's output read by the loss alone, as it is, at any pitch: its kernel may pad
      // the rows.
      ctx.output_pitch_ok =
          i + 1 == layers.size() && next.empty() && loss_takes_as_is(dt) && loss_->takes_pitch();
      if (const int taker = relu < 0 && gelu < 0 ? bias_taker(i, dt) : -1; taker >= 0) {
        ctx.bias_to_batchnorm = true;
        p->takes_bias_of[size_t(taker)] = int(i);
      }
      ctx.takes_bias = p->takes_bias_of[i] >= 0;
      ctx.output_layout_free = output_layout_free(i, next, planned_dtype);
      p->kernels.push_back(reg.make_kernel(be_.name(), l, ctx));
      if (!ctx.output_layout_free && p->kernels.back()->output_layout())
        throw InternalError("layer '" + l.name() + "' chose an output layout where plain was required");
      size_t out_bytes = tensor_bytes(b * l.output_shape().numel(), dt);
      if (size_t kb = p->kernels.back()->output_bytes()) out_bytes = std::max(out_bytes, kb);
      // The output over an input's memory (PyTorch's in-place ops) where nothing else needs that
      // input any more (LayerKernel::may_overwrite_input); its gradient stays its own.
      const int over = overwritable_input(*p, i, dt, root, out_size, out_bytes);
      if (over >= 0) {
        const size_t t = size_t(from[size_t(over)] + 1);
        p->act.push_back(p->act[t]);
        out_size[i + 1] = out_size[t];
        ++p->outputs_in_place;
      } else {
        p->act.push_back(take(out_bytes, kUseOutputs));
        out_size[i + 1] = out_bytes;
      }
      p->grad.push_back(0);  // placed with the other gradients below
      grad_bytes[i + 1] = out_bytes;
      p->layout.push_back(p->kernels.back()->output_layout());
      p->dtype.push_back(dt);
      if (p->kernels.back()->workspace_is_transient()) {
        transient_bytes = std::max(transient_bytes, p->kernels.back()->workspace_bytes());
        transient_users.push_back(i);
        p->workspace.push_back(0);  // placed below
      } else {
        p->workspace.push_back(take(p->kernels.back()->workspace_bytes(), kUseWorkspaces));
      }
      const size_t kept = p->kernels.back()->kept_workspace_bytes();
      p->kept.push_back(kept ? take(kept, kUseWorkspaces) : 0);
    }
    // The loss, the metrics and predict read the model's output as f32, but a loss that takes the
    // output's 16-bit dtype (a language model's logits: (B, L, V), the largest tensor of the step)
    // reads it and writes its gradient as they are; predict converts on the host.
    const DType out_dt = p->dtype.back();
    const bool typed_loss = loss_takes_as_is(out_dt);
    if (out_dt != DType::f32 && !typed_loss)
      p->output_edge = add_edge(layers.size(), DType::f32, layers.size());
    p->out_dtype = p->output_edge >= 0 ? DType::f32 : out_dt;
    if (!layers.empty() && p->kernels.back()) p->out_pitch = p->kernels.back()->output_pitch();
    if (p->out_pitch && (p->output_edge >= 0 || !typed_loss))
      throw InternalError("the last layer padded its rows for a loss that does not read them so");
    // The gradients. Backward runs the loss (time 0), then layer L-1 (time 1) down to layer 0
    // (time L). A storage root's gradient is first written by the backward of its last consumer
    // (the loss for the model's output, and for the last layer's input, which the loss may write
    // itself: Plan::loss_on_logits) and last read by the backward of the layer that produced it;
    // an edge's gradient lives during its layer's backward only. Gradients whose lives do not
    // overlap share memory. The model's input gradient (input_gradient) outlives the step: it
    // keeps its own place, taken above.
    {
      const int64_t L = int64_t(layers.size());
      std::vector<int64_t> last_writer(layers.size() + 1, -1);  // the highest consumer's layer index
      for (size_t j = 0; j < layers.size(); ++j) {
        if (!p->kernels[j]) continue;
        for (int f : model_.layer_inputs(j)) {
          const size_t r = root[size_t(f + 1)];
          last_writer[r] = std::max(last_writer[r], j + 1 == layers.size() ? L : int64_t(j));
        }
      }
      last_writer[root[layers.size()]] = L;
      // An input that an add alone reads has the add's output gradient as its own (the add copies
      // it): the two share memory, one life from the output gradient's first write to the input's
      // producer's backward, and the add skips the copy (kCopiesOutputGradient; GPT-2 small: 24
      // copies of 12.6 MB a step). One input a layer: two inputs' producers could each write over
      // what the other still reads (a fused relu's backward masks dy in place). Later layers
      // first, so that chains of adds share one gradient.
      std::vector<size_t> grad_root(layers.size() + 1);
      for (size_t r = 0; r <= layers.size(); ++r) grad_root[r] = r;
      for (size_t j = layers.size(); j-- > 0;) {
        const size_t a = j + 1;
        if (!p->kernels[j] || root[a] != a || last_writer[a] < 0 ||
            !(reg.kernel_caps(layers[j]->type(), be_.name()) & kCopiesOutputGradient))
          continue;
        const std::vector<int>& from = model_.layer_inputs(j);
        for (size_t k = 0; k < from.size(); ++k) {
          const size_t r = size_t(from[k] + 1);
          if (from[k] < 0 || root[r] != r || std::count(from.begin(), from.end(), from[k]) != 1 ||
              model_.consumers(from[k]) != std::vector<int>{int(j)} || p->input_edge[j][k] >= 0 ||
              p->dtype[r] != p->dtype[a] || p->layout[r] != p->layout[a] || grad_bytes[r] != grad_bytes[a])
            continue;
          grad_root[r] = grad_root[a];
          ++p->gradients_shared;
          break;
        }
      }
      std::vector<Lifetime> lives;
      std::vector<size_t> owner;  // r (a root) or layers.size() + 1 + k (edge k)
      std::vector<size_t> life_of(layers.size() + 1, SIZE_MAX);
      for (size_t r = layers.size(); r >= 1; --r) {  // a shared gradient's root comes before its inputs'
        if (root[r] != r || last_writer[r] < 0) continue;
        if (grad_root[r] != r) {
          Lifetime& shared = lives[life_of[grad_root[r]]];
          shared.last = std::max(shared.last, L - int64_t(r - 1));
          continue;
        }
        life_of[r] = lives.size();
        lives.push_back({grad_bytes[r], L - last_writer[r], L - int64_t(r - 1)});
        owner.push_back(r);
      }
      for (size_t k = 0; k < p->edges.size(); ++k) {
        if (root[p->edges[k].tensor] == 0 && !o_.input_gradient) continue;  // no gradient wanted
        const int64_t at = L - int64_t(edge_user[k]);
        lives.push_back({tensor_bytes(p->edges[k].n, p->edges[k].to), at, at});
        owner.push_back(layers.size() + 1 + k);
      }
      size_t region = 0;
      const std::vector<size_t> offsets = pack_lifetimes(lives, &region, kArenaAlign);
      const size_t base = region ? take(region, kUseGradients) : 0;
      std::vector<size_t> placed(layers.size() + 1, 0);
      size_t unshared = 0;
      for (size_t k = 0; k < owner.size(); ++k) {
        unshared += align_up(lives[k].bytes);
        if (owner[k] <= layers.size())
          placed[owner[k]] = base + offsets[k];
        else
          p->edges[owner[k] - layers.size() - 1].grad = base + offsets[k];
      }
      for (size_t t = 1; t <= layers.size(); ++t)
        p->grad[t] = root[t] == 0 ? p->grad[0] : placed[grad_root[root[t]]];
      p->gradients_unshared = unshared;
      if (slot == 0 && b == keys.front().second)
        spdlog::debug("activation gradients: {} in {} of shared memory (batch size {})",
                      format_bytes(unshared), format_bytes(region), b);
    }
    p->out = p->act.back();
    p->out_grad = p->grad.back();
    if (p->output_edge >= 0) {
      p->out = p->edges.back().act;
      p->out_grad = p->edges.back().grad;
    }
    p->shared_workspace.assign(layers.size(), false);
    if (transient_bytes && o_.activation_slots > 1) {
      // The slots' steps run one after another on the one stream: one region serves them all.
      shared_transient_bytes = std::max(shared_transient_bytes, transient_bytes);
      for (size_t i : transient_users) p->shared_workspace[i] = true;
    } else if (transient_bytes) {
      const size_t shared = take(transient_bytes, kUseTransient);
      for (size_t i : transient_users) p->workspace[i] = shared;
    }
    if (size_t scratch = plan_gradients(*p)) p->scratch = take(scratch, kUseLabels);
    p->labels = take(size_t(b) * target_row_bytes(), kUseLabels);
    p->bytes = arena.bytes();
    act_bytes = std::max(act_bytes, p->bytes);
    plans_[{slot, b}] = std::move(p);
  }

  // Several activation slots: each layer's parameter gradients go through one scratch (the
  // largest layer's size) into the arena, where the micro-batches add up.
  int64_t scratch_floats = 0;
  if (o_.activation_slots > 1)
    for (auto& kv : plans_) scratch_floats = std::max(scratch_floats, plan_gradient_pieces(*kv.second));

  // A 16-bit copy of the parameters where a kernel reads one (ExecutorOptions::low_precision_params):
  // converted once after each update instead of by every layer in forward and again in backward
  // (gpt2_small: 99 conversions, 0.84 ms of a 24.4 ms step on an H200).
  bool want_low = false;
  if (o_.low_precision_params && be_.activation_dtype(o_.math) != DType::f32)
    for (const auto& kv : plans_)
      for (const auto& k : kv.second->kernels) want_low = want_low || (k && k->wants_low_precision_params());
  const size_t low_bytes = want_low ? size_t(model_.param_arena_floats()) * 2 : 0;
  // Filters whose copy is laid out (K, R, S, C) (LayerKernel::low_param_krsc): the optimizer's
  // step writes them so, the refresh relayouts them.
  low_filters_.clear();
  if (want_low)
    for (const auto& kv : plans_)
      for (size_t i = 0; i < kv.second->kernels.size(); ++i) {
        const auto& k = kv.second->kernels[i];
        if (!k || !k->wants_low_precision_params()) continue;
        const std::vector<int>& params = model_.layer_params(i);
        for (size_t pos = 0; pos < params.size(); ++pos) {
          LowFilterLayout f;
          if (!k->low_param_krsc(pos, &f)) continue;
          const TensorSlot& t = model_.params()[size_t(params[pos])];
          if (!t.shared_with.empty() || t.shape.numel() != f.k * f.c * f.r * f.s)
            throw InternalError("a (K, R, S, C) 16-bit copy asked for a shared or mis-sized tensor");
          f.offset = t.offset;
          bool seen = false;
          for (const LowFilterLayout& g : low_filters_) seen = seen || g.offset == f.offset;
          if (!seen) low_filters_.push_back(f);
        }
      }

  // 3. Allocate: parameter arena, buffers, activations. Each allocation names what it is for.
  // Gradients and each optimizer state slot are arenas laid out like the parameters (the Model's
  // offsets), back to back; the arena's size is a multiple of the alignment, so every tensor of
  // every slot stays aligned.
  n_param_floats_ = model_.param_arena_floats();
  if (floats_bytes(n_param_floats_) != size_t(n_param_floats_) * sizeof(float))
    throw InternalError("the parameter arena's size is not a multiple of the arena alignment");
  const int slots = 2 + optimizer.state_slots();
  try {
    params_ = static_cast<float*>(allocate(std::max<size_t>(floats_bytes(n_param_floats_) * slots, 1),
                                           "parameters, gradients and optimizer state"));
    grads_ = params_ + n_param_floats_;
    for (int k = 0; k < optimizer.state_slots(); ++k) state_.push_back(grads_ + (1 + k) * n_param_floats_);
    buffers_ = static_cast<float*>(
        allocate(floats_bytes(std::max<int64_t>(model_.buffer_arena_floats(), 1)), "layer buffers"));
    const size_t n_slots = size_t(o_.activation_slots);
    char* const activations = static_cast<char*>(
        allocate(act_bytes * n_slots,
                 "activations and workspaces for batch size " + std::to_string(max_batch) +
                     (n_slots > 1 ? " (" + std::to_string(n_slots) + " micro-batch slots)" : "")));
    for (int k = 0; k < o_.activation_slots; ++k) slot_arenas_.push_back(activations + size_t(k) * act_bytes);
    activation_bytes_ = act_bytes * n_slots;
    if (be_.stages_uploads()) {  // the largest step's scalars, batch and labels
      const Backend::UploadPiece most[3] = {
          {nullptr, nullptr, sizeof(StepScalars)},
          {nullptr, nullptr, size_t(max_batch * model_.input_shape().numel()) * sizeof(float)},
          {nullptr, nullptr, size_t(max_batch) * target_row_bytes()}};
      const size_t bytes = Backend::landing_bytes(most, 3);
      landing_ = allocate(bytes, "the landing zone of the next batch (uploaded during the step before)");
      be_.reserve_uploads(bytes);
      activation_bytes_ += align_up(bytes);
    }
    if (shared_transient_bytes) {
      shared_workspace_ =
          allocate(shared_transient_bytes, "kernel workspaces shared by the micro-batch slots");
      activation_bytes_ += align_up(shared_transient_bytes);
    }
    parameter_bytes_ = floats_bytes(n_param_floats_) * slots;
    if (low_bytes) {
      params_low_ = allocate(low_bytes, "the parameters in 16 bits (read by the layers' products)");
      params_low_dtype_ = be_.activation_dtype(o_.math);
      parameter_bytes_ += align_up(low_bytes);
      low_copy_in_step_ = opt_step_->fuse_low_precision_copy(params_low_, params_low_dtype_, low_filters_);
    }
    if (o_.activation_slots > 1) {
      grad_scratch_ =
          static_cast<float*>(allocate(std::max<size_t>(floats_bytes(scratch_floats), 1),
                                       "micro-batch gradient scratch (the largest layer's gradients)"));
      parameter_bytes_ += floats_bytes(scratch_floats);
      micro_weights_ = static_cast<LossScaleState*>(
          allocate(n_slots * sizeof(LossScaleState), "micro-batch loss weights"));
      micro_weights_host_.resize(n_slots);
    }
  } catch (const OutOfMemoryError& e) {
    // The destructor will not run: give back what was taken, so the caller may retry.
    for (void* ptr : allocations_) be_.allocator().deallocate(ptr);
    allocations_.clear();
    // Activations scale with the batch; everything else is fixed. Say what would fit.
    const size_t cap = be_.allocator().cap_bytes();
    const size_t fixed =
        floats_bytes(n_param_floats_) * slots + align_up(low_bytes) + align_up(sizeof(StepScalars)) +
        align_up(sizeof(NonfiniteRecord)) + align_up(n_metrics * sizeof(float)) +
        (clip_ ? align_up(sizeof(ClipRecord)) + align_up(kClipPartials * sizeof(double)) : 0) +
        (scaler_ ? align_up(sizeof(LossScaleState)) : 0) +
        floats_bytes(std::max<int64_t>(model_.buffer_arena_floats(), 1)) + be_.allocator().bytes_in_use();
    // Per sample: its activations (all slots) and, when uploads are staged, its landing zone.
    const double landing_per_sample =
        be_.stages_uploads() ? double((model_.input_shape().numel() + 1) * 4) : 0.0;
    const double per_sample =
        double(act_bytes) * double(o_.activation_slots) / double(max_batch) + landing_per_sample;
    std::string advice;
    if (cap) {
      int64_t fit = cap > fixed ? int64_t(double(cap - fixed) / per_sample) : 0;
      advice = fit >= 1 ? "; the largest batch size that would fit is about " +
                              std::to_string(std::min(fit, max_batch))
                        : "; not even batch size 1 fits: raise --mem-limit or use a smaller model";
    }
    throw OutOfMemoryError(std::string(e.what()) + advice);
  }
  // Gradients and state start at zero, padding between tensors included: the optimizer updates
  // the arena as one flat vector, so padding must hold zeros, not leftover memory.
  be_.zero(grads_, floats_bytes(n_param_floats_) * size_t(1 + optimizer.state_slots()));
  if (grad_scratch_) be_.zero(grad_scratch_, floats_bytes(scratch_floats));

  // 4. Bind every kernel to views of its tensors (the only place their addresses are taken).
  for (auto& kv : plans_) {
    Plan& p = *kv.second;
    for (size_t i = 0; i < layers.size(); ++i)
      if (p.kernels[i]) {
        KernelBinding b = binding(p, i);
        if (b.accumulate_param_grads && !p.kernels[i]->accumulates_param_grads())
          throw InternalError("layer '" + layers[i]->name() + "' (" + layers[i]->type() + ", " + be_.name() +
                              "): its weight is tied, and its kernel cannot add into a gradient");
        p.kernels[i]->bind(b);
      }
    if (!o_.output_gradient_given) choose_loss_on_logits(p);
  }
  reset_metrics();
}

// Keras does the same for a softmax feeding its crossentropy (it takes the softmax's input), and
// PyTorch's cross_entropy is log_softmax + nll_loss: one kernel computes the loss and the logits'
// gradient, softmax(z) - onehot(y) over the batch, instead of the layer's forward, the loss on
// probabilities and the layer's backward. The same function up to rounding, except that the
// probabilities' loss clips p to [1e-7, 1 - 1e-7] (Keras's epsilon) and the logits' does not:
// a sample whose probability of its label is under 1e-7 counts its true -log p (over 16.1).
// Accuracy and top-k rank the logits as the probabilities would (softmax keeps each row's order).
bool Executor::loss_on_logits() const {
  for (const auto& kv : plans_)
    if (!kv.second->loss_on_logits) return false;
  return !plans_.empty();
}

int Executor::folded_biases() const {
  const Plan& p = *plans_.begin()->second;
  return int(std::count_if(p.takes_bias_of.begin(), p.takes_bias_of.end(), [](int v) { return v >= 0; }));
}

int Executor::outputs_in_place() const { return plans_.begin()->second->outputs_in_place; }

int Executor::gradients_shared() const { return plans_.begin()->second->gradients_shared; }
int Executor::adds_handed_over() const {
  const auto& h = plans_.begin()->second->add_handoffs;
  return int(std::count_if(h.begin(), h.end(), [](const auto& a) { return a->taken; }));
}

int Executor::normalizes_handed_over() const {
  const auto& h = plans_.begin()->second->normalize_handoffs;
  return int(std::count_if(h.begin(), h.end(), [](const auto& a) { return a->taken; }));
}

int Executor::fused_activations() const {
  const Plan& p = *plans_.begin()->second;
  return int(std::count(p.fused_activation.begin(), p.fused_activation.end(), true));
}

int Executor::outputs_in_backend_layouts() const {
  const Plan* largest = nullptr;
  for (const auto& kv : plans_)
    if (!largest || kv.second->batch > largest->batch) largest = kv.second.get();
  int n = 0;
  for (size_t i = 0; i < largest->kernels.size(); ++i) n += largest->kernels[i] && largest->layout[i + 1];
  return n;
}

bool Executor::loss_foldable() const {
  if (o_.loss.on_values()) return false;  // the losses on values take the model's outputs as they are
  const std::string& type = model_.layers().back()->type();
  return (type == "softmax" && o_.loss.scores == ClassScores::probabilities) ||
         (type == "log_softmax" && o_.loss.scores == ClassScores::log_probabilities);
}

void Executor::choose_loss_on_logits(Plan& p) {
  p.loss_on_logits = false;
  const size_t last = model_.layers().size() - 1;
  if (!logits_loss_ || !p.kernels[last] || model_.layer_inputs(last).size() != 1) return;
  const KernelBinding b = binding(p, last);
  const TensorView& in = b.inputs[0];
  if (in.dtype != DType::f32 || in.layout || !b.input_grads[0].data || b.accumulate_input_grads[0] ||
      p.input_grads[last][0].scratch || in.shape.numel() != p.batch * loss_width())
    return;
  p.loss_on_logits = true;
  p.logits = static_cast<float*>(in.data);
  p.dlogits = static_cast<float*>(b.input_grads[0].data);
}

// Fills p.input_grads (see InputGrad) from the graph, walking the layers in backward order;
// returns the bytes the scratch gradient needs (0: none).
size_t Executor::plan_gradients(Plan& p) const {
  const auto& layers = model_.layers();
  // A tensor's storage root: views (flatten, identity) share their input's memory.
  std::vector<size_t> root(layers.size() + 1, 0);
  for (size_t i = 0; i < layers.size(); ++i)
    root[i + 1] = layers[i]->aliases_input() || p.fused_activation[i]
                      ? root[size_t(model_.layer_inputs(i)[0] + 1)]
                      : i + 1;
  std::vector<bool> written(layers.size() + 1, false);
  written[root[layers.size()]] = true;  // the loss writes the output's gradient first
  size_t scratch = 0;
  p.input_grads.assign(layers.size(), {});
  for (size_t i = layers.size(); i-- > 0;) {
    const std::vector<int>& from = model_.layer_inputs(i);
    p.input_grads[i].resize(from.size());
    if (!p.kernels[i]) continue;
    int scratch_inputs = 0;
    for (size_t k = 0; k < from.size(); ++k) {
      InputGrad& g = p.input_grads[i][k];
      g.tensor = root[size_t(from[k] + 1)];
      g.wanted = g.tensor != 0 || o_.input_gradient;
      if (!g.wanted) continue;
      g.floats = p.batch * layers[i]->input_shapes()[k].numel();
      g.accumulate = written[g.tensor];
      g.converted = p.input_edge[i][k] >= 0;  // the edge's own gradient: never accumulated into
      written[g.tensor] = true;
      if (!g.accumulate || g.converted || p.kernels[i]->accumulates_input_grads()) continue;
      g.scratch = true;
      scratch = std::max(scratch, tensor_bytes(g.floats, p.dtype[g.tensor]));
      if (++scratch_inputs > 1)
        throw InternalError("layer '" + layers[i]->name() + "' needs two scratch gradients");
    }
  }
  return scratch;
}

KernelBinding Executor::binding(const Plan& p, size_t i) const {
  const Layer& l = *model_.layers()[i];
  auto view = [](void* data, Shape shape, std::shared_ptr<const Layout> layout = nullptr,
                 DType dtype = DType::f32) {
    TensorView v;
    v.data = data;
    v.shape = std::move(shape);
    v.dtype = dtype;
    v.layout = std::move(layout);
    return v;
  };
  // Parameter k's gradient: with several activation slots, where layer i writes it in the scratch;
  // else (or where another layer writes it: a bias a batchnorm takes) in the arena.
  const std::vector<TensorSlot>& slots = model_.params();
  auto grad_of = [&](size_t k) {
    const bool here = !p.grad_writer.empty() && p.grad_writer[k] == int(i);
    return view(here ? grad_scratch_ + p.grad_at[k] : grads_ + slots[k].offset, slots[k].shape);
  };
  KernelBinding b;
  b.optimizer_state.resize(state_.size());
  for (int k : model_.layer_params(i)) {
    const size_t j = size_t(k);
    const TensorSlot& t = slots[j];
    // A tied tensor: its owner runs backward after the layers that share it, and adds to what
    // they wrote (Model::params()).
    if (t.layer == int(i) && !t.shared_with.empty()) b.accumulate_param_grads = true;
    b.params.push_back(view(params_ + t.offset, t.shape));
    if (params_low_)
      b.params_low.push_back(
          view(static_cast<char*>(params_low_) + size_t(t.offset) * 2, t.shape, nullptr, params_low_dtype_));
    b.grads.push_back(grad_of(j));
    for (size_t k = 0; k < state_.size(); ++k)
      b.optimizer_state[k].push_back(view(state_[k] + t.offset, t.shape));
  }
  for (const TensorSlot& t : model_.buffers())
    if (t.layer == int(i)) b.buffers.push_back(view(buffers_ + t.offset, t.shape));
  const Shape out = batched(p.batch, l.output_shape());
  const std::vector<int>& from = model_.layer_inputs(i);
  for (size_t k = 0; k < from.size(); ++k) {
    const size_t t = size_t(from[k] + 1);
    const Shape in = batched(p.batch, l.input_shapes()[k]);
    const InputGrad& g = p.input_grads[i][k];
    const int e = p.input_edge[i][k];
    if (e >= 0) {  // the converted copy, plain
      const Edge& edge = p.edges[size_t(e)];
      b.inputs.push_back(view(arena(p) + edge.act, in, nullptr, edge.to));
      b.input_grads.push_back(view(g.wanted ? arena(p) + edge.grad : nullptr, in, nullptr, edge.to));
      b.accumulate_input_grads.push_back(0);
      continue;
    }
    b.inputs.push_back(view(arena(p) + p.act[t], in, p.layout[t], p.dtype[t]));
    // The model's input needs no gradient.
    char* dx = !g.wanted ? nullptr : arena(p) + (g.scratch ? p.scratch : p.grad[g.tensor]);
    b.input_grads.push_back(view(dx, in, p.layout[t], p.dtype[t]));
    b.accumulate_input_grads.push_back(g.accumulate && !g.scratch);
  }
  b.output = view(arena(p) + p.act[i + 1], out, p.layout[i + 1], p.dtype[i + 1]);
  b.output_grad = view(arena(p) + p.grad[i + 1], out, p.layout[i + 1], p.dtype[i + 1]);
  b.workspace = p.shared_workspace[i] ? shared_workspace_ : arena(p) + p.workspace[i];
  b.workspace_bytes = p.kernels[i]->workspace_bytes();
  if (p.kernels[i]->kept_workspace_bytes()) b.kept_workspace = arena(p) + p.kept[i];
  if (p.takes_bias_of[i] >= 0) {
    const size_t k = size_t(bias_slot(p.takes_bias_of[i]));
    b.taken_bias = view(params_ + slots[k].offset, slots[k].shape);
    b.taken_bias_grad = grad_of(k);
  }
  return b;
}

// Each layer's parameter gradients that its backward writes (its own, but a bias that a
// batchnorm takes; and the bias it takes, if it is that batchnorm) laid out in the scratch from 0,
// one piece per run contiguous in the arena, each piece aligned as the arena's tensors are.
int64_t Executor::plan_gradient_pieces(Plan& p) const {
  const std::vector<TensorSlot>& slots = model_.params();
  const int64_t align = int64_t(kArenaAlign / sizeof(float));
  std::vector<bool> taken(slots.size(), false);
  for (int owner : p.takes_bias_of)
    if (owner >= 0) taken[size_t(bias_slot(owner))] = true;
  p.grad_pieces.assign(p.kernels.size(), {});
  p.grad_at.assign(slots.size(), -1);
  p.grad_writer.assign(slots.size(), -1);
  int64_t most = 0;
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    if (!p.kernels[i]) continue;
    std::vector<size_t> written;
    for (size_t k = 0; k < slots.size(); ++k)
      if (slots[k].layer == int(i) && !taken[k]) written.push_back(k);
    if (p.takes_bias_of[i] >= 0) written.push_back(size_t(bias_slot(p.takes_bias_of[i])));
    std::vector<GradPiece>& pieces = p.grad_pieces[i];
    int64_t end = 0;
    for (size_t k : written) {
      p.grad_writer[k] = int(i);
      const int64_t at = slots[k].offset, n = slots[k].shape.numel();
      if (!pieces.empty() && pieces.back().arena + pieces.back().n == at) {
        p.grad_at[k] = pieces.back().scratch + pieces.back().n;  // the same run
        pieces.back().n += n;
      } else {
        p.grad_at[k] = (end + align - 1) / align * align;
        pieces.push_back({at, p.grad_at[k], n});
      }
      end = p.grad_at[k] + n;
    }
    most = std::max(most, end);
  }
  return most;
}

void Executor::gather_gradients(const Plan& p, size_t i, bool first) {
  if (p.grad_pieces.empty()) return;
  for (const GradPiece& g : p.grad_pieces[i])
    be_.convert(grads_ + g.arena, DType::f32, grad_scratch_ + g.scratch, DType::f32, g.n, !first);
}

// The index in model_.params() of layer i's bias, -1: none.
int Executor::bias_slot(int layer) const {
  const std::vector<TensorSlot>& slots = model_.params();
  for (size_t k = 0; k < slots.size(); ++k)
    if (slots[k].layer == layer && slots[k].spec.name == "bias") return int(k);
  return -1;
}

// The batchnorm that takes layer i's bias (activations in dtype dt), -1: none. Needs
// ExecutorOptions::fold_bias, a kernel registered with kBiasToBatchnorm that has a bias along its
// output's first axis, a batchnorm of one input with kTakesBias that is the only consumer of the
// layer's output (nobody else reads it without the bias), and no dtype conversion between them.
int Executor::bias_taker(size_t i, DType dt) const {
  const Registry& reg = Registry::global();
  if (!o_.fold_bias || !(reg.kernel_caps(model_.layers()[i]->type(), be_.name()) & kBiasToBatchnorm))
    return -1;
  if (bias_slot(int(i)) < 0 || !(reg.kernel_caps("batchnorm", be_.name()) & kTakesBias)) return -1;
  // batchnorm's channels are its input's first axis; a per-position dense adds its bias along the
  // last (a (L, units) output): batchnorm could not take it.
  const auto* dense = dynamic_cast<const Dense*>(model_.layers()[i].get());
  if (dense && dense->output_shape().rank() != 1) return -1;
  return sole_consumer(i, "batchnorm", dt);
}

// The layer that alone reads layer i's output (activations in dtype dt), if it is of `type`, has
// that one input and computes in dt (no dtype conversion between them); -1: none.
int Executor::sole_consumer(size_t i, const char* type, DType dt) const {
  const std::vector<int> next = model_.consumers(int(i));
  if (next.size() != 1) return -1;
  const size_t j = size_t(next[0]);
  if (model_.layers()[j]->type() != type || model_.layer_inputs(j).size() != 1 || layer_dtype(j, {dt}) != dt)
    return -1;
  return int(j);
}

// The input of layer i (planned so far in p: its kernel is p.kernels.back(), its dtype dt) whose
// memory its output may take, or -1: the kernel may write over it
// (LayerKernel::may_overwrite_input), the input is a layer's own output (not the model's input, a
// view or a fused relu's, which share a root's memory with others), layer i is its one consumer
// and takes it once, without a dtype conversion, in the output's dtype and layout, the memory
// holds the output, and the producer's backward does not read it
// (LayerKernel::backward_reads_output).
int Executor::overwritable_input(const Plan& p, size_t i, DType dt, const std::vector<size_t>& root,
                                 const std::vector<size_t>& out_size, size_t out_bytes) const {
  const LayerKernel& k = *p.kernels.back();
  const std::vector<int>& from = model_.layer_inputs(i);
  for (size_t j = 0; j < from.size(); ++j) {
    if (from[j] < 0 || std::count(from.begin(), from.end(), from[j]) != 1) continue;
    const size_t t = size_t(from[j] + 1);
    if (!k.may_overwrite_input(j) || p.input_edge[i][j] >= 0 || root[t] != t || !p.kernels[t - 1]) continue;
    if (p.dtype[t] != dt || p.layout[t] != k.output_layout() || out_size[t] < out_bytes) continue;
    if (model_.consumers(from[j]) != std::vector<int>{int(i)} || p.kernels[t - 1]->backward_reads_output())
      continue;
    return int(j);
  }
  return -1;
}

// The relu layer that layer i's kernel (activations in dtype dt) runs itself, -1: none. Fusing
// needs a kernel registered with kFusesRelu, a relu that is the only consumer of the layer's
// output (nobody else reads the pre-relu values or adds to their gradient), and no dtype
// conversion between them. The relu's output may have any number of consumers.
int Executor::fusable_relu(size_t i, DType dt) const {
  if (!(Registry::global().kernel_caps(model_.layers()[i]->type(), be_.name()) & kFusesRelu)) return -1;
  return sole_consumer(i, "relu", dt);
}

// The gelu layer in its tanh form that layer i's kernel runs itself, -1: none (as fusable_relu,
// for kernels registered with kFusesGeluTanh).
int Executor::fusable_gelu(size_t i, DType dt) const {
  if (!(Registry::global().kernel_caps(model_.layers()[i]->type(), be_.name()) & kFusesGeluTanh)) return -1;
  const int j = sole_consumer(i, "gelu", dt);
  if (j < 0 || !static_cast<const Activation&>(*model_.layers()[size_t(j)]).tanh_approx) return -1;
  return j;
}

// Whether layer i (whose output goes to the layers `next`) may write its output in its kernel's
// preferred layout: every layer that reads it runs a kernel that takes any input layout, in the
// dtype of the output (no conversion edge, which reads plain). A view that keeps the shape
// (identity) passes the layout on to the layers after it, which then read it too; a view that
// reshapes (flatten), the loss and the caller read plain: a layer whose output (or an identity of
// it) has no consumers, or goes to a flatten, writes plain. Several readers (their input
// gradients are summed element-wise) and readers of several inputs (add) need a producer whose
// layouts are permutations of the plain elements (kDenseLayout: channels-last on the GPU, not
// oneDNN's padded blockings).
bool Executor::output_layout_free(size_t i, const std::vector<int>& next,
                                  const std::vector<DType>& planned_dtype) const {
  if (o_.plain_layouts || next.empty()) return false;
  const Registry& reg = Registry::global();
  const auto& layers = model_.layers();
  std::vector<int> readers;
  std::function<bool(int)> collect = [&](int c) {
    const Layer& l = *layers[size_t(c)];
    if (!l.aliases_input()) {
      readers.push_back(c);
      return true;
    }
    const std::vector<int> after = model_.consumers(c);
    return l.output_shape() == l.input_shape() && !after.empty() &&
           std::all_of(after.begin(), after.end(), collect);
  };
  if (!std::all_of(next.begin(), next.end(), collect)) return false;
  const bool dense = reg.kernel_caps(layers[i]->type(), be_.name()) & kDenseLayout;
  if (readers.size() > 1 && !dense) return false;
  const DType dt = planned_dtype[i + 1];
  return std::all_of(readers.begin(), readers.end(), [&](int c) {
    const size_t j = size_t(c);
    return planned_dtype[j + 1] == dt && (model_.layer_inputs(j).size() == 1 || dense) &&
           reg.accepts_any_input_layout(layers[j]->type(), be_.name());
  });
}

// Each tensor's dtype (index 0: the model's input, f32; i + 1: layer i's output) as the plan loop
// gives it: a view or a fused relu has its input's, any other layer layer_dtype's.
std::vector<DType> Executor::plan_dtypes() const {
  const auto& layers = model_.layers();
  std::vector<DType> dtype(layers.size() + 1, DType::f32);
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::vector<int>& from = model_.layer_inputs(i);
    if (layers[i]->aliases_input()) {
      dtype[i + 1] = dtype[size_t(from[0] + 1)];
      continue;
    }
    std::vector<DType> in;
    for (int f : from) in.push_back(dtype[size_t(f + 1)]);
    dtype[i + 1] = layer_dtype(i, in);
  }
  return dtype;
}

// Under a 16-bit math, a layer that computes in 16 bits by itself (not a follower) but whose
// forward at the largest batch does fewer than ExecutorOptions::low_precision_min_flops.
bool Executor::too_small_for_low_precision(const Layer& l) const {
  if (be_.activation_dtype(o_.math) == DType::f32 || o_.low_precision_min_flops <= 0) return false;
  const unsigned caps = Registry::global().kernel_caps(l.type(), be_.name());
  if (!(caps & kLowPrecisionActivations) || (caps & (kFollowsInputDtype | kMemoryBound))) return false;
  const int64_t batch =
      o_.batch_sizes.empty() ? 1 : *std::max_element(o_.batch_sizes.begin(), o_.batch_sizes.end());
  return l.forward_flops() * double(batch) < o_.low_precision_min_flops;
}

// Activations of layer i's kernel: the backend's low-precision dtype where the kernel takes it
// (KernelCaps); layers that follow their inputs' dtype take it when all their inputs are in it.
DType Executor::layer_dtype(size_t i, const std::vector<DType>& inputs) const {
  const DType low = be_.activation_dtype(o_.math);
  const Layer& l = *model_.layers()[i];
  if (low == DType::f32 || l.aliases_input()) return DType::f32;
  const Registry& reg = Registry::global();
  const unsigned caps = reg.kernel_caps(l.type(), be_.name());
  if (!(caps & kLowPrecisionActivations)) return DType::f32;
  if ((caps & kLowPrecisionChannelsOf8) && l.output_shape().dims[0] % 8 != 0) return DType::f32;
  if (too_small_for_low_precision(l)) return DType::f32;
  if (caps & kFollowsInputDtype)
    return std::all_of(inputs.begin(), inputs.end(), [&](DType t) { return t == low; }) ? low : DType::f32;
  return low;
}

Executor::~Executor() {
  for (void* p : allocations_) be_.allocator().deallocate(p);
}

void* Executor::allocate(size_t bytes, const std::string& what) {
  void* p = be_.allocator().allocate(bytes, what);
  allocations_.push_back(p);
  memory_plan_.push_back({what, align_up(bytes)});
  return p;
}

std::vector<std::pair<std::string, size_t>> Executor::memory_breakdown() const {
  static const char* const kUses[kArenaUses] = {"layer outputs and the input batch",
                                                "dtype-converted copies",
                                                "activation gradients",
                                                "kernel workspaces",
                                                "transient kernel scratch (one region)",
                                                "labels and the scratch gradient"};
  const Plan* largest = nullptr;
  for (const auto& kv : plans_)
    if (!largest || kv.second->bytes > largest->bytes) largest = kv.second.get();
  std::vector<std::pair<std::string, size_t>> rows;
  for (const auto& m : memory_plan_) {
    if (!largest || m.what.rfind("activations and workspaces", 0) != 0) {
      rows.emplace_back(m.what, m.bytes);
      continue;
    }
    // The arena: its uses, per activation slot, largest first.
    const size_t slots = size_t(o_.activation_slots);
    std::vector<std::pair<std::string, size_t>> uses;
    for (int u = 0; u < kArenaUses; ++u) {
      if (!largest->used[u]) continue;
      std::string what = std::string("  ") + kUses[u];
      if (u == kUseGradients && largest->gradients_unshared > largest->used[u])
        what += " (shared by lifetime; " + format_bytes(largest->gradients_unshared * slots) + " unshared)";
      uses.emplace_back(what, largest->used[u] * slots);
    }
    std::stable_sort(uses.begin(), uses.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    rows.emplace_back(m.what, m.bytes);
    rows.insert(rows.end(), uses.begin(), uses.end());
  }
  return rows;
}

size_t Executor::planned_bytes() const {
  size_t n = 0;
  for (const auto& m : memory_plan_) n += m.bytes;
  return n;
}

char* Executor::arena(const Plan& p) const { return slot_arenas_[size_t(p.slot)]; }
LayerKernel* Executor::kernel(const Plan& p, size_t i) const { return p.kernels[i].get(); }

Executor::Plan& Executor::plan_for(int64_t batch, int slot) {
  auto it = plans_.find({slot, batch});
  if (it == plans_.end())
    throw InternalError("no plan for batch size " + std::to_string(batch) + " in activation slot " +
                        std::to_string(slot) + " (plans are made before the first step)");
  return *it->second;
}

}  // namespace trainer
