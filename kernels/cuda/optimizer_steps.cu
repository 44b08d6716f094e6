// Every optimizer's step on the GPU: two kernel templates over the rules of
// lib/core/optimizer_formulas.h (the formulas the CPU steps run, explicitly rounded, so the bits
// agree) and one registration line per optimizer. Per-step values (learning rate, bias
// corrections, the non-finite flags) are read from device memory, so a captured step replays.
//   element-wise rules: one grid-stride pass, update() per parameter, the weight check fused;
//     gradient clipping's factor applied as each gradient is read, and the 16-bit copy of the
//     weights written beside them (OptimizerKernel::fuse_*): GPT-2 small's step lost the clip's
//     scaling pass and the copy's conversion pass over the 124M parameters
//   tensor-wise rules (LAMB): three launches, each reduction in a fixed order
//     1. a block per chunk (kernels/cpu's chunks): moments() per parameter, the chunk's sums of
//        w^2 and u^2
//     2. a block per tensor: its chunks' sums, the ratio
//     3. a block per chunk: apply() per parameter with its tensor's ratio, and the weight check
//   Chunks of 2048 floats keep a block's loop short (8 rounds of 256 threads): with 8192, the
//   latency of a small network's few long blocks cost ~40 us a step on an H100.
#include <algorithm>
#include <memory>
#include <type_traits>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/element_type.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/nonfinite_guard.cuh"
#include "lib/optim/optimizer.h"

namespace trainer {
namespace {

// The filters whose 16-bit copies are laid out (K, R, S, C) (LowFilterLayout), passed by value, and
// the arena's other ranges. Element i of filter j, at (k, c, r, s) of its (K, C, R, S) f32 tensor,
// goes to begin + (k R S + r S + s) C + c; elsewhere the copy's index is the weight's.
// Two ways to write them, by the arena's size (measured on an H200, bf16, steps/s against the
// first way alone):
//   - small arenas (fewer than kRowsFrom weights): a weight a thread, its filter found by a scan
//     of every filter, the copy written one scattered 2-byte value a thread. Latency-bound there:
//     cifar10_cnn (122 k weights) ran 4% slower by rows;
//   - large ones: a block per filter row k (its C R S weights, contiguous in both layouts), which
//     updates the row's weights in order, stages their 16-bit values in shared memory and writes
//     them (K, R, S, C) in order; then blocks of kPlainChunk weights over the other ranges.
//     resnet18_cifar's SGD step (11.2 M weights in 21 filters) 138 -> 85 us (1.02x the step),
//     vgg11_bn_cifar 1.01x. Smaller blocks (pieces of about 1024 weights of a row) took 136 us.
constexpr int kMaxLowFilters = 64;        // more: the executor relayouts after the step instead
constexpr int64_t kRowsFrom = 1 << 20;    // weights of an arena stepped by filter rows
constexpr int32_t kMaxRow = 24576;        // R S (C + 2): a row's staged 16-bit values in 48 KB
constexpr int64_t kPlainChunk = 256 * 8;  // weights a block outside the filters
struct LowFilters {
  int n = 0;       // filters, by begin
  int ranges = 0;  // the other ranges: [plain_begin, plain_end)
  int64_t begin[kMaxLowFilters], end[kMaxLowFilters];
  int32_t c[kMaxLowFilters], rs[kMaxLowFilters];
  int32_t first[kMaxLowFilters + 1];  // by rows: filter j's rows are blocks [first[j], first[j + 1])
  int64_t plain_begin[kMaxLowFilters + 1], plain_end[kMaxLowFilters + 1];
  int32_t plain_first[kMaxLowFilters + 2];  // after the filters' blocks; [ranges]: the total
  int32_t staged = 0;                       // the largest R S (C + 2): 16-bit values of shared memory
  bool by_rows = false;
};

__device__ __forceinline__ int64_t low_index(const LowFilters& f, int64_t i) {
  for (int j = 0; j < f.n; ++j)
    if (i >= f.begin[j] && i < f.end[j]) {
      const int32_t local = int32_t(i - f.begin[j]), crs = f.c[j] * f.rs[j];
      const int32_t k = local / crs, rem = local - k * crs;
      const int32_t c = rem / f.rs[j], rs = rem - c * f.rs[j];
      return f.begin[j] + int64_t(k) * crs + int64_t(rs) * f.c[j] + c;
    }
  return i;
}

// Weight i's update by the rule, its gradient scaled by the clip's factor as it is read (rounded as
// the clip's own pass rounds g * factor); every element-wise kernel below.
template <class Rule>
__device__ __forceinline__ void update_weight(const typename Rule::Coeffs& c, float* w, const float* g,
                                              const OptimizerState& st, int64_t i, float scale) {
  Rule::update(c, w[i], scale == 1.f ? g[i] : __fmul_rn(g[i], scale), st, i);
}

// Low: the 16-bit copy's element type (void: none). clip: the clipping record whose factor scales
// the gradients (null: none), rounded as the clip's own pass rounds g * factor.
template <class Rule, class Low>
__global__ void elementwise_kernel(Rule rule, float* w, const float* g, OptimizerState st, int64_t n,
                                   StepScalars* s, const ClipRecord* clip, Low* low, LowFilters filters) {
  const bool skip = (s->nonfinite & kNonfiniteSkipsUpdate) != 0;  // non-finite loss or gradient: no update
  const typename Rule::Coeffs c = rule.coeffs(s->lr, s->step, s->optim);
  const float scale = clip ? clip->last_scale : 1.f;
  bool bad = false;
  for (int64_t i = cuda::global_index(); i < n; i += cuda::grid_stride()) {
    if (!skip) {
      update_weight<Rule>(c, w, g, st, i, scale);
      if constexpr (!std::is_void_v<Low>) low[low_index(filters, i)] = cuda::from_f32<Low>(w[i]);
    }
    bad |= nonfinite_bits(w[i]);
  }
  cuda::flag_nonfinite_weights(bad, s);
}

// The same update with (K, R, S, C) copies of the filters by rows (LowFilters above): block
// b < first[n] is a filter row, the others chunks of the other ranges.
template <class Rule, class Low>
__global__ void __launch_bounds__(256)
    elementwise_filters_kernel(Rule rule, float* w, const float* g, OptimizerState st, StepScalars* s,
                               const ClipRecord* clip, Low* low, LowFilters f) {
  extern __shared__ __align__(16) unsigned char staged_bytes[];
  Low* staged = reinterpret_cast<Low*>(staged_bytes);  // [rs][c], rows of C + 2 (fewer bank conflicts)
  const bool skip = (s->nonfinite & kNonfiniteSkipsUpdate) != 0;
  const typename Rule::Coeffs c = rule.coeffs(s->lr, s->step, s->optim);
  const float scale = clip ? clip->last_scale : 1.f;
  const int32_t b = int32_t(blockIdx.x);
  bool bad = false;
  if (b < f.first[f.n]) {
    int j = 0;
    while (b >= f.first[j + 1]) ++j;
    const int32_t C = f.c[j], RS = f.rs[j], crs = C * RS, pitch = C + 2;
    const int64_t row = f.begin[j] + int64_t(b - f.first[j]) * crs;  // row k's first weight, either layout
    for (int32_t e = int32_t(threadIdx.x); e < crs; e += 256) {      // e = c RS + rs
      const int64_t i = row + e;
      if (!skip) {
        update_weight<Rule>(c, w, g, st, i, scale);
        const int32_t ch = e / RS;
        staged[(e - ch * RS) * pitch + ch] = cuda::from_f32<Low>(w[i]);
      }
      bad |= nonfinite_bits(w[i]);
    }
    if (!skip) {  // the same for every thread
      __syncthreads();
      for (int32_t e = int32_t(threadIdx.x); e < crs; e += 256) {  // e = rs C + c
        const int32_t rs = e / C;
        low[row + e] = staged[rs * pitch + (e - rs * C)];
      }
    }
  } else {
    int r = 0;
    while (b >= f.plain_first[r + 1]) ++r;
    const int64_t begin = f.plain_begin[r] + int64_t(b - f.plain_first[r]) * kPlainChunk;
    const int64_t end = begin + kPlainChunk < f.plain_end[r] ? begin + kPlainChunk : f.plain_end[r];
    for (int64_t i = begin + threadIdx.x; i < end; i += 256) {
      if (!skip) {
        update_weight<Rule>(c, w, g, st, i, scale);
        low[i] = cuda::from_f32<Low>(w[i]);
      }
      bad |= nonfinite_bits(w[i]);
    }
  }
  cuda::flag_nonfinite_weights(bad, s);
}

constexpr int64_t kChunk = 2048;  // floats per partial sum (the CPU step's too)
constexpr int kBlock = 256;

// Sums a[threadIdx.x] and b[threadIdx.x] over the block in a fixed order; every thread gets them.
__device__ void block_sums(double* a, double* b, double& sa, double& sb) {
  for (int half = kBlock / 2; half > 0; half /= 2) {
    __syncthreads();
    if (int(threadIdx.x) < half) {
      a[threadIdx.x] += a[threadIdx.x + half];
      b[threadIdx.x] += b[threadIdx.x + half];
    }
  }
  __syncthreads();
  sa = a[0];
  sb = b[0];
}

template <class Rule>
__global__ void __launch_bounds__(kBlock)
    tensorwise_moments(Rule rule, float* w, const float* g, OptimizerState st, const TensorChunk* chunks,
                       double2* sums, StepScalars* s) {
  if (s->nonfinite & kNonfiniteSkipsUpdate) return;  // the same for every thread
  __shared__ double a[kBlock], b[kBlock];
  const typename Rule::Coeffs c = rule.coeffs(s->lr, s->step, s->optim);
  const TensorChunk ch = chunks[blockIdx.x];
  double w_sq = 0, u_sq = 0;
  for (int64_t i = ch.begin + threadIdx.x; i < ch.end; i += kBlock) {
    const float u = Rule::moments(c, w[i], g[i], st, i);
    w_sq += double(w[i]) * double(w[i]);
    u_sq += double(u) * double(u);
  }
  a[threadIdx.x] = w_sq;
  b[threadIdx.x] = u_sq;
  block_sums(a, b, w_sq, u_sq);
  if (threadIdx.x == 0) sums[blockIdx.x] = make_double2(w_sq, u_sq);
}

// One block per tensor: first[blockIdx.x] is its first chunk; its ratio goes to ratio[first].
template <class Rule>
__global__ void __launch_bounds__(kBlock)
    tensorwise_ratio(const int32_t* first, const TensorChunk* chunks, const double2* sums, float* ratio,
                     StepScalars* s) {
  if (s->nonfinite & kNonfiniteSkipsUpdate) return;  // the same for every thread
  __shared__ double a[kBlock], b[kBlock];
  const TensorChunk ch = chunks[first[blockIdx.x]];
  double w_sq = 0, u_sq = 0;
  for (int j = ch.first + int(threadIdx.x); j < ch.first + ch.count; j += kBlock) {
    w_sq += sums[j].x;
    u_sq += sums[j].y;
  }
  a[threadIdx.x] = w_sq;
  b[threadIdx.x] = u_sq;
  block_sums(a, b, w_sq, u_sq);
  if (threadIdx.x == 0) ratio[ch.first] = Rule::ratio(w_sq, u_sq);
}

template <class Rule>
__global__ void __launch_bounds__(kBlock)
    tensorwise_apply(Rule rule, float* w, OptimizerState st, const TensorChunk* chunks, const float* ratio,
                     StepScalars* s) {
  const bool skip = (s->nonfinite & kNonfiniteSkipsUpdate) != 0;
  const TensorChunk ch = chunks[blockIdx.x];
  bool bad = false;
  if (!skip) {
    const typename Rule::Coeffs c = rule.coeffs(s->lr, s->step, s->optim);
    const float r = ratio[ch.first];
    for (int64_t i = ch.begin + threadIdx.x; i < ch.end; i += kBlock) {
      Rule::apply(c, w[i], st, i, r);
      bad |= nonfinite_bits(w[i]);
    }
  } else {
    for (int64_t i = ch.begin + threadIdx.x; i < ch.end; i += kBlock) bad |= nonfinite_bits(w[i]);
  }
  cuda::flag_nonfinite_weights(bad, s);
}

template <class Rule>
class ElementwiseStep : public OptimizerKernel {
 public:
  explicit ElementwiseStep(const OptimizerSpec& spec)
      : rule_(spec.hyper), n_(spec.n), slots_(rule_.slots()), be_(static_cast<CudaBackend&>(*spec.backend)) {}
  void step(float* w, const float* g, float* const* state, StepScalars* s) override {
    if (n_ <= 0) return;
    const OptimizerState st = OptimizerState::of(state, slots_);
    const auto launch = [&](auto* low) {
      using Low = std::remove_pointer_t<decltype(low)>;
      if constexpr (!std::is_void_v<Low>) {
        if (filters_.by_rows) {
          elementwise_filters_kernel<Rule, Low>
              <<<unsigned(filters_.plain_first[filters_.ranges]), 256, size_t(filters_.staged) * sizeof(Low),
                 be_.stream()>>>(rule_, w, g, st, s, clip_, low, filters_);
          return;
        }
      }
      elementwise_kernel<Rule, Low><<<cuda::grid_for(n_), cuda::kThreads, 0, be_.stream()>>>(
          rule_, w, g, st, n_, s, clip_, low, filters_);
    };
    if (low_dtype_ == DType::bf16)
      launch(static_cast<__nv_bfloat16*>(low_));
    else if (low_dtype_ == DType::f16)
      launch(static_cast<__half*>(low_));
    else
      launch(static_cast<void*>(nullptr));
    CUDA_CHECK_LAUNCH();
  }
  bool fuse_grad_scale(const ClipRecord* record) override {
    clip_ = record;
    return true;
  }
  bool fuse_low_precision_copy(void* low, DType t, const std::vector<LowFilterLayout>& filters) override {
    if (t == DType::f32 || filters.size() > size_t(kMaxLowFilters)) return false;
    std::vector<LowFilterLayout> sorted = filters;
    std::sort(sorted.begin(), sorted.end(),
              [](const LowFilterLayout& a, const LowFilterLayout& b) { return a.offset < b.offset; });
    LowFilters f{};
    int64_t blocks = 0, covered = 0;
    const auto plain = [&](int64_t begin, int64_t end) {  // a range outside the filters
      if (end <= begin) return;
      f.plain_begin[f.ranges] = begin;
      f.plain_end[f.ranges] = end;
      f.plain_first[f.ranges++] = int32_t(blocks);
      blocks += (end - begin + kPlainChunk - 1) / kPlainChunk;
    };
    for (const LowFilterLayout& l : sorted) {
      const int64_t rs = l.r * l.s, crs = l.c * rs, staged = rs * (l.c + 2);
      // Filters in order without overlap; index arithmetic in 32 bits; rows' blocks counted in 32 bits.
      if (crs <= 0 || l.offset < covered || l.offset + l.k * crs > n_ || l.k * crs >= (int64_t(1) << 31) ||
          blocks + l.k >= (1 << 30))
        return false;
      f.begin[f.n] = l.offset;
      f.end[f.n] = l.offset + l.k * crs;
      f.c[f.n] = int32_t(l.c);
      f.rs[f.n] = int32_t(rs);
      f.first[f.n++] = int32_t(blocks);
      f.staged = int32_t(std::max<int64_t>(f.staged, std::min<int64_t>(staged, kMaxRow + 1)));
      blocks += l.k;
      covered = f.end[f.n - 1];
    }
    f.first[f.n] = int32_t(blocks);
    covered = 0;
    for (int j = 0; j < f.n; ++j) {
      plain(covered, f.begin[j]);
      covered = f.end[j];
    }
    plain(covered, n_);
    f.plain_first[f.ranges] = int32_t(blocks);
    // By rows where the arena is large and every row's staged copy fits in shared memory.
    f.by_rows = f.n > 0 && n_ >= kRowsFrom && f.staged <= kMaxRow && blocks < (int64_t(1) << 31) - 1;
    low_ = low;
    low_dtype_ = t;
    filters_ = f;
    return true;
  }

 private:
  const ClipRecord* clip_ = nullptr;
  void* low_ = nullptr;
  DType low_dtype_ = DType::f32;  // f32: no copy
  LowFilters filters_{};
  Rule rule_;
  int64_t n_;
  int slots_;
  CudaBackend& be_;
};

template <class Rule>
class TensorwiseStep : public OptimizerKernel {
 public:
  explicit TensorwiseStep(const OptimizerSpec& spec)
      : rule_(spec.hyper),
        slots_(rule_.slots()),
        be_(static_cast<CudaBackend&>(*spec.backend)),
        chunks_(tensor_chunks(spec, kChunk)) {
    for (size_t k = 0; k < chunks_.size(); ++k)
      if (chunks_[k].first == int32_t(k)) first_.push_back(int32_t(k));
  }
  // Scratch: the chunk table, the tensors' first chunks, the chunk sums and the ratios (per
  // chunk index: a tensor's at its first chunk's), each from a 16-byte boundary.
  size_t scratch_bytes() const override { return offset(4); }
  // The two tables go to the device once.
  void bind(void* scratch) override {
    char* p = static_cast<char*>(scratch);
    table_ = reinterpret_cast<TensorChunk*>(p);
    first_dev_ = reinterpret_cast<int32_t*>(p + offset(1));
    sums_ = reinterpret_cast<double2*>(p + offset(2));
    ratio_ = reinterpret_cast<float*>(p + offset(3));
    if (chunks_.empty()) return;
    be_.copy_to_device(table_, chunks_.data(), chunks_.size() * sizeof(TensorChunk));
    be_.copy_to_device(first_dev_, first_.data(), first_.size() * sizeof(int32_t));
  }
  void step(float* w, const float* g, float* const* state, StepScalars* s) override {
    if (chunks_.empty()) return;
    if (!table_) throw InternalError("an optimizer step ran before its scratch was bound");
    const OptimizerState st = OptimizerState::of(state, slots_);
    const unsigned blocks = unsigned(chunks_.size()), tensors = unsigned(first_.size());
    tensorwise_moments<Rule><<<blocks, kBlock, 0, be_.stream()>>>(rule_, w, g, st, table_, sums_, s);
    CUDA_CHECK_LAUNCH();
    tensorwise_ratio<Rule><<<tensors, kBlock, 0, be_.stream()>>>(first_dev_, table_, sums_, ratio_, s);
    CUDA_CHECK_LAUNCH();
    tensorwise_apply<Rule><<<blocks, kBlock, 0, be_.stream()>>>(rule_, w, st, table_, ratio_, s);
    CUDA_CHECK_LAUNCH();
  }

 private:
  // Where scratch part k starts (0: table, 1: first chunks, 2: sums, 3: ratios; 4: the end).
  size_t offset(int k) const {
    const size_t n = chunks_.size();
    const size_t bytes[4] = {n * sizeof(TensorChunk), first_.size() * sizeof(int32_t), n * sizeof(double2),
                             n * sizeof(float)};
    size_t off = 0;
    for (int i = 0; i < k; ++i) off += (bytes[i] + 15) / 16 * 16;
    return off;
  }
  Rule rule_;
  int slots_;
  CudaBackend& be_;
  std::vector<TensorChunk> chunks_;
  std::vector<int32_t> first_;
  TensorChunk* table_ = nullptr;
  int32_t* first_dev_ = nullptr;
  double2* sums_ = nullptr;
  float* ratio_ = nullptr;
};

template <class Rule>
void add(OptimizerRegistry& r) {
  r.add_kernel(Rule::kName, "cuda", [](const OptimizerSpec& spec) -> std::unique_ptr<OptimizerKernel> {
    if constexpr (Rule::kTensorwise)
      return std::make_unique<TensorwiseStep<Rule>>(spec);
    else
      return std::make_unique<ElementwiseStep<Rule>>(spec);
  });
}

}  // namespace

void register_cuda_optimizers(OptimizerRegistry& r) {
  for_each_optimizer_rule([&](auto rule) { add<typename decltype(rule)::type>(r); });
}

}  // namespace trainer
