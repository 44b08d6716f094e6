// lstm / gru on the GPU (lib/layers/recurrent.h), the CPU kernel's algorithm
// (kernels/cpu/recurrent_cpu.cc) with the recursion fused: cuBLAS for x W_ih^T over all B L rows
// and the weights' gradients over all rows; one launch runs every step of both directions, with
// W_hh on chip where it fits (recurrent_cluster.cuh: a cluster of blocks shares it) and read from
// L2 every step where it does not (recurrent.cuh). f32 activations (in 16-bit models the executor
// converts at the layer's edges); the big products in f32, TF32 under `math: tf32`.
//   kept from forward to backward, per direction: the activated gates (B, L, G H), h (B, L, H),
//   lstm's c or gru's hn (B, L, H)
//   transient, per direction: the input products, then their gradients dAx (B, L, G H); gru's
//   hidden-side gradients dAh (B, L, G H); W_hh^T (H, G H) for the L2 kernels; and h_{t-1} of
//   every step (B, L, H), the bias sums' scratch
#include "kernels/cuda/bias.cuh"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/recurrent.cuh"
#include "kernels/cuda/recurrent_cluster.cuh"
#include "lib/layers/recurrent.h"

namespace trainer {
namespace {

class RecurrentCuda : public LayerKernel {
 public:
  RecurrentCuda(const Recurrent& l, const KernelContext& ctx)
      : be_(cuda_of(ctx)),
        math_(ctx.math == MathMode::tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
        lstm_(l.cell == Recurrent::Cell::lstm),
        seq_(l.return_sequences),
        dirs_(l.directions()),
        b_(ctx.batch),
        l_(l.length()),
        d_(l.features()),
        h_(l.units),
        g_(l.gates() * l.units),
        split_(cuda::bias_grad_split(ctx.batch * l.length(), l.gates() * l.units, 1, true, DType::f32)) {
    pass_.batch = b_;
    pass_.length = l_;
    pass_.units = h_;
    pass_.lstm = lstm_;
    pass_.directions = int(dirs_);
    cluster_ = cuda::plan_recurrent_cluster(pass_, be_.device());
    if (!cluster_.blocks) {
      pass_.samples = cuda::recurrent_samples(b_, h_);
      cuda::prepare_recurrent(pass_);
    }
  }

  size_t kept_workspace_bytes() const override { return floats(dirs_ * per_direction()); }
  size_t workspace_bytes() const override {
    return floats(scratch_floats()) + cuda::bias_grad_scratch_bytes(split_);
  }
  bool workspace_is_transient() const override { return true; }

  void bind(const KernelBinding& b) override {
    a_ = BoundActivations(b);
    pass_.ids = b.inputs.size() > 1 ? b.input(1).f32() : nullptr;
    dids_ = b.input_grads.size() > 1 ? b.input_grad(1).f32() : nullptr;
    for (int64_t dir = 0; dir < dirs_; ++dir) {
      Dir& d = dir_[dir];
      d.wih = b.param(4 * dir).f32();
      d.whh = b.param(4 * dir + 1).f32();
      d.bih = b.param(4 * dir + 2).f32();
      d.bhh = b.param(4 * dir + 3).f32();
      d.dwih = b.grad(4 * dir).f32();
      d.dwhh = b.grad(4 * dir + 1).f32();
      d.dbih = b.grad(4 * dir + 2).f32();
      d.dbhh = b.grad(4 * dir + 3).f32();
      float* kept = static_cast<float*>(b.kept_workspace) + dir * per_direction();
      d.gate = kept;
      d.h = d.gate + rows() * g_;
      d.s = d.h + rows() * h_;
    }
    float* w = static_cast<float*>(b.workspace);
    for (int64_t dir = 0; dir < dirs_; ++dir) {
      Dir& d = dir_[dir];
      d.ax = w;
      w += rows() * g_;
      d.ah = lstm_ ? d.ax : w;
      if (!lstm_) w += rows() * g_;
      if (!cluster_.blocks) {
        d.wt = w;
        w += h_ * g_;
      }
    }
    hprev_ = w;
    // After the floats, 8-byte aligned (scratch_floats() is even).
    sums_ = reinterpret_cast<double*>(static_cast<float*>(b.workspace) + scratch_floats());
  }

  void forward(bool) override {
    const cudaStream_t st = be_.stream();
    CUBLAS_CHECK(cublasSetMathMode(be_.cublas(), math_));
    cuda::RecurrentTensors t[2];
    for (int64_t dir = 0; dir < dirs_; ++dir) {
      const Dir& d = dir_[dir];
      gemm('N', 'T', rows(), g_, d_, a_.x, d_, d.wih, d_, 0.f, d.ax, g_);
      t[dir].ax = d.ax;
      t[dir].w = d.whh;
      t[dir].bih = d.bih;
      t[dir].bhh = d.bhh;
      t[dir].gate = d.gate;
      t[dir].h = d.h;
      t[dir].state = d.s;
      if (!cluster_.blocks) {
        cuda::launch_recurrent_transpose(d.whh, g_, h_, d.wt, st);
        t[dir].w = d.wt;
      }
    }
    if (cluster_.blocks)
      cuda::launch_recurrent_forward_cluster(pass_, cluster_, t, st);
    else
      cuda::launch_recurrent_forward(pass_, t, st);
    for (int64_t dir = 0; dir < dirs_; ++dir)
      cuda::launch_recurrent_output(dir_[dir].h, pass_.ids, b_, l_, h_, seq_, dir == 0 ? l_ - 1 : 0, a_.y,
                                    dirs_ * h_, dir * h_, st);
  }

  void backward() override {
    const cudaStream_t st = be_.stream();
    CUBLAS_CHECK(cublasSetMathMode(be_.cublas(), math_));
    const int64_t H = h_, G = g_;
    cuda::RecurrentTensors t[2];
    for (int64_t dir = 0; dir < dirs_; ++dir) {
      const Dir& d = dir_[dir];
      t[dir].w = d.whh;
      t[dir].gate = d.gate;
      t[dir].h = d.h;
      t[dir].state = d.s;
      t[dir].dax = d.ax;
      t[dir].dah = lstm_ ? nullptr : d.ah;
    }
    if (cluster_.blocks)
      cuda::launch_recurrent_backward_cluster(pass_, cluster_, t, a_.dy, dirs_ * H, seq_, st);
    else
      cuda::launch_recurrent_backward(pass_, t, a_.dy, dirs_ * H, seq_, st);
    for (int64_t dir = 0; dir < dirs_; ++dir) {
      const Dir& d = dir_[dir];
      cuda::launch_recurrent_shift(d.h, b_, l_, H, dir == 0 ? -1 : 1, hprev_, st);
      gemm('T', 'N', G, d_, rows(), d.ax, G, a_.x, d_, 0.f, d.dwih, d_);
      gemm('T', 'N', G, H, rows(), d.ah, G, hprev_, H, 0.f, d.dwhh, H);
      cuda::launch_bias_grad(split_, DType::f32, d.ax, d.dbih, sums_, st);
      cuda::launch_bias_grad(split_, DType::f32, d.ah, d.dbhh, sums_, st);
      if (a_.dx) gemm('N', 'N', rows(), d_, G, d.ax, G, d.wih, d_, dir == 0 ? 0.f : 1.f, a_.dx, d_);
    }
    if (dids_) CUDA_CHECK(cudaMemsetAsync(dids_, 0, floats(b_ * l_), st));  // token ids: no gradient
  }

 private:
  struct Dir {
    const float *wih = nullptr, *whh = nullptr, *bih = nullptr, *bhh = nullptr;
    float *dwih = nullptr, *dwhh = nullptr, *dbih = nullptr, *dbhh = nullptr;
    float *gate = nullptr, *h = nullptr, *s = nullptr;  // kept: gates, h, and c (lstm) or hn (gru)
    float *ax = nullptr, *ah = nullptr, *wt = nullptr;  // transient: dAx (ax), dAh, W_hh^T (L2 kernels)
  };
  static size_t floats(int64_t n) { return size_t(n) * sizeof(float); }
  int64_t rows() const { return b_ * l_; }
  int64_t per_direction() const { return rows() * (g_ + 2 * h_); }
  int64_t scratch_floats() const {
    const int64_t n = dirs_ * (rows() * g_ * (lstm_ ? 1 : 2) + (cluster_.blocks ? 0 : h_ * g_)) + rows() * h_;
    return n + (n & 1);
  }
  // Row-major C (m, n) = op(A) op(B) + beta C in f32, ld* the row strides. cuBLAS is column-major:
  // it computes C^T = op(B)^T op(A)^T.
  void gemm(char ta, char tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
            int64_t ldb, float beta, float* c, int64_t ldc) const {
    const float alpha = 1.f;
    CUBLAS_CHECK(cublasSgemm(be_.cublas(), tb == 'T' ? CUBLAS_OP_T : CUBLAS_OP_N,
                             ta == 'T' ? CUBLAS_OP_T : CUBLAS_OP_N, int(n), int(m), int(k), &alpha, b,
                             int(ldb), a, int(lda), &beta, c, int(ldc)));
  }

  CudaBackend& be_;
  cublasMath_t math_;
  bool lstm_, seq_;
  int64_t dirs_, b_, l_, d_, h_, g_;
  cuda::BiasGradSplit split_;
  cuda::RecurrentPass pass_;
  cuda::RecurrentCluster cluster_;  // blocks 0: W_hh does not fit on chip, the L2 kernels run
  BoundActivations a_;
  Dir dir_[2];
  float* hprev_ = nullptr;
  double* sums_ = nullptr;
  float* dids_ = nullptr;  // the mask's ids' gradient (zeros), or null
};

}  // namespace

std::unique_ptr<LayerKernel> make_recurrent_cuda(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<RecurrentCuda>(static_cast<const Recurrent&>(l), ctx);
}

}  // namespace trainer
