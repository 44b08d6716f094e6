// Synchronized batch normalization (device.sync_batchnorm, torch.nn.SyncBatchNorm), the formulas
// the CPU and CUDA kernels share. Per channel, with R replicas, replica r holding n_r rows of the
// global batch's N rows (n_r may be 0), m_r = n_r * S values of the channel (S: spatial size) and
// M = N * S in all.
//
// Forward (training). Each replica sums its values, s1_r = sum x and s2_r = sum x^2 (in double),
// and its count m_r; one all-reduce gives s1 = sum_r s1_r, s2, M. Then, on every replica alike:
//   mean = s1 / M, var = s2 / M - mean^2 (biased, clamped at 0), inv = 1 / sqrt(var + eps),
//   running_mean = (1 - m) running_mean + m mean, running_var = (1 - m) running_var + m var M/(M-1)
// (batchnorm_stats, batchnorm_running_update): the statistics of the whole batch, identical on
// every replica, so the running statistics stay identical too, also on a replica without rows.
//
// Backward: the gradient of the global loss. One process would train on L = (1/N) sum_i l_i.
// Replica r's loss is the mean over its shard, L_r = (1/n_r) sum_{i in r} l_i, and its gradients
// are multiplied by its shard weight w_r = n_r / N in the gradient all-reduce (StepScalars::
// shard_weight), so that sum_r w_r dL_r/dtheta = dL/dtheta wherever theta's gradient is a sum of
// per-replica terms. By induction from the loss backwards, the gradient g_i that replica r's
// backward pass hands this layer for its value i is dL/dy_i / w_r (true of the loss's gradient,
// (1/n_r) dl_i/dy_i against (1/N) dl_i/dy_i, and kept by every layer that acts on each row alone),
// and this layer must hand on dx_j = (dL/dx_j) / w_r in turn, to keep it for the layers before. Standard
// batchnorm calculus over the global batch, with u_i = dL/dy_i = w_r(i) g_i and xhat = (x - mean) inv:
//   dL/dbeta  = sum_i u_i                 = sum_r w_r (sum_{i in r} g_i)
//   dL/dgamma = sum_i u_i xhat_i          = sum_r w_r (sum_{i in r} g_i xhat_i)
//   dL/dx_j   = gamma inv (u_j - (1/M) sum_i u_i - xhat_j (1/M) sum_i u_i xhat_i)
// So dbeta and dgamma stay each replica's own sums over its rows (the weighted gradient
// all-reduce makes them the global ones), and with
//   D1 = sum_r w_r sum_{i in r} g_i,   D2 = sum_r w_r sum_{i in r} g_i (x_i - mean)
// (each replica weights its sums by its own w_r before one more all-reduce), and w_r M = m_r:
//   dx_j = (dL/dx_j) / w_r = gamma inv (g_j - D1 / m_r - (x_j - mean) inv^2 D2 / m_r)
// (batchnorm_sync_dx). Uneven shards (3 and 2 rows) are exact; even ones reduce to the usual
// 1/M; a replica of no rows computes no dx but still adds its zeros to both all-reduces. With one
// replica (w = 1, m_r = M) it is the unsynchronized batchnorm.
#pragma once

#include "lib/core/host_device.h"

namespace trainer {

struct BatchNormStats {
  float mean = 0.f, var = 0.f, inv = 0.f;  // var: biased; inv = 1 / sqrt(var + eps)
};

TRAINER_HD float batchnorm_inv(float var, float eps) { return div_rn(1.f, sqrt_rn(add_rn(var, eps))); }

// From the sums of a channel's n values (n > 0) and of their squares.
TRAINER_HD BatchNormStats batchnorm_stats(double sum, double sum_sq, double n, float eps) {
  BatchNormStats s;
  const double mean = sum / n;
  const double var = sum_sq / n - mean * mean;
  s.mean = float(mean);
  s.var = var > 0 ? float(var) : 0.f;
  s.inv = batchnorm_inv(s.var, eps);
  return s;
}

// PyTorch's momentum rule with the unbiased variance of n values (n = 1: the biased one).
TRAINER_HD void batchnorm_running_update(float& running_mean, float& running_var, const BatchNormStats& s,
                                         double n, float momentum) {
  const float unbias = n > 1 ? float(n) / float(n - 1) : 1.f;
  const float keep = sub_rn(1.f, momentum);
  running_mean = add_rn(mul_rn(keep, running_mean), mul_rn(momentum, s.mean));
  running_var = add_rn(mul_rn(keep, running_var), mul_rn(mul_rn(momentum, s.var), unbias));
}

// dx = scale (dy - shift - (x - mean) slope) on a replica of m_r = rows_here values of the channel
// (> 0), from the replicas' weighted sums D1 = weighted_dy, D2 = weighted_dy_xc (see above).
struct BatchNormDx {
  float scale = 0.f, shift = 0.f, slope = 0.f;
};
TRAINER_HD BatchNormDx batchnorm_sync_dx(double weighted_dy, double weighted_dy_xc, float gamma, float inv,
                                         double rows_here) {
  BatchNormDx d;
  d.scale = mul_rn(gamma, inv);
  d.shift = float(weighted_dy / rows_here);
  d.slope = float(double(inv) * double(inv) * weighted_dy_xc / rows_here);
  return d;
}

}  // namespace trainer
