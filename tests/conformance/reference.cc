#include "tests/conformance/reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "lib/core/counter_rng.h"
#include "lib/layers/activation.h"
#include "lib/layers/attention.h"
#include "lib/layers/batchnorm.h"
#include "lib/layers/conv1d.h"
#include "lib/layers/conv2d.h"
#include "lib/layers/dense.h"
#include "lib/layers/dropout.h"
#include "lib/layers/embedding.h"
#include "lib/layers/global_pool.h"
#include "lib/layers/layer_norm.h"
#include "lib/layers/pool1d.h"
#include "lib/layers/pool2d.h"
#include "lib/layers/recurrent.h"

namespace trainer::conformance {

std::vector<double> reference_dense(ReferenceInput& in) {
  const auto& l = static_cast<const Dense&>(*in.layer);
  const int64_t I = l.in_features(), U = l.units;
  const std::vector<double>& w = in.params[0];  // (U, I)
  std::vector<double> y;
  for (int64_t b = 0; b < in.batch * l.rows(); ++b)  // per_position: each row
    for (int64_t u = 0; u < U; ++u) {
      double acc = l.use_bias ? in.params[1][size_t(u)] : 0.0;
      for (int64_t i = 0; i < I; ++i) acc += in.x[size_t(b * I + i)] * w[size_t(u * I + i)];
      y.push_back(acc);
    }
  return y;
}

std::vector<double> reference_conv2d(ReferenceInput& in) {
  const auto& c = static_cast<const Conv2d&>(*in.layer);
  const Shape& s = c.input_shape();
  const int64_t C = s[0], H = s[1], W = s[2], F = c.filters;
  const int64_t CG = C / c.groups, FG = F / c.groups;  // channels and filters per group
  const int64_t OH = c.output_shape()[1], OW = c.output_shape()[2];
  const std::vector<double>& w = in.params[0];  // (F, C / groups, kh, kw)
  std::vector<double> y;
  for (int64_t b = 0; b < in.batch; ++b)
    for (int64_t f = 0; f < F; ++f)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = c.use_bias ? in.params[1][size_t(f)] : 0.0;
          for (int64_t gc = 0; gc < CG; ++gc)  // filter f sees its group's channels only
            for (int64_t i = 0; i < c.kh; ++i)
              for (int64_t j = 0; j < c.kw; ++j) {
                const int64_t ch = f / FG * CG + gc;
                const int64_t ih = oh * c.sh - c.wh.pad_begin + i, iw = ow * c.sw - c.ww.pad_begin + j;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                acc += in.x[size_t(((b * C + ch) * H + ih) * W + iw)] *
                       w[size_t(((f * CG + gc) * c.kh + i) * c.kw + j)];
              }
          y.push_back(acc);
        }
  return y;
}

std::vector<double> reference_conv1d(ReferenceInput& in) {
  const auto& c = static_cast<const Conv1d&>(*in.layer);
  const int64_t C = c.input_shape()[0], L = c.input_shape()[1], F = c.filters;
  const int64_t OL = c.output_shape()[1];
  const std::vector<double>& w = in.params[0];  // (F, C, k)
  std::vector<double> y;
  for (int64_t b = 0; b < in.batch; ++b)
    for (int64_t f = 0; f < F; ++f)
      for (int64_t o = 0; o < OL; ++o) {
        double acc = c.use_bias ? in.params[1][size_t(f)] : 0.0;
        for (int64_t ch = 0; ch < C; ++ch)
          for (int64_t j = 0; j < c.k; ++j) {
            const int64_t i = o * c.stride - c.w.pad_begin + j;
            if (i >= 0 && i < L)
              acc += in.x[size_t((b * C + ch) * L + i)] * w[size_t((f * C + ch) * c.k + j)];
          }
        y.push_back(acc);
      }
  return y;
}

namespace {

// One pooling window over the in-bounds positions [begin, end) of each axis.
double pool_window(const std::vector<double>& x, size_t base, int64_t h0, int64_t h1, int64_t w0, int64_t w1,
                   int64_t W, bool max) {
  double mx = -std::numeric_limits<double>::infinity(), sum = 0;
  for (int64_t i = h0; i < h1; ++i)
    for (int64_t j = w0; j < w1; ++j) {
      const double v = x[base + size_t(i * W + j)];
      mx = std::max(mx, v);
      sum += v;
    }
  return max ? mx : sum / double((h1 - h0) * (w1 - w0));
}

}  // namespace

std::vector<double> reference_pool2d(ReferenceInput& in) {
  const auto& p = static_cast<const Pool2d&>(*in.layer);
  const int64_t C = p.input_shape()[0], H = p.input_shape()[1], W = p.input_shape()[2];
  const int64_t OH = p.output_shape()[1], OW = p.output_shape()[2];
  std::vector<double> y;
  for (int64_t bc = 0; bc < in.batch * C; ++bc)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t h = oh * p.sh - p.wh.pad_begin, w = ow * p.sw - p.ww.pad_begin;
        y.push_back(pool_window(in.x, size_t(bc * H * W), std::max<int64_t>(h, 0), std::min(h + p.ph, H),
                                std::max<int64_t>(w, 0), std::min(w + p.pw, W), W,
                                p.kind == Pool2d::Kind::max));
      }
  return y;
}

std::vector<double> reference_pool1d(ReferenceInput& in) {
  const auto& p = static_cast<const Pool1d&>(*in.layer);
  const int64_t C = p.input_shape()[0], L = p.input_shape()[1], OL = p.output_shape()[1];
  std::vector<double> y;
  for (int64_t bc = 0; bc < in.batch * C; ++bc)
    for (int64_t o = 0; o < OL; ++o) {
      const int64_t i = o * p.stride - p.w.pad_begin;
      y.push_back(pool_window(in.x, size_t(bc * L), 0, 1, std::max<int64_t>(i, 0), std::min(i + p.size, L), L,
                              p.kind == Pool1d::Kind::max));
    }
  return y;
}

// Plane (b, c)'s position i: x[(b S + i) C + c] with channels_last, else x[(b C + c) S + i].
namespace {
double plane_value(const ReferenceInput& in, int64_t b, int64_t c, int64_t i) {
  const auto& pool = static_cast<const GlobalPool&>(*in.layer);
  const int64_t C = pool.channels(), S = pool.spatial();
  return in.x[size_t(pool.channels_last ? (b * S + i) * C + c : (b * C + c) * S + i)];
}
}  // namespace

std::vector<double> reference_global_avg_pool(ReferenceInput& in) {
  const auto& pool = static_cast<const GlobalPool&>(*in.layer);
  const int64_t C = pool.channels(), S = pool.spatial();
  std::vector<double> y;
  for (int64_t bc = 0; bc < in.batch * C; ++bc) {
    double sum = 0;
    for (int64_t i = 0; i < S; ++i) sum += plane_value(in, bc / C, bc % C, i);
    y.push_back(sum / double(S));
  }
  return y;
}

std::vector<double> reference_global_max_pool(ReferenceInput& in) {
  const auto& pool = static_cast<const GlobalPool&>(*in.layer);
  const int64_t C = pool.channels(), S = pool.spatial();
  std::vector<double> y;
  for (int64_t bc = 0; bc < in.batch * C; ++bc) {
    double m = plane_value(in, bc / C, bc % C, 0);
    for (int64_t i = 1; i < S; ++i) m = std::max(m, plane_value(in, bc / C, bc % C, i));
    y.push_back(m);
  }
  return y;
}

// x holds every input's batch one after another (tests/conformance/conformance_table.h).
std::vector<double> reference_add(ReferenceInput& in) {
  const size_t n = size_t(in.batch * in.layer->output_shape().numel());
  std::vector<double> y(n, 0.0);
  for (size_t k = 0; k < in.layer->input_shapes().size(); ++k)
    for (size_t i = 0; i < n; ++i) y[i] += in.x[k * n + i];
  return y;
}

std::vector<double> reference_concat(ReferenceInput& in) {
  std::vector<double> y;
  const auto& shapes = in.layer->input_shapes();
  for (int64_t b = 0; b < in.batch; ++b) {
    size_t start = 0;  // of input k's batch in x
    for (const Shape& s : shapes) {
      const size_t per = size_t(s.numel());
      y.insert(y.end(), in.x.begin() + long(start + size_t(b) * per),
               in.x.begin() + long(start + size_t(b + 1) * per));
      start += size_t(in.batch) * per;
    }
  }
  return y;
}

std::vector<double> reference_activation(ReferenceInput& in) {
  const auto& a = static_cast<const Activation&>(*in.layer);
  std::vector<double> y(in.x.size());
  if (a.kind == ActivationKind::softmax || a.kind == ActivationKind::log_softmax) {
    const int64_t F = a.input_shape().numel();
    for (int64_t b = 0; b < in.batch; ++b) {
      const double* x = in.x.data() + b * F;
      double mx = x[0], z = 0;
      for (int64_t i = 0; i < F; ++i) mx = std::max(mx, x[i]);
      for (int64_t i = 0; i < F; ++i) z += std::exp(x[i] - mx);
      for (int64_t i = 0; i < F; ++i)
        y[size_t(b * F + i)] =
            a.kind == ActivationKind::softmax ? std::exp(x[i] - mx) / z : x[i] - mx - std::log(z);
    }
    return y;
  }
  for (size_t i = 0; i < y.size(); ++i) {
    const double v = in.x[i];
    switch (a.kind) {
      case ActivationKind::relu:
        y[i] = v > 0 ? v : 0.0;
        break;
      case ActivationKind::leaky_relu:
        y[i] = v > 0 ? v : double(a.alpha) * v;
        break;
      case ActivationKind::sigmoid:
        y[i] = 1 / (1 + std::exp(-v));
        break;
      case ActivationKind::tanh:
        y[i] = std::tanh(v);
        break;
      case ActivationKind::gelu:
        y[i] = a.tanh_approx ? 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)))
                             : 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
        break;
      default:
        break;
    }
  }
  return y;
}

std::vector<double> reference_dropout(ReferenceInput& in) {
  const auto& d = static_cast<const Dropout&>(*in.layer);
  if (!in.training || d.rate == 0.f) return in.x;
  const Shape& s = d.input_shape();
  const int64_t unit_size = d.channelwise ? s.numel() / s[0] : 1;
  const uint64_t stream = dropout_stream(in.step, in.layer_index);
  std::vector<double> y(in.x.size());
  for (size_t i = 0; i < y.size(); ++i) {
    const bool keep = counter_uniform(in.seed, stream, uint64_t(int64_t(i) / unit_size)) >= d.rate;
    y[i] = keep ? in.x[i] / (1.0 - double(d.rate)) : 0.0;
  }
  return y;
}

int64_t reference_token(float v, int64_t vocab) {
  if (std::isnan(v) || v <= 0.f) return 0;
  if (v >= float(vocab - 1)) return vocab - 1;
  return int64_t(std::floor(v));
}

std::vector<double> reference_embedding(ReferenceInput& in) {
  const auto& e = static_cast<const Embedding&>(*in.layer);
  const int64_t L = e.length(), D = e.output_dim;
  const std::vector<double>& w = in.params[0];  // (V, D)
  std::vector<double> y(size_t(in.batch * D * L));
  for (int64_t b = 0; b < in.batch; ++b)
    for (int64_t l = 0; l < L; ++l) {
      const int64_t id = reference_token(float(in.x[size_t(b * L + l)]), e.input_dim);
      for (int64_t d = 0; d < D; ++d)
        y[size_t(e.channels_first ? (b * D + d) * L + l : (b * L + l) * D + d)] = w[size_t(id * D + d)];
    }
  return y;
}

std::vector<double> reference_batchnorm(ReferenceInput& in) {
  const auto& bn = static_cast<const BatchNorm&>(*in.layer);
  const int64_t C = bn.channels(), S = bn.spatial(), B = in.batch, n = B * S;
  const std::vector<double>&gamma = in.params[0], &beta = in.params[1];
  std::vector<double>&running_mean = in.buffers[0], &running_var = in.buffers[1];
  std::vector<double> y(in.x.size());
  for (int64_t c = 0; c < C; ++c) {
    double mean = running_mean[size_t(c)], var = running_var[size_t(c)];
    if (in.training) {
      mean = 0, var = 0;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t s = 0; s < S; ++s) mean += in.x[size_t((b * C + c) * S + s)];
      mean /= double(n);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t s = 0; s < S; ++s) var += std::pow(in.x[size_t((b * C + c) * S + s)] - mean, 2);
      var /= double(n);
      const double m = bn.momentum, unbiased = n > 1 ? var * double(n) / double(n - 1) : var;
      for (int f = 0; f < in.forwards; ++f) {
        running_mean[size_t(c)] = (1 - m) * running_mean[size_t(c)] + m * mean;
        running_var[size_t(c)] = (1 - m) * running_var[size_t(c)] + m * unbiased;
      }
    }
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < S; ++s) {
        const size_t i = size_t((b * C + c) * S + s);
        y[i] = gamma[size_t(c)] * (in.x[i] - mean) / std::sqrt(var + double(bn.epsilon)) + beta[size_t(c)];
      }
  }
  return y;
}

// Each run of D values along the last axis, alone: (x - mean) / sqrt(var + eps) * w + b, or
// x / sqrt(mean(x^2) + eps) * w for rms_norm.
std::vector<double> reference_layer_norm(ReferenceInput& in) {
  const auto& ln = static_cast<const LayerNorm&>(*in.layer);
  const int64_t d = ln.features(), rows = in.batch * ln.rows_per_sample();
  const std::vector<double>& w = in.params[0];
  std::vector<double> y(in.x.size());
  for (int64_t r = 0; r < rows; ++r) {
    const double* x = in.x.data() + r * d;
    double mean = 0, var = 0;
    if (!ln.rms) {
      for (int64_t j = 0; j < d; ++j) mean += x[j];
      mean /= double(d);
    }
    for (int64_t j = 0; j < d; ++j) var += (x[j] - mean) * (x[j] - mean);
    var /= double(d);
    for (int64_t j = 0; j < d; ++j)
      y[size_t(r * d + j)] = (x[j] - mean) / std::sqrt(var + double(ln.epsilon)) * w[size_t(j)] +
                             (ln.bias ? in.params[1][size_t(j)] : 0.0);
  }
  return y;
}

// x + the learned table, broadcast over the batch.
std::vector<double> reference_position_embedding(ReferenceInput& in) {
  const std::vector<double>& p = in.params[0];
  std::vector<double> y(in.x.size());
  for (size_t i = 0; i < y.size(); ++i) y[i] = in.x[i] + p[i % p.size()];
  return y;
}

// Self-attention in float64: the projections, per head the scaled scores, the causal mask, the
// softmax and dropout on it (the kernels' mask: element e of P (B, H, L, L) draws unit e), P v.
std::vector<double> reference_attention(ReferenceInput& in) {
  const auto& a = static_cast<const MultiHeadAttention&>(*in.layer);
  const int64_t L = a.length(), D = a.width(), H = a.heads, hd = a.head_dim();
  size_t k = 0;
  const std::vector<double>& wa = in.params[k++];  // (3D, D)
  const std::vector<double>* ba = a.use_bias ? &in.params[k++] : nullptr;
  const std::vector<double>& wp = in.params[k++];  // (D, D)
  const std::vector<double>* bp = a.use_bias ? &in.params[k] : nullptr;
  const bool drop = in.training && a.dropout > 0.f;
  const uint64_t stream = dropout_stream(in.step, in.layer_index);
  const double scale = 1.0 / std::sqrt(double(hd));
  std::vector<double> y(size_t(in.batch * L * D));
  // Masked: the token ids (B, L) after the sequences in x; keys whose id is 0 get no weight, and a
  // query with no key left attends to nothing (its weights are 0).
  const double* ids = a.masked() ? in.x.data() + in.batch * L * D : nullptr;
  for (int64_t n = 0; n < in.batch; ++n) {
    const auto key = [&](int64_t j) { return !ids || ids[n * L + j] != 0.0; };
    const double* x = in.x.data() + n * L * D;
    std::vector<double> qkv(size_t(L * 3 * D)), o(size_t(L * D), 0.0);
    for (int64_t i = 0; i < L; ++i)
      for (int64_t u = 0; u < 3 * D; ++u) {
        double acc = ba ? (*ba)[size_t(u)] : 0.0;
        for (int64_t j = 0; j < D; ++j) acc += x[i * D + j] * wa[size_t(u * D + j)];
        qkv[size_t(i * 3 * D + u)] = acc;
      }
    if (a.rotary)  // q and k: pair (e, e + hd/2) of each head turned by i base^(-2e/hd)
      for (int64_t i = 0; i < L; ++i)
        for (int64_t part = 0; part < 2; ++part)
          for (int64_t h = 0; h < H; ++h)
            for (int64_t e = 0; e < hd / 2; ++e) {
              double* v = qkv.data() + i * 3 * D + part * D + h * hd;
              const double angle = double(i) * std::pow(double(a.rotary_base), -2.0 * double(e) / double(hd));
              const double c = std::cos(angle), sn = std::sin(angle), x1 = v[e], x2 = v[e + hd / 2];
              v[e] = x1 * c - x2 * sn;
              v[e + hd / 2] = x2 * c + x1 * sn;
            }
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < L; ++i) {
        const int64_t n_keys = a.causal ? i + 1 : L;
        std::vector<double> p(size_t(L), 0.0);
        double m = -1e300, sum = 0;
        for (int64_t j = 0; j < n_keys; ++j) {
          if (!key(j)) continue;
          double s = 0;
          for (int64_t e = 0; e < hd; ++e)
            s += qkv[size_t(i * 3 * D + h * hd + e)] * qkv[size_t(j * 3 * D + D + h * hd + e)];
          p[size_t(j)] = s * scale;
          m = std::max(m, p[size_t(j)]);
        }
        for (int64_t j = 0; j < n_keys; ++j)
          if (key(j)) sum += (p[size_t(j)] = std::exp(p[size_t(j)] - m));
        for (int64_t j = 0; j < n_keys; ++j) {
          if (!key(j)) continue;
          double w = p[size_t(j)] / sum;
          if (drop) {
            const uint64_t unit = uint64_t(((n * H + h) * L + i) * L + j);
            w = counter_uniform(in.seed, stream, unit) >= a.dropout ? w / (1.0 - double(a.dropout)) : 0.0;
          }
          for (int64_t e = 0; e < hd; ++e)
            o[size_t(i * D + h * hd + e)] += w * qkv[size_t(j * 3 * D + 2 * D + h * hd + e)];
        }
      }
    for (int64_t i = 0; i < L; ++i)
      for (int64_t u = 0; u < D; ++u) {
        double acc = bp ? (*bp)[size_t(u)] : 0.0;
        for (int64_t j = 0; j < D; ++j) acc += o[size_t(i * D + j)] * wp[size_t(u * D + j)];
        y[size_t((n * L + i) * D + u)] = acc;
      }
  }
  return y;
}

}  // namespace trainer::conformance

namespace trainer::conformance {

// lstm / gru in float64, step by step from the formulas of lib/layers/recurrent.h: per direction
// and sample, h and c start at 0 and the positions are read forward (the reverse direction: from
// the last); y holds every h or the last one, forward's features before reverse's. Masked (a
// second input of token ids after the sequences in x): positions whose id is 0 are skipped.
std::vector<double> reference_recurrent(ReferenceInput& in) {
  const auto& r = static_cast<const Recurrent&>(*in.layer);
  const int64_t L = r.length(), D = r.features(), H = r.units, G = r.gates(), dirs = r.directions();
  const int64_t out = dirs * H;
  const bool lstm = r.cell == Recurrent::Cell::lstm;
  const auto sigmoid = [](double a) { return 1.0 / (1.0 + std::exp(-a)); };
  std::vector<double> y(size_t(in.batch * (r.return_sequences ? L : 1) * out));
  for (int64_t dir = 0; dir < dirs; ++dir) {
    const std::vector<double>&wih = in.params[size_t(4 * dir)], &whh = in.params[size_t(4 * dir + 1)],
          &bih = in.params[size_t(4 * dir + 2)], &bhh = in.params[size_t(4 * dir + 3)];
    for (int64_t n = 0; n < in.batch; ++n) {
      std::vector<double> h(static_cast<size_t>(H), 0.0), c = h, ax(static_cast<size_t>(G)), ah = ax;
      for (int64_t s = 0; s < L; ++s) {
        const int64_t t = dir == 0 ? s : L - 1 - s;
        if (r.masked() && in.x[size_t(in.batch * L * D + n * L + t)] == 0.0)
          continue;  // padding: skipped, y 0
        const double* x = in.x.data() + (n * L + t) * D;
        std::vector<double> hn = h, cn = c;
        for (int64_t j = 0; j < H; ++j) {
          // The pre-activations of unit j in every gate: input and hidden sides apart.
          for (int64_t k = 0; k < G; ++k) {
            const int64_t row = k * H + j;
            double a = bih[size_t(row)], b = bhh[size_t(row)];
            for (int64_t e = 0; e < D; ++e) a += wih[size_t(row * D + e)] * x[e];
            for (int64_t e = 0; e < H; ++e) b += whh[size_t(row * H + e)] * h[size_t(e)];
            ax[size_t(k)] = a;
            ah[size_t(k)] = b;
          }
          if (lstm) {
            const double i = sigmoid(ax[0] + ah[0]), f = sigmoid(ax[1] + ah[1]), g = std::tanh(ax[2] + ah[2]),
                         o = sigmoid(ax[3] + ah[3]);
            cn[size_t(j)] = f * c[size_t(j)] + i * g;
            hn[size_t(j)] = o * std::tanh(cn[size_t(j)]);
          } else {
            const double rr = sigmoid(ax[0] + ah[0]), z = sigmoid(ax[1] + ah[1]),
                         nn = std::tanh(ax[2] + rr * ah[2]);
            hn[size_t(j)] = (1 - z) * nn + z * h[size_t(j)];
          }
        }
        h = hn;
        c = cn;
        if (r.return_sequences)
          for (int64_t j = 0; j < H; ++j) y[size_t((n * L + t) * out + dir * H + j)] = h[size_t(j)];
      }
      if (!r.return_sequences)
        for (int64_t j = 0; j < H; ++j) y[size_t(n * out + dir * H + j)] = h[size_t(j)];
    }
  }
  return y;
}

}  // namespace trainer::conformance
