#include "lib/export/onnx_layers.h"

#include <cmath>
#include <functional>
#include <limits>

#include "lib/core/error.h"
#include "lib/core/rotary_formula.h"
#include "lib/layers/activation.h"
#include "lib/layers/attention.h"
#include "lib/layers/batchnorm.h"
#include "lib/layers/conv1d.h"
#include "lib/layers/conv2d.h"
#include "lib/layers/dense.h"
#include "lib/layers/embedding.h"
#include "lib/layers/global_pool.h"
#include "lib/layers/layer_norm.h"
#include "lib/layers/pool1d.h"
#include "lib/layers/pool2d.h"
#include "lib/layers/recurrent.h"

namespace trainer::onnx {
namespace {

using Inputs = std::vector<std::string>;
using Translate = std::function<std::string(GraphBuilder&, const Layer&, const LayerTensors&, const Inputs&,
                                            const std::string& output)>;

template <typename T>
const T& as(const Layer& layer) {
  const T* p = dynamic_cast<const T*>(&layer);
  if (!p)
    throw InternalError("onnx export: layer '" + layer.name() + "' of type " + layer.type() +
                        " is not the class its type names");
  return *p;
}

// A parameter or buffer of the layer as an initializer named as in the checkpoint.
std::string tensor(GraphBuilder& b, const Layer& layer, const LayerTensors& t, const std::string& name) {
  const LayerTensors::View& v = t.at(layer, name);
  if (v.name.empty()) return b.floats(layer.name() + "." + name, v.shape.dims, v.data);
  return b.shared_floats(v.name, v.shape.dims, v.data);
}

std::string dense(GraphBuilder& b, const Layer& l, const LayerTensors& t, const Inputs& in,
                  const std::string& out) {
  const Dense& d = as<Dense>(l);
  if (d.input_shape().rank() > 1) {  // per_position: MatMul broadcasts over (B, L...) rows
    const std::string wt = b.node("Transpose", {tensor(b, l, t, "weight")}, out + ".weight_t",
                                  {Attribute::of_ints("perm", {1, 0})});
    if (!d.use_bias) return b.node("MatMul", {in[0], wt}, out);
    return b.node("Add", {b.node("MatMul", {in[0], wt}, out + ".matmul"), tensor(b, l, t, "bias")}, out);
  }
  Inputs args{in[0], tensor(b, l, t, "weight")};
  if (d.use_bias) args.push_back(tensor(b, l, t, "bias"));
  return b.node("Gemm", args, out, {Attribute::of_int("transB", 1)});
}

// Conv's and the pools' geometry: kernel_shape, strides and pads (every begin, then every end).
std::vector<Attribute> window_attributes(const std::vector<const Window*>& windows) {
  std::vector<int64_t> kernel, strides, pads;
  for (const Window* w : windows) {
    kernel.push_back(w->kernel);
    strides.push_back(w->stride);
    pads.push_back(w->pad_begin);
  }
  for (const Window* w : windows) pads.push_back(w->pad_end);
  return {Attribute::of_ints("kernel_shape", kernel), Attribute::of_ints("strides", strides),
          Attribute::of_ints("pads", pads)};
}

std::string conv(GraphBuilder& b, const Layer& l, const LayerTensors& t, const Inputs& in,
                 const std::string& out, const std::vector<const Window*>& windows, bool use_bias,
                 int64_t groups) {
  Inputs args{in[0], tensor(b, l, t, "weight")};
  if (use_bias) args.push_back(tensor(b, l, t, "bias"));
  std::vector<Attribute> attributes = window_attributes(windows);
  attributes.push_back(Attribute::of_int("group", groups));
  attributes.push_back(Attribute::of_ints("dilations", std::vector<int64_t>(windows.size(), 1)));
  return b.node("Conv", args, out, attributes);
}

std::string conv2d(GraphBuilder& b, const Layer& l, const LayerTensors& t, const Inputs& in,
                   const std::string& out) {
  const Conv2d& c = as<Conv2d>(l);
  return conv(b, l, t, in, out, {&c.wh, &c.ww}, c.use_bias, c.groups);
}

std::string conv1d(GraphBuilder& b, const Layer& l, const LayerTensors& t, const Inputs& in,
                   const std::string& out) {
  const Conv1d& c = as<Conv1d>(l);
  return conv(b, l, t, in, out, {&c.w}, c.use_bias, 1);
}

std::string pool(GraphBuilder& b, bool max, const std::vector<const Window*>& windows, const std::string& x,
                 const std::string& out) {
  std::vector<Attribute> attributes = window_attributes(windows);
  if (!max) attributes.push_back(Attribute::of_int("count_include_pad", 0));
  return b.node(max ? "MaxPool" : "AveragePool", {x}, out, attributes);
}

std::string pool2d(GraphBuilder& b, const Layer& l, const LayerTensors&, const Inputs& in,
                   const std::string& out) {
  const Pool2d& p = as<Pool2d>(l);
  return pool(b, p.kind == Pool2d::Kind::max, {&p.wh, &p.ww}, in[0], out);
}

std::string pool1d(GraphBuilder& b, const Layer& l, const LayerTensors&, const Inputs& in,
                   const std::string& out) {
  const Pool1d& p = as<Pool1d>(l);
  return pool(b, p.kind == Pool1d::Kind::max, {&p.w}, in[0], out);
}

// channels_last (B, S..., C): ReduceMean / ReduceMax over the position axes (opset 17: `axes` an
// attribute), not kept.
Translate global_pool(const char* op, const char* reduce) {
  return [op, reduce](GraphBuilder& b, const Layer& l, const LayerTensors&, const Inputs& in,
                      const std::string& out) {
    const GlobalPool& p = as<GlobalPool>(l);
    if (p.channels_last) {
      std::vector<int64_t> axes;
      for (size_t a = 1; a < p.input_shape().rank(); ++a) axes.push_back(int64_t(a));
      return b.node(reduce, {in[0]}, out,
                    {Attribute::of_ints("axes", axes), Attribute::of_int("keepdims", 0)});
    }
    const std::string pooled = b.node(op, {in[0]}, out + ".pooled");  // (B, C, 1...)
    return b.node("Flatten", {pooled}, out, {Attribute::of_int("axis", 1)});
  };
}

std::string batchnorm(GraphBuilder& b, const Layer& l, const LayerTensors& t, const Inputs& in,
                      const std::string& out) {
  const BatchNorm& n = as<BatchNorm>(l);
  return b.node("BatchNormalization",
                {in[0], tensor(b, l, t, "weight"), tensor(b, l, t, "bias"), tensor(b, l, t, "running_mean"),
                 tensor(b, l, t, "running_var")},
                out, {Attribute::of_float("epsilon", n.epsilon)});
}

std::string activation(GraphBuilder& b, const Layer& l, const LayerTensors&, const Inputs& in,
                       const std::string& out) {
  const Activation& a = as<Activation>(l);
  const std::string& x = in[0];
  switch (a.kind) {
    case ActivationKind::relu:
      return b.node("Relu", {x}, out);
    case ActivationKind::sigmoid:
      return b.node("Sigmoid", {x}, out);
    case ActivationKind::tanh:
      return b.node("Tanh", {x}, out);
    case ActivationKind::leaky_relu:
      return b.node("LeakyRelu", {x}, out, {Attribute::of_float("alpha", a.alpha)});
    case ActivationKind::softmax:
      return b.node("Softmax", {x}, out, {Attribute::of_int("axis", -1)});
    case ActivationKind::log_softmax:
      return b.node("LogSoftmax", {x}, out, {Attribute::of_int("axis", -1)});
    case ActivationKind::gelu: {  // opset 20 has Gelu; 17 builds it from Erf (or Tanh)
      if (a.tanh_approx) {        // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        const std::string cube = b.node("Mul", {b.node("Mul", {x, x}, out + ".x2"), x}, out + ".x3");
        const std::string inner = b.node(
            "Add", {x, b.node("Mul", {cube, b.scalar(out + ".c", 0.044715f)}, out + ".cx3")}, out + ".in");
        const std::string u =
            b.node("Mul", {inner, b.scalar(out + ".k", float(std::sqrt(2.0 / M_PI)))}, out + ".u");
        const std::string one_plus =
            b.node("Add", {b.node("Tanh", {u}, out + ".tanh"), b.scalar(out + ".one", 1.f)}, out + ".add");
        const std::string times_x = b.node("Mul", {x, one_plus}, out + ".mul");
        return b.node("Mul", {times_x, b.scalar(out + ".half", 0.5f)}, out);
      }
      const std::string scaled =
          b.node("Div", {x, b.scalar(out + ".sqrt2", float(std::sqrt(2.0)))}, out + ".div");
      const std::string erf = b.node("Erf", {scaled}, out + ".erf");
      const std::string one_plus = b.node("Add", {erf, b.scalar(out + ".one", 1.f)}, out + ".add");
      const std::string times_x = b.node("Mul", {x, one_plus}, out + ".mul");
      return b.node("Mul", {times_x, b.scalar(out + ".half", 0.5f)}, out);
    }
  }
  throw InternalError("onnx export: activation '" + l.name() + "' has an unknown kind");
}

// layer_norm: opset 17's LayerNormalization over the last axis. rms_norm has no operator before
// opset 23: x / sqrt(ReduceMean(x^2, last axis) + epsilon) * weight.
std::string layer_norm(GraphBuilder& b, const Layer& l, const LayerTensors& t, const Inputs& in,
                       const std::string& out) {
  const LayerNorm& n = as<LayerNorm>(l);
  const std::string& x = in[0];
  if (!n.rms) {
    std::vector<std::string> inputs = {x, tensor(b, l, t, "weight")};
    if (n.bias) inputs.push_back(tensor(b, l, t, "bias"));
    return b.node("LayerNormalization", inputs, out,
                  {Attribute::of_int("axis", -1), Attribute::of_float("epsilon", n.epsilon)});
  }
  const std::string mean_sq = b.node("ReduceMean", {b.node("Mul", {x, x}, out + ".sq")}, out + ".ms",
                                     {Attribute::of_ints("axes", {-1}), Attribute::of_int("keepdims", 1)});
  const std::string rms = b.node(
      "Sqrt", {b.node("Add", {mean_sq, b.scalar(out + ".eps", n.epsilon)}, out + ".mse")}, out + ".rms");
  const std::string normalized = b.node("Div", {x, rms}, out + ".norm");
  return b.node("Mul", {normalized, tensor(b, l, t, "weight")}, out);
}

// x + the table (per-sample shape; ONNX broadcasts it over the batch).
std::string position_embedding(GraphBuilder& b, const Layer& l, const LayerTensors& t, const Inputs& in,
                               const std::string& out) {
  return b.node("Add", {in[0], tensor(b, l, t, "weight")}, out);
}

// multi_head_attention from opset 17's operators (Attention came in 23): the projections as MatMul
// with the transposed weights, the heads by Reshape and Transpose, softmax(scale q k^T + mask) v;
// the causal mask adds -inf above the diagonal; the key-padding mask (a second input of token ids)
// puts -inf where a key's id is 0, and a row with no key left gets weights 0 instead of NaN.
std::string attention(GraphBuilder& b, const Layer& l, const LayerTensors& t, const Inputs& in,
                      const std::string& out) {
  const MultiHeadAttention& a = as<MultiHeadAttention>(l);
  const int64_t L = a.length(), D = a.width(), H = a.heads, hd = a.head_dim();
  const auto linear = [&](const std::string& x, const std::string& name, const std::string& to) {
    const std::string wt = b.node("Transpose", {tensor(b, l, t, name + ".weight")}, to + ".weight_t",
                                  {Attribute::of_ints("perm", {1, 0})});
    if (!a.use_bias) return b.node("MatMul", {x, wt}, to);
    return b.node("Add", {b.node("MatMul", {x, wt}, to + ".matmul"), tensor(b, l, t, name + ".bias")}, to);
  };
  const std::string qkv = linear(in[0], "c_attn", out + ".qkv");  // (B, L, 3D)
  const std::string split = b.node("Reshape", {qkv, b.int64s(out + ".qkv_shape", {5}, {0, 0, 3, H, hd})},
                                   out + ".qkv5");  // (B, L, 3, H, hd)
  const std::string heads = b.node("Transpose", {split}, out + ".heads",
                                   {Attribute::of_ints("perm", {2, 0, 3, 1, 4})});  // (3, B, H, L, hd)
  const auto part = [&](int64_t i, const char* name) {
    return b.node("Gather", {heads, b.int64s(out + "." + name + "_index", {}, {i})}, out + "." + name,
                  {Attribute::of_int("axis", 0)});  // (B, H, L, hd)
  };
  std::string q = part(0, "q"), k = part(1, "k");
  const std::string v = part(2, "v");
  if (a.rotary) {  // x cos + rotate_half(x) sin, rotate_half(x) = (-x2, x1); tables (L, hd)
    const int64_t half = hd / 2;
    std::vector<float> cos_t(static_cast<size_t>(L * hd)), sin_t(cos_t.size());
    for (int64_t i = 0; i < L; ++i)
      for (int64_t e = 0; e < hd; ++e) {
        const double angle = double(rotary_angle(i, e % half, hd, a.rotary_base));
        cos_t[size_t(i * hd + e)] = float(std::cos(angle));
        sin_t[size_t(i * hd + e)] = float(std::sin(angle));
      }
    const std::string cos_n = b.floats(out + ".rotary_cos", {L, hd}, cos_t),
                      sin_n = b.floats(out + ".rotary_sin", {L, hd}, sin_t);
    const std::string axes = b.int64s(out + ".last_axis", {1}, {-1});
    const auto rope = [&](const std::string& x, const std::string& name) {
      const std::string x1 =
          b.node("Slice", {x, b.int64s(name + ".s0", {1}, {0}), b.int64s(name + ".e0", {1}, {half}), axes},
                 name + ".first");
      const std::string x2 =
          b.node("Slice", {x, b.int64s(name + ".s1", {1}, {half}), b.int64s(name + ".e1", {1}, {hd}), axes},
                 name + ".second");
      const std::string turned = b.node("Concat", {b.node("Neg", {x2}, name + ".neg"), x1},
                                        name + ".half_turn", {Attribute::of_int("axis", -1)});
      return b.node("Add",
                    {b.node("Mul", {x, cos_n}, name + ".cos"), b.node("Mul", {turned, sin_n}, name + ".sin")},
                    name + ".rotary");
    };
    q = rope(q, out + ".q");
    k = rope(k, out + ".k");
  }
  const std::string kt = b.node("Transpose", {k}, out + ".k_t", {Attribute::of_ints("perm", {0, 1, 3, 2})});
  std::string s = b.node(
      "Mul",
      {b.node("MatMul", {q, kt}, out + ".qk"), b.scalar(out + ".scale", float(1.0 / std::sqrt(double(hd))))},
      out + ".scores");  // (B, H, L, L)
  if (a.causal) {
    std::vector<float> mask(size_t(L * L), 0.f);
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = i + 1; j < L; ++j) mask[size_t(i * L + j)] = -std::numeric_limits<float>::infinity();
    s = b.node("Add", {s, b.floats(out + ".causal_mask", {L, L}, mask)}, out + ".masked");
  }
  if (a.masked()) {  // keys whose id is 0: -inf; a row left with none: NaN from Softmax, made 0
    const std::string pad =
        b.node("Equal", {in[1], b.scalar(out + ".zero", 0.f)}, out + ".padding");  // (B, L)
    const std::string pad4 = b.node("Unsqueeze", {pad, b.int64s(out + ".pad_axes", {2}, {1, 2})},
                                    out + ".padding4");  // (B, 1, 1, L)
    s = b.node("Where", {pad4, b.scalar(out + ".minus_inf", -std::numeric_limits<float>::infinity()), s},
               out + ".key_masked");
  }
  std::string p =
      b.node("Softmax", {s}, out + (a.masked() ? ".softmax" : ".weights"), {Attribute::of_int("axis", -1)});
  if (a.masked())
    p = b.node("Where", {b.node("IsNaN", {p}, out + ".empty_rows"), b.scalar(out + ".none", 0.f), p},
               out + ".weights");
  const std::string o = b.node("MatMul", {p, v}, out + ".heads_out");  // (B, H, L, hd)
  const std::string rows =
      b.node("Transpose", {o}, out + ".rows", {Attribute::of_ints("perm", {0, 2, 1, 3})});
  const std::string joined =
      b.node("Reshape", {rows, b.int64s(out + ".out_shape", {3}, {0, 0, D})}, out + ".joined");  // (B, L, D)
  return linear(joined, "c_proj", out);
}

// lstm / gru: ONNX's LSTM and GRU (opset 14's), time-major: x (B, L, D) is transposed to (L, B, D)
// and Y (L, dirs, B, H) back to (B, L, dirs, H). The weights are the checkpoint's with the gates
// reordered (PyTorch's i f g o -> ONNX's i o f c; r z n -> z r h) and the directions stacked:
// W (dirs, G H, D), R (dirs, G H, H), B (dirs, 2 G H) = the input biases, then the hidden ones.
// gru: linear_before_reset = 1 (the reset gate scales h W_hn^T + b_hn: PyTorch's form). Without
// return_sequences y is the operator's Y_h (each direction's state after its last step).
// Masked (a second input of token ids): skipping a position is running the cells over the other
// positions only, so the graph moves each sample's unmasked positions to the front in order
// (TopK of pad L + position gives the permutation), runs the operator with sequence_lens = their
// count (it writes 0 past them, and the reverse direction starts at the last of them), and moves
// the rows back (the inverse permutation, TopK of the permutation).
std::string recurrent(GraphBuilder& b, const Layer& l, const LayerTensors& t, const Inputs& in,
                      const std::string& out) {
  const Recurrent& r = as<Recurrent>(l);
  const bool lstm = r.cell == Recurrent::Cell::lstm;
  const int64_t L = r.length(), D = r.features(), H = r.units, G = r.gates(), dirs = r.directions();
  const std::vector<int64_t> order = lstm ? std::vector<int64_t>{0, 3, 1, 2} : std::vector<int64_t>{1, 0, 2};
  std::vector<float> w, rw, bias;
  const auto gates = [&](const std::string& name, int64_t cols, std::vector<float>& to) {
    const LayerTensors::View& v = t.at(l, name);
    for (int64_t k : order) to.insert(to.end(), v.data + k * H * cols, v.data + (k + 1) * H * cols);
  };
  for (int64_t dir = 0; dir < dirs; ++dir) {
    const std::string suffix = dir == 0 ? "_l0" : "_l0_reverse";
    gates("weight_ih" + suffix, D, w);
    gates("weight_hh" + suffix, H, rw);
    gates("bias_ih" + suffix, 1, bias);
    gates("bias_hh" + suffix, 1, bias);
  }
  std::string x = in[0], perm, inverse, lengths;
  // GatherElements along the positions of a (B, L, F) tensor by per-sample indices (B, L).
  const auto along_positions = [&](const std::string& v, const std::string& idx, const std::string& to) {
    const std::string wide = b.node("Unsqueeze", {idx, b.int64s(to + ".axes", {1}, {2})}, to + ".index3");
    const std::string full =
        b.node("Expand", {wide, b.node("Shape", {v}, to + ".shape")}, to + ".index_full");  // (B, L, F)
    return b.node("GatherElements", {v, full}, to, {Attribute::of_int("axis", 1)});
  };
  if (r.masked()) {
    const std::string pad =
        b.node("Equal", {in[1], b.scalar(out + ".zero", 0.f)}, out + ".padding");  // (B, L)
    std::vector<float> positions(static_cast<size_t>(L));
    for (int64_t i = 0; i < L; ++i) positions[size_t(i)] = float(i);
    const std::string key = b.node(
        "Add",
        {b.node("Mul",
                {b.node("Cast", {pad}, out + ".pad_f", {Attribute::of_int("to", int64_t(DataType::float32))}),
                 b.scalar(out + ".length", float(L))},
                out + ".pad_l"),
         b.floats(out + ".positions", {L}, positions)},
        out + ".key");
    const std::string k = b.int64s(out + ".k", {1}, {L});
    const std::vector<Attribute> ascending = {Attribute::of_int("axis", 1), Attribute::of_int("largest", 0),
                                              Attribute::of_int("sorted", 1)};
    perm = b.node_outputs("TopK", {key, k}, {out + ".key_sorted", out + ".order"}, ascending)[1];  // (B, L)
    const std::string perm_f =
        b.node("Cast", {perm}, out + ".order_f", {Attribute::of_int("to", int64_t(DataType::float32))});
    inverse = b.node_outputs("TopK", {perm_f, k}, {out + ".order_sorted", out + ".inverse"}, ascending)[1];
    const std::string kept = b.node("Cast", {b.node("Not", {pad}, out + ".kept")}, out + ".kept_f",
                                    {Attribute::of_int("to", int64_t(DataType::float32))});
    lengths = b.node("Cast",
                     {b.node("ReduceSum", {kept, b.int64s(out + ".sum_axes", {1}, {1})}, out + ".count",
                             {Attribute::of_int("keepdims", 0)})},
                     out + ".lengths", {Attribute::of_int("to", int64_t(DataType::int32))});  // (B)
    x = along_positions(x, perm, out + ".packed");
  }
  const std::string xt =
      b.node("Transpose", {x}, out + ".time_major", {Attribute::of_ints("perm", {1, 0, 2})});
  std::vector<Attribute> attributes = {
      Attribute::of_int("hidden_size", H),
      Attribute::of_string("direction", dirs == 2 ? "bidirectional" : "forward")};
  if (!lstm) attributes.push_back(Attribute::of_int("linear_before_reset", 1));
  std::vector<std::string> args = {xt, b.floats(out + ".W", {dirs, G * H, D}, w),
                                   b.floats(out + ".R", {dirs, G * H, H}, rw),
                                   b.floats(out + ".B", {dirs, 2 * G * H}, bias)};
  if (r.masked()) args.push_back(lengths);
  const std::vector<std::string> ys = b.node_outputs(lstm ? "LSTM" : "GRU", args, {out + ".Y", out + ".Y_h"},
                                                     attributes);  // (L, dirs, B, H), (dirs, B, H)
  if (!r.return_sequences) {
    const std::string last =
        b.node("Transpose", {ys[1]}, out + ".last", {Attribute::of_ints("perm", {1, 0, 2})});  // (B, dirs, H)
    return b.node("Reshape", {last, b.int64s(out + ".shape", {2}, {0, dirs * H})}, out);
  }
  const std::string rows = b.node("Transpose", {ys[0]}, out + ".rows",
                                  {Attribute::of_ints("perm", {2, 0, 1, 3})});  // (B, L, dirs, H)
  if (!r.masked()) return b.node("Reshape", {rows, b.int64s(out + ".shape", {3}, {0, 0, dirs * H})}, out);
  const std::string joined =
      b.node("Reshape", {rows, b.int64s(out + ".shape", {3}, {0, 0, dirs * H})}, out + ".packed_out");
  return along_positions(joined, inverse, out);
}

std::string embedding(GraphBuilder& b, const Layer& l, const LayerTensors& t, const Inputs& in,
                      const std::string& out) {
  const Embedding& e = as<Embedding>(l);
  // embedding_row(): !(id > 0) (NaN included) -> row 0, id >= float(V - 1) -> V - 1, else int64(id).
  const std::string zero = b.scalar(out + ".zero", 0.f);
  const std::string positive = b.node("Greater", {in[0], zero}, out + ".positive");
  const std::string kept = b.node("Where", {positive, in[0], zero}, out + ".kept");
  const std::string clamped =
      b.node("Min", {kept, b.scalar(out + ".last", float(e.input_dim - 1))}, out + ".clamped");
  const std::string ids =
      b.node("Cast", {clamped}, out + ".ids", {Attribute::of_int("to", int64_t(DataType::int64))});
  const std::string rows = b.node("Gather", {tensor(b, l, t, "weight"), ids}, out + ".rows",
                                  {Attribute::of_int("axis", 0)});  // (B, L, D)
  if (!e.channels_first) return b.node("Identity", {rows}, out);
  return b.node("Transpose", {rows}, out, {Attribute::of_ints("perm", {0, 2, 1})});  // (B, D, L)
}

std::string add(GraphBuilder& b, const Layer&, const LayerTensors&, const Inputs& in,
                const std::string& out) {
  std::string sum = in[0];  // ((x0 + x1) + x2) ...: the kernels' order
  for (size_t k = 1; k < in.size(); ++k)
    sum = b.node("Add", {sum, in[k]}, k + 1 == in.size() ? out : out + ".partial");
  return sum;
}

Translate with_axis(const char* op, int64_t axis) {
  return
      [op, axis](GraphBuilder& b, const Layer&, const LayerTensors&, const Inputs& in,
                 const std::string& out) { return b.node(op, in, out, {Attribute::of_int("axis", axis)}); };
}

std::string identity(GraphBuilder& b, const Layer&, const LayerTensors&, const Inputs& in,
                     const std::string& out) {
  return b.node("Identity", {in[0]}, out);  // dropout is the identity in inference
}

const std::map<std::string, Translate>& translations() {
  static const std::map<std::string, Translate> table{
      {"dense", dense},
      {"conv2d", conv2d},
      {"conv1d", conv1d},
      {"maxpool2d", pool2d},
      {"avgpool2d", pool2d},
      {"maxpool1d", pool1d},
      {"avgpool1d", pool1d},
      {"global_avg_pool", global_pool("GlobalAveragePool", "ReduceMean")},
      {"global_max_pool", global_pool("GlobalMaxPool", "ReduceMax")},
      {"batchnorm", batchnorm},
      {"layer_norm", layer_norm},
      {"position_embedding", position_embedding},
      {"multi_head_attention", attention},
      {"lstm", recurrent},
      {"gru", recurrent},
      {"rms_norm", layer_norm},
      {"relu", activation},
      {"sigmoid", activation},
      {"tanh", activation},
      {"gelu", activation},
      {"leaky_relu", activation},
      {"softmax", activation},
      {"log_softmax", activation},
      {"embedding", embedding},
      {"add", add},
      {"concat", with_axis("Concat", 1)},
      {"flatten", with_axis("Flatten", 1)},
      {"identity", identity},
      {"dropout", identity},
      {"dropout2d", identity},
  };
  return table;
}

}  // namespace

const LayerTensors::View& LayerTensors::at(const Layer& layer, const std::string& name) const {
  const auto it = by_name.find(name);
  if (it == by_name.end())
    throw InternalError("onnx export: layer '" + layer.name() + "' has no tensor '" + name + "'");
  return it->second;
}

std::vector<std::string> exportable_layer_types() {
  std::vector<std::string> types;
  for (const auto& kv : translations()) types.push_back(kv.first);
  return types;
}

std::string export_layer(GraphBuilder& b, const Layer& layer, const LayerTensors& tensors,
                         const std::vector<std::string>& inputs, const std::string& output) {
  const auto it = translations().find(layer.type());
  if (it == translations().end()) {
    std::string list;
    for (const std::string& type : exportable_layer_types()) list += (list.empty() ? "" : ", ") + type;
    throw ConfigError(
        "layer '" + layer.name() + "' (type " + layer.type() +
        ") cannot be exported to ONNX: its type has no ONNX translation; types that have one: " + list);
  }
  return it->second(b, layer, tensors, inputs, output);
}

}  // namespace trainer::onnx
