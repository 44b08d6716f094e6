// The rows. Each case says where it came from when it replaced an older test ("was ..."), so the
// history of a bound can be traced; tolerances are never looser than those tests'.
#include "tests/conformance/conformance_table.h"

#include <catch2/catch.hpp>
#include <limits>

#include "lib/layers/dropout.h"
#include "lib/layers/embedding.h"
#include "tests/conformance/harness.h"

namespace trainer::conformance {
namespace {

// Every check, on a shuffled grid (finite differences need distinct inputs).
Case fd(std::string yaml, Shape in, int64_t batch, uint64_t seed, float h = 1e-2f, std::string note = "") {
  Case c;
  c.yaml = std::move(yaml);
  c.input = std::move(in);
  c.batch = batch;
  c.seed = seed;
  c.h = h;
  c.note = std::move(note);
  return c;
}

// Reference and cross-backend only (shapes too large for finite differences, or random inputs).
Case ref(std::string yaml, Shape in, int64_t batch, uint64_t seed, Inputs inputs, std::string note = "") {
  Case c = fd(std::move(yaml), std::move(in), batch, seed, 1e-2f, std::move(note));
  c.checks = kReference | kCross;
  c.inputs = inputs;
  return c;
}

// A recurrent case with its mask: a second input of token ids, one a position, a third of them 0
// (padding, skipped).
Case masked(Case c) {
  c.more_inputs = {Shape{c.input[0]}};
  c.constant_inputs = {Inputs::tokens(50, 1.0 / 3)};
  return c;
}

// bf16 on an H200: y within 1.04e-2 of f32's (bound 1e-2): q and k round twice in 16 bits
// (Case::low_precision_y_scale).
Case rounded_twice(Case c) {
  c.low_precision_y_scale = 1.5;
  return c;
}

Case eval(Case c) {
  c.training = false;
  return c;
}

// The kernel with the relu after it (Case::fused_relu).
Case fused_relu(Case c) {
  c.fused_relu = true;
  c.note = "fused relu" + (c.note.empty() ? std::string() : "; " + c.note);
  return c;
}

const Inputs kWide = Inputs::uniform(-2, 2);  // the GPU comparisons' inputs
const Inputs kUnit = Inputs::uniform(-1, 1);

// ---- Row-specific properties ----

// Dropout in eval is the identity, bit for bit (y = x, dx = dy); in training some but not all
// units are dropped.
void dropout_property(const Row&, const Case& c, const CaseData& d, const RunOutput& out) {
  if (!c.training) {
    INFO("dropout in eval must be the identity, bit for bit");
    CHECK(same_bits(out.y, d.x));
    CHECK(same_bits(out.dx, d.dy));
    return;
  }
  size_t dropped = 0;
  for (float m : out.y) dropped += m == 0.f;
  INFO("dropout dropped " << dropped << " of " << out.y.size() << " units");
  CHECK(dropped > 0);
  CHECK(dropped < out.y.size());
  if (!static_cast<const Dropout&>(*d.layer).channelwise) return;
  // dropout2d: each (sample, channel) plane is all kept or all dropped.
  const size_t plane = size_t(d.layer->input_shape().numel() / d.layer->input_shape()[0]);
  size_t mixed = 0;
  for (size_t p = 0; p < out.y.size() / plane; ++p)
    for (size_t i = 1; i < plane; ++i) mixed += (out.y[p * plane + i] == 0.f) != (out.y[p * plane] == 0.f);
  INFO("dropout2d must drop whole channels");
  CHECK(mixed == 0);
}

// The gradient rows of ids that do not occur are exactly zero (they held the sentinel).
void embedding_property(const Row&, const Case&, const CaseData& d, const RunOutput& out) {
  const auto& e = static_cast<const Embedding&>(*d.layer);
  std::vector<bool> used(size_t(e.input_dim), false);
  for (float v : d.x) used[size_t(reference_token(v, e.input_dim))] = true;
  size_t wrong = 0;
  for (int64_t id = 0; id < e.input_dim; ++id)
    if (!used[size_t(id)])
      for (int64_t k = 0; k < e.output_dim; ++k) wrong += out.grads[size_t(id * e.output_dim + k)] != 0.f;
  INFO("embedding: " << wrong << " gradient elements of ids absent from the batch are not exactly 0");
  CHECK(wrong == 0);
}

Row kernel_row(std::string type, ReferenceForward reference, CrossBounds cross, std::vector<Case> cases) {
  Row r;
  r.type = std::move(type);
  r.reference = reference;
  r.cross = cross;
  r.cases = std::move(cases);
  return r;
}

const CrossBounds kConv{1e-4, 1e-4, 1e-4, 1e-4};  // cuDNN / cuBLAS against oneDNN
const CrossBounds kExact{0, 0, 1e-5, 1e-5};
const CrossBounds kFine{};  // 1e-5: element-wise, softmax, pooling

std::vector<Case> pool2d_cases(const std::string& t, float h) {
  const bool max = t == "maxpool2d";
  std::vector<Case> v;
  if (max) {
    v.push_back(fd("{type: maxpool2d, pool_size: 2}", {2, 6, 6}, 2, 31, h, "was test_layer_gradients"));
    v.push_back(fd("{type: maxpool2d, pool_size: 3, strides: 2, padding: same}", {1, 7, 7}, 2, 33, h,
                   "was test_layer_gradients"));
    v.push_back(ref("{type: maxpool2d, pool_size: 2}", {2, 7, 7}, 2, 3, Inputs::uniform(-1, 1),
                    "was test_kernels_reference"));
  } else {
    v.push_back(fd("{type: avgpool2d, pool_size: 2}", {2, 6, 6}, 2, 32, h, "was test_layer_gradients"));
    v.push_back(ref("{type: avgpool2d, pool_size: 3, strides: 2}", {2, 7, 7}, 2, 3, Inputs::uniform(-1, 1),
                    "was test_kernels_reference"));
  }
  v.push_back(fd("{type: " + t + ", pool_size: 3, strides: 1, padding: 1}", {1, 5, 4}, 1, 34, h,
                 "batch 1, explicit padding"));
  const char* gpu[] = {"",
                       ", pool_size: 3, strides: 2, padding: same",
                       ", pool_size: 3, strides: 1, padding: same",
                       ", pool_size: 3, strides: 2, padding: 1",
                       ", pool_size: [2, 3], strides: [1, 2]",
                       ", pool_size: 17"};
  // The last: windows that tile the input (and a column past them) of 289 values, whose places
  // the GPU keeps as int32 (a byte for 256 and fewer: the 2x2 rows).
  const Shape shapes[] = {{3, 8, 8}, {3, 8, 8}, {2, 7, 7}, {2, 9, 6}, {2, 5, 7}, {2, 34, 35}};
  const int64_t batches[] = {2, 2, 3, 2, 2, 2};
  for (int i = 0; i < 6; ++i)
    v.push_back(ref("{type: " + t + gpu[i] + "}", shapes[i], batches[i], 1, kWide, "was test_gpu_layers"));
  return v;
}

std::vector<Case> pool1d_cases(const std::string& t, float h) {
  const bool max = t == "maxpool1d";
  std::vector<Case> v;
  if (max) {
    v.push_back(fd("{type: maxpool1d}", {2, 8}, 2, 121, h, "was test_layers_more"));
    v.push_back(fd("{type: maxpool1d, pool_size: 3, strides: 1}", {3, 7}, 2, 123, h, "was test_layers_more"));
    v.push_back(
        ref("{type: maxpool1d, pool_size: 2}", {2, 9}, 2, 181, Inputs::grid(), "was test_layers_more"));
  } else {
    v.push_back(fd("{type: avgpool1d, pool_size: 3, strides: 2, padding: same}", {2, 8}, 2, 122, h,
                   "was test_layers_more"));
    v.push_back(ref("{type: avgpool1d, pool_size: 3, strides: 2}", {2, 9}, 2, 181, Inputs::grid(),
                    "was test_layers_more"));
  }
  v.push_back(fd("{type: " + t + ", pool_size: 2, strides: 1, padding: same}", {3, 5}, 1, 124, h,
                 "batch 1, pads (0, 1)"));
  const char* gpu[] = {"",
                       ", pool_size: 3, strides: 2, padding: same",
                       ", pool_size: 2, strides: 1, padding: same",
                       ", pool_size: 3, strides: 1, padding: same",
                       ", pool_size: 3, strides: 2, padding: 1",
                       ", pool_size: 4, strides: 3"};
  const Shape shapes[] = {{3, 16}, {3, 16}, {3, 9}, {2, 15}, {2, 13}, {4, 19}};
  const int64_t batches[] = {2, 2, 3, 3, 2, 2};
  for (int i = 0; i < 6; ++i)
    v.push_back(
        ref("{type: " + t + gpu[i] + "}", shapes[i], batches[i], 1, kWide, "was test_gpu_layers_more"));
  if (max)
    for (const char* yaml : {"{type: maxpool1d, pool_size: 3, strides: 1, padding: same}",
                             "{type: maxpool1d, pool_size: 4, strides: 2, padding: same}"}) {
      Case c = ref(yaml, {3, 20}, 3, 31, Inputs::integers(0, 3),
                   "ties: the first maximum takes the gradient; was test_gpu_layers_more");
      c.exact_cross = true;
      v.push_back(c);
    }
  return v;
}

std::vector<Row> build_table() {
  std::vector<Row> rows;
  rows.push_back(kernel_row(
      "dense", reference_dense, kConv,
      {
          fd("{type: dense, units: 5}", {7}, 3, 11, 1e-2f, "was test_layer_gradients"),
          fd("{type: dense, units: 4, use_bias: false}", {6}, 2, 12, 1e-2f, "was test_layer_gradients"),
          fd("{type: dense, units: 3}", {5}, 1, 13, 1e-2f, "batch 1"),
          ref("{type: dense, units: 6}", {5}, 3, 4, Inputs::uniform(-1, 1), "was test_kernels_reference"),
          ref("{type: dense, units: 16}", {32}, 5, 1, kWide, "was test_gpu_layers"),
          ref("{type: dense, units: 10, use_bias: false}", {64}, 7, 1, kWide, "was test_gpu_layers"),
          ref("{type: dense, units: 64}", {3}, 1, 1, kWide, "was test_gpu_layers"),
          fd("{type: dense, units: 5, per_position: true}", {4, 6}, 2, 14, 1e-2f, "per position: (L, D)"),
          fd("{type: dense, units: 3, per_position: true, use_bias: false}", {2, 3, 4}, 2, 15, 1e-2f,
             "per position, rank 3"),
          ref("{type: dense, units: 48, per_position: true}", {64, 32}, 4, 5, kWide, "per position, 64 rows"),
          ref("{type: dense, units: 1027, per_position: true}", {256, 16}, 4, 6, kWide,
              "1,024 rows of 1,027: the GPU pads y's and dy's rows to 16 bytes for aligned products"),
          ref("{type: dense, units: 1027, per_position: true, use_bias: false}", {256, 16}, 4, 8, kWide,
              "padded without a bias: the GPU's dW in two products, 1,024 rows and 3"),
          ref("{type: dense, units: 50257, per_position: true}", {512, 8}, 2, 7, kWide,
              "GPT-2's 50,257 logits, padded in 16 bits"),
      }));
  rows.push_back(kernel_row(
      "conv2d", reference_conv2d, kConv,
      {
          fd("{type: conv2d, filters: 4, kernel_size: 3, groups: 2}", {4, 5, 5}, 2, 261, 1e-2f, "grouped"),
          fd("{type: conv2d, filters: 3, kernel_size: 3, groups: 3, padding: same, use_bias: false}",
             {3, 5, 4}, 1, 262, 1e-2f, "depthwise, batch 1"),
          fd("{type: conv2d, filters: 6, kernel_size: 1, strides: 2, groups: 3}", {3, 5, 5}, 2, 263, 1e-2f,
             "grouped 1x1 with stride, two filters per group"),
          ref("{type: conv2d, filters: 32, kernel_size: 3, padding: 1, groups: 32}", {32, 12, 12}, 3, 1,
              kWide, "depthwise (MobileNet)"),
          ref("{type: conv2d, filters: 16, kernel_size: 3, strides: 2, padding: same, groups: 4}",
              {8, 11, 11}, 2, 1, kWide, "grouped, asymmetric padding"),
          fd("{type: conv2d, filters: 3, kernel_size: 3}", {2, 6, 6}, 2, 21, 1e-2f,
             "was test_layer_gradients"),
          fd("{type: conv2d, filters: 2, kernel_size: 3, padding: same, strides: 2}", {2, 7, 7}, 2, 22, 1e-2f,
             "was test_layer_gradients"),
          fd("{type: conv2d, filters: 2, kernel_size: [2, 3], use_bias: false}", {1, 5, 6}, 2, 23, 1e-2f,
             "was test_layer_gradients"),
          fd("{type: conv2d, filters: 2, kernel_size: 3, padding: 1}", {2, 4, 5}, 1, 24, 1e-2f,
             "batch 1, odd sizes"),
          ref("{type: conv2d, filters: 4, kernel_size: 3}", {3, 9, 8}, 2, 1, Inputs::uniform(-1, 1),
              "was test_kernels_reference"),
          ref("{type: conv2d, filters: 3, kernel_size: 3, padding: same, strides: 2}", {3, 9, 8}, 2, 1,
              Inputs::uniform(-1, 1), "was test_kernels_reference"),
          ref("{type: conv2d, filters: 2, kernel_size: [3, 2], padding: 1}", {3, 9, 8}, 2, 1,
              Inputs::uniform(-1, 1), "was test_kernels_reference"),
          ref("{type: conv2d, filters: 16, kernel_size: 3, padding: same}", {4, 9, 9}, 3, 1, kWide,
              "was test_gpu_layers"),
          ref("{type: conv2d, filters: 16, kernel_size: 3}", {4, 9, 9}, 2, 1, kWide, "was test_gpu_layers"),
          ref("{type: conv2d, filters: 8, kernel_size: 4, padding: same}", {2, 10, 10}, 3, 1, kWide,
              "even kernel, same: pads (1, 2), which cuDNN cannot describe"),
          ref("{type: conv2d, filters: 16, kernel_size: 3, strides: 2, padding: same}", {4, 10, 10}, 2, 1,
              kWide, "stride 2, same, even size: pads (0, 1)"),
          ref("{type: conv2d, filters: 8, kernel_size: 2, strides: [2, 1], use_bias: false}", {4, 7, 6}, 2, 1,
              kWide, "was test_gpu_layers"),
          ref("{type: conv2d, filters: 16, kernel_size: 2, padding: 1}", {1, 6, 5}, 4, 1, kWide,
              "was test_gpu_layers"),
      }));
  rows.push_back(kernel_row("maxpool2d", reference_pool2d, kFine, pool2d_cases("maxpool2d", 1e-3f)));
  rows.push_back(kernel_row("avgpool2d", reference_pool2d, kFine, pool2d_cases("avgpool2d", 1e-2f)));
  rows.push_back(kernel_row(
      "conv1d", reference_conv1d, kConv,
      {
          fd("{type: conv1d, filters: 3, kernel_size: 3}", {2, 9}, 2, 111, 1e-2f, "was test_layers_more"),
          fd("{type: conv1d, filters: 2, kernel_size: 4, strides: 2, padding: same}", {3, 9}, 2, 112, 1e-2f,
             "was test_layers_more"),
          fd("{type: conv1d, filters: 2, kernel_size: [2], padding: 1, use_bias: false}", {2, 6}, 2, 113,
             1e-2f, "was test_layers_more"),
          fd("{type: conv1d, filters: 2, kernel_size: 3, padding: same}", {2, 5}, 1, 114, 1e-2f, "batch 1"),
          ref("{type: conv1d, filters: 4, kernel_size: 3}", {3, 11}, 2, 171, Inputs::grid(),
              "was test_layers_more"),
          ref("{type: conv1d, filters: 3, kernel_size: 4, strides: 2, padding: same}", {3, 11}, 2, 171,
              Inputs::grid(), "was test_layers_more"),
          ref("{type: conv1d, filters: 2, kernel_size: 3, padding: 2, use_bias: false}", {3, 11}, 2, 171,
              Inputs::grid(), "was test_layers_more"),
          ref("{type: conv1d, filters: 16, kernel_size: 3, padding: same}", {4, 20}, 3, 1, kWide,
              "was test_gpu_layers_more"),
          ref("{type: conv1d, filters: 16, kernel_size: 5}", {4, 30}, 2, 1, kWide,
              "was test_gpu_layers_more"),
          ref("{type: conv1d, filters: 8, kernel_size: 4, padding: same}", {3, 17}, 3, 1, kWide,
              "even kernel, same: pads (1, 2)"),
          ref("{type: conv1d, filters: 16, kernel_size: 3, strides: 2, padding: same}", {4, 20}, 2, 1, kWide,
              "stride 2, same, even length: pads (0, 1)"),
          ref("{type: conv1d, filters: 8, kernel_size: 2, strides: 3, use_bias: false}", {5, 23}, 2, 1, kWide,
              "was test_gpu_layers_more"),
          ref("{type: conv1d, filters: 6, kernel_size: 3, padding: 2}", {7, 11}, 4, 1, kWide,
              "W of 126 floats: the bias in the next 64-float slot"),
          ref("{type: conv1d, filters: 64, kernel_size: 5}", {7, 300}, 4, 1, kWide, "reuters"),
      }));
  rows.push_back(kernel_row("maxpool1d", reference_pool1d, kFine, pool1d_cases("maxpool1d", 1e-3f)));
  rows.push_back(kernel_row("avgpool1d", reference_pool1d, kFine, pool1d_cases("avgpool1d", 1e-2f)));
  rows.push_back(kernel_row(
      "global_max_pool", reference_global_max_pool, kFine,
      {
          fd("{type: global_max_pool}", {3, 7}, 2, 231, 1e-3f, "1-D input"),
          fd("{type: global_max_pool}", {2, 3, 4}, 3, 232, 1e-3f, "2-D input"),
          fd("{type: global_max_pool}", {2, 5}, 1, 233, 1e-3f, "batch 1"),
          ref("{type: global_max_pool}", {5, 17}, 3, 1, kWide),
          ref("{type: global_max_pool}", {2, 3, 4, 5}, 2, 1, kWide, "3-D input"),
          ref("{type: global_max_pool}", {8, 56, 56}, 2, 1, kWide, "ResNet's last feature map size"),
          fd("{type: global_max_pool, channels_last: true}", {7, 3}, 2, 234, 1e-3f,
             "(L, D): a row per position"),
          ref("{type: global_max_pool, channels_last: true}", {64, 48}, 4, 2, kWide, "(L, D), 64 positions"),
      }));
  {
    auto with = [](Case c, std::vector<Shape> more) {
      c.more_inputs = std::move(more);
      return c;
    };
    rows.push_back(
        kernel_row("add", reference_add, kExact,
                   {
                       with(fd("{type: add}", {2, 3, 4}, 2, 241), {{2, 3, 4}}),
                       with(fd("{type: add}", {5}, 1, 242, 1e-2f, "batch 1, three inputs"), {{5}, {5}}),
                       with(ref("{type: add}", {16, 8, 8}, 3, 1, kWide), {{16, 8, 8}}),
                   }));
    rows.push_back(kernel_row(
        "concat", reference_concat, kExact,
        {
            with(fd("{type: concat}", {2, 3, 4}, 2, 251), {{1, 3, 4}}),
            with(fd("{type: concat}", {3}, 1, 252, 1e-2f, "batch 1, three inputs, 1-D"), {{2}, {4}}),
            with(ref("{type: concat}", {16, 8, 8}, 3, 1, kWide), {{8, 8, 8}}),
        }));
  }
  rows.push_back(kernel_row(
      "global_avg_pool", reference_global_avg_pool, kFine,
      {
          fd("{type: global_avg_pool}", {3, 7}, 2, 131, 1e-2f, "was test_layers_more"),
          fd("{type: global_avg_pool}", {2, 3, 4}, 3, 132, 1e-2f, "was test_layers_more"),
          fd("{type: global_avg_pool, channels_last: true}", {7, 3}, 2, 135, 1e-2f,
             "(L, D): a row per position"),
          fd("{type: global_avg_pool, channels_last: true}", {2, 3, 4}, 1, 134, 1e-2f, "(H, W, C)"),
          ref("{type: global_avg_pool, channels_last: true}", {64, 48}, 4, 2, kWide, "(L, D), 64 positions"),
          fd("{type: global_avg_pool}", {2, 5}, 1, 133, 1e-2f, "batch 1"),
          ref("{type: global_avg_pool}", {3, 10}, 2, 182, Inputs::grid(), "was test_layers_more"),
          ref("{type: global_avg_pool}", {2, 5, 6}, 2, 182, Inputs::grid(), "was test_layers_more"),
          ref("{type: global_avg_pool}", {5, 17}, 3, 1, kWide, "was test_gpu_layers_more"),
          ref("{type: global_avg_pool}", {3, 6, 7}, 4, 1, kWide, "was test_gpu_layers_more"),
          ref("{type: global_avg_pool}", {2, 3, 4, 5}, 2, 1, kWide, "3-D input; was test_gpu_layers_more"),
          ref("{type: global_avg_pool}", {64, 1}, 3, 1, kWide, "was test_gpu_layers_more"),
          ref("{type: global_avg_pool}", {8, 56, 56}, 2, 1, kWide, "was test_gpu_layers_more"),
      }));
  {
    std::vector<Case> bn = {
        fd("{type: batchnorm}", {4}, 6, 141, 1e-2f, "was test_layers_more"),
        fd("{type: batchnorm}", {3, 5}, 3, 142, 1e-2f, "was test_layers_more"),
        fd("{type: batchnorm, epsilon: 0.001}", {2, 3, 3}, 2, 143, 1e-2f, "was test_layers_more"),
        eval(fd("{type: batchnorm}", {4}, 3, 151, 1e-2f, "was test_layers_more")),
        eval(fd("{type: batchnorm}", {2, 3, 3}, 3, 151, 1e-2f, "was test_layers_more")),
        fd("{type: batchnorm}", {3, 4}, 3, 161, 1e-2f, "first layer; was test_layers_more"),
        eval(fd("{type: batchnorm}", {3, 4}, 3, 161, 1e-2f, "first layer; was test_layers_more")),
        ref("{type: batchnorm, momentum: 0.2}", {2, 3}, 4, 201, Inputs::grid(),
            "running statistics; was test_layers_more"),
        eval(ref("{type: batchnorm, momentum: 0.2}", {2, 3}, 4, 201, Inputs::grid(), "was test_layers_more")),
    };
    // Was test_gpu_layers_more: mean 1 (the variance must not lose it); training runs two
    // forwards, so the running statistics move twice.
    const char* yaml[] = {"{type: batchnorm}",
                          "{type: batchnorm, momentum: 0.2}",
                          "{type: batchnorm, epsilon: 0.001}",
                          "{type: batchnorm, momentum: 0.01}",
                          "{type: batchnorm}",
                          "{type: batchnorm}",
                          "{type: batchnorm}"};
    const Shape shapes[] = {{12}, {3, 15}, {4, 5, 6}, {2, 3, 4, 5}, {70}, {8, 4000}, {300}};
    const int64_t batches[] = {6, 4, 3, 2, 1, 16, 64};
    const char* notes[] = {"",
                           "",
                           "",
                           "",
                           "n = 1: variance 0, no unbiasing",
                           "64,000 values per channel",
                           "many channels, few values"};
    for (int i = 0; i < 7; ++i) {
      Case c = ref(yaml[i], shapes[i], batches[i], uint64_t(301 + i), Inputs::uniform(-1, 3), notes[i]);
      // Without diff_src oneDNN sums the 64,000 values in another order (no older test compared
      // the two on the CPU for this shape; the GPU stays bit-identical).
      if (i == 5) c.first_layer_margin = {{"cpu", 1e-4}};
      c.forwards = 2;
      bn.push_back(c);
      c.forwards = 1;
      bn.push_back(eval(c));
      // The pair on a 3-D tensor and on many channels. Not on the 512,000 values of case 5: there
      // a y within the CPU-GPU difference of 0 is likely, and its mask would differ across backends.
      if (i == 2 || i == 6) {
        c.forwards = 2;
        bn.push_back(fused_relu(c));
        c.forwards = 1;
        bn.push_back(fused_relu(eval(c)));
      }
    }
    // The pair's gradients by finite differences (h at the kink's scale, as relu's own rows).
    for (const Case& c :
         {fd("{type: batchnorm}", {3, 5}, 3, 142, 1e-3f),
          fd("{type: batchnorm, epsilon: 0.001}", {2, 3, 3}, 2, 143, 1e-3f),
          eval(fd("{type: batchnorm}", {2, 3, 3}, 3, 152, 1e-3f, "151 has a y within h of the kink")),
          fd("{type: batchnorm}", {3, 4}, 3, 161, 1e-3f, "first layer")})
      bn.push_back(fused_relu(c));
    Row r = kernel_row("batchnorm", reference_batchnorm, {1e-5, 1e-4, 1e-4, 1e-5}, bn);
    // oneDNN's backward without diff_src is another primitive (was test_layers_more:
    // Approx(g).margin(1e-5), i.e. max(1e-5, 1.19e-5 |g|)).
    r.first_layer_margin = {{"cpu", 1e-5}};
    rows.push_back(r);
  }
  rows.push_back(kernel_row(
      "position_embedding", reference_position_embedding, kExact,
      {
          fd("{type: position_embedding}", {4, 3}, 3, 411, 1e-2f, "(L, D)"),
          fd("{type: position_embedding}", {5}, 1, 412, 1e-2f, "batch 1"),
          eval(fd("{type: position_embedding}", {4, 3}, 2, 413, 1e-2f, "inference adds the same")),
          ref("{type: position_embedding}", {128, 48}, 16, 1, kWide, "16 samples of 128 positions"),
          ref("{type: position_embedding}", {2, 3, 5}, 7, 2, kWide, "rank 3"),
      }));
  Row attention = kernel_row(
      "multi_head_attention", reference_attention, kConv,
      {
          fd("{type: multi_head_attention, heads: 2}", {4, 6}, 2, 501, 1e-2f, "two heads of 3"),
          fd("{type: multi_head_attention, heads: 1, causal: true}", {5, 4}, 2, 502, 1e-2f, "causal"),
          fd("{type: multi_head_attention, heads: 3, causal: true, use_bias: false}", {3, 6}, 1, 503, 1e-2f,
             "batch 1, no biases"),
          fd("{type: multi_head_attention, heads: 2, dropout: 0.3}", {4, 4}, 2, 504, 1e-2f,
             "dropout on the weights"),
          eval(fd("{type: multi_head_attention, heads: 2, dropout: 0.3, causal: true}", {4, 4}, 2, 505, 1e-2f,
                  "inference: no dropout")),
          ref("{type: multi_head_attention, heads: 4, causal: true}", {32, 64}, 3, 1, kWide,
              "32 positions, 4 heads of 16"),
          ref("{type: multi_head_attention, heads: 2}", {40, 16}, 2, 2, kWide, "a row longer than a warp"),
          ref("{type: multi_head_attention, heads: 4, causal: true, dropout: 0.1}", {24, 32}, 2, 3, kWide,
              "causal with dropout"),
          ref("{type: multi_head_attention, heads: 2, causal: true}", {512, 16}, 2, 4, kWide,
              "512 positions: the GPU's products in 4 causal blocks"),
          ref("{type: multi_head_attention, heads: 1, causal: true, dropout: 0.2}", {512, 8}, 1, 5, kWide,
              "causal blocks with dropout"),
          fd("{type: multi_head_attention, heads: 2, rotary: true}", {5, 8}, 2, 508, 1e-2f,
             "rotary positions: q and k turned pair by pair"),
          fd("{type: multi_head_attention, heads: 1, causal: true, rotary: true, rotary_base: 100}", {4, 6},
             2, 509, 1e-2f, "rotary, causal, another base"),
          rounded_twice(ref("{type: multi_head_attention, heads: 4, causal: true, rotary: true}", {64, 64}, 3,
                            8, kWide, "rotary over 64 positions")),
          rounded_twice(
              masked(ref("{type: multi_head_attention, heads: 2, causal: true, rotary: true}", {512, 32}, 1,
                         9, kWide, "rotary with the mask in the GPU's causal blocks"))),
          masked(fd("{type: multi_head_attention, heads: 2}", {5, 4}, 3, 506, 1e-2f,
                    "key-padding mask: keys of id 0 get no weight")),
          masked(fd("{type: multi_head_attention, heads: 2, causal: true, dropout: 0.3}", {6, 4}, 3, 507,
                    1e-2f, "causal with the mask and dropout: queries with no key left give 0")),
          masked(ref("{type: multi_head_attention, heads: 4, causal: true}", {32, 64}, 3, 6, kWide,
                     "masked, 32 positions")),
          masked(ref("{type: multi_head_attention, heads: 2, causal: true}", {512, 16}, 2, 7, kWide,
                     "masked, the GPU's 4 causal blocks")),
          // Heads of 32, 64 and 128 without dropout: the GPU's fused kernels in 16 bits
          // (flash_attention.cuh), over lengths that are not whole tiles of 64. Inputs in [-1, 1]:
          // with [-2, 2] the scores of 128 features are sharp enough that the CPU's fp32 softmax
          // differs from float64 by 1e-4 relative.
          ref("{type: multi_head_attention, heads: 2, causal: true}", {96, 128}, 2, 10, kUnit,
              "heads of 64, causal: fused on the GPU in 16 bits"),
          ref("{type: multi_head_attention, heads: 4}", {40, 128}, 2, 11, kUnit, "heads of 32, fused"),
          masked(ref("{type: multi_head_attention, heads: 1, causal: true}", {130, 128}, 2, 12, kUnit,
                     "masked, a head of 128, fused")),
          rounded_twice(ref("{type: multi_head_attention, heads: 2, causal: true, rotary: true}", {80, 128},
                            2, 13, kUnit, "rotary, fused")),
      });
  // bf16 dx within 1.8e-2 of f32's on an H200 (32 positions, 4 heads of 16), y and the weights'
  // gradients within the usual bounds: dS goes into dq = dS k and dk = dS^T q in 16 bits, as in
  // PyTorch's flash attention.
  attention.low_precision_dx_scale = 3.0;
  rows.push_back(attention);
  for (const char* t : {"lstm", "gru"}) {
    const std::string y = std::string("{type: ") + t;
    rows.push_back(kernel_row(
        t, reference_recurrent, kConv,
        {
            fd(y + ", units: 3}", {4, 2}, 2, 601, 1e-2f, "the last h"),
            fd(y + ", units: 2, return_sequences: true}", {5, 3}, 2, 602, 1e-2f, "every position's h"),
            fd(y + ", units: 2, bidirectional: true}", {4, 3}, 2, 603, 1e-2f, "both directions' last h"),
            fd(y + ", units: 3, return_sequences: true, bidirectional: true}", {3, 2}, 1, 604, 1e-2f,
               "batch 1, both directions at every position"),
            fd(y + ", units: 4}", {1, 3}, 3, 605, 1e-2f, "one position"),
            eval(fd(y + ", units: 3, return_sequences: true}", {4, 2}, 2, 606, 1e-2f,
                    "inference computes the same")),
            ref(y + ", units: 32}", {20, 16}, 4, 1, kWide, "20 steps of 32 units"),
            ref(y + ", units: 48, return_sequences: true, bidirectional: true}", {16, 24}, 3, 2, kWide,
                "bidirectional sequences of 48 units"),
            ref(y + ", units: 7, bidirectional: true}", {50, 5}, 5, 3, kWide,
                "50 steps, units not a multiple of 4"),
            masked(fd(y + ", units: 3, return_sequences: true, bidirectional: true}", {6, 2}, 3, 607, 1e-2f,
                      "masked: ids 0 skipped (every position's h, both directions)")),
            masked(
                fd(y + ", units: 2}", {5, 3}, 4, 608, 1e-2f, "masked: the last state carried past padding")),
            masked(ref(y + ", units: 32, bidirectional: true}", {20, 8}, 6, 8, kWide, "masked, 32 units")),
            masked(ref(y + ", units: 128, return_sequences: true}", {12, 16}, 4, 9, kWide,
                       "masked, W_hh in registers over a cluster of 2")),
            masked(ref(y + ", units: 160}", {6, 8}, 3, 10, kWide, "masked, W_hh in shared memory")),
            masked(ref(y + ", units: 512, bidirectional: true}", {4, 3}, 3, 11, kWide,
                       "masked, the L2 kernels")),
            ref(y + ", units: 128, bidirectional: true}", {12, 16}, 5, 7, kWide,
                "W_hh in registers over a cluster of 2 blocks (reuters_lstm's units)"),
            ref(y + ", units: 160, return_sequences: true}", {6, 8}, 3, 4, kWide,
                "W_hh over 227 KB: the GPU splits the units over a cluster of 2 blocks"),
            ref(y + ", units: 256, bidirectional: true}", {5, 4}, 9, 5, kWide,
                "a cluster of 8 blocks (lstm), 4 (gru); 9 rows"),
            ref(y + ", units: 512}", {4, 3}, 2, 6, kWide,
                "too large for a cluster: W_hh read from L2 every step"),
        }));
  }
  for (const char* t : {"layer_norm", "rms_norm"}) {
    const std::string type = t, bias_off = type == "layer_norm" ? ", bias: false" : ", epsilon: 1.0e-5";
    std::vector<Case> v = {
        fd("{type: " + type + "}", {6}, 3, 401, 1e-2f, "one row a sample"),
        fd("{type: " + type + "}", {4, 5}, 2, 402, 1e-2f, "(positions, features): a row per position"),
        fd("{type: " + type + bias_off + "}", {3, 7}, 2, 403, 1e-2f),
        fd("{type: " + type + ", epsilon: 0.5}", {2, 3, 4}, 1, 404, 1e-2f,
           "batch 1, rank 3, a large epsilon"),
        eval(fd("{type: " + type + "}", {4, 5}, 2, 402, 1e-2f, "inference computes the same")),
        ref("{type: " + type + "}", {16, 64}, 4, 1, kWide, "64 rows of 64"),
        ref("{type: " + type + "}", {5, 768}, 3, 2, Inputs::uniform(-1, 3), "GPT-2's width, mean 1"),
        ref("{type: " + type + "}", {3, 1000}, 2, 3, kWide, "d not a multiple of the block"),
        ref("{type: " + type + "}", {300, 24}, 8, 4, kWide,
            "2,400 rows: several chunks of the parameter sums"),
        ref("{type: " + type + ", epsilon: 0.5}", {1}, 5, 5, kWide,
            "d = 1 (epsilon 0.5: with a tiny one, rms_norm's dx is 1 - xhat^2, all cancellation)"),
    };
    v.back().dx_noise = type == "layer_norm";  // over one feature its dx is 0: y = b whatever x is
    rows.push_back(kernel_row(type, reference_layer_norm, {1e-5, 1e-5, 1e-5, 1e-5}, v));
  }
  for (const char* t : {"relu", "sigmoid", "tanh", "gelu", "leaky_relu"}) {
    const std::string type = t;
    std::vector<Case> v = {
        fd("{type: " + type + "}", {3, 4}, 2, 41, 1e-3f, "was test_layer_gradients"),
        fd("{type: " + type + "}", {6}, 1, 44, 1e-3f,
           "batch 1 (an even size: an odd grid holds 0, the kink)"),
        ref("{type: " + type + "}", {4}, 3, 6, Inputs::uniform(-3, 3), "was test_kernels_reference"),
        ref(type == "leaky_relu" ? "{type: leaky_relu, alpha: 0.2}" : "{type: " + type + "}", {3, 4, 5}, 4, 1,
            kWide, "was test_gpu_layers"),
    };
    if (type == "leaky_relu") v.push_back(fd("{type: leaky_relu, alpha: 0.3}", {7}, 2, 45, 1e-3f, "alpha"));
    if (type == "gelu") {
      v.push_back(fd("{type: gelu, approximate: tanh}", {3, 4}, 2, 47, 1e-3f, "GPT-2's tanh form"));
      v.push_back(ref("{type: gelu, approximate: tanh}", {4}, 3, 6, Inputs::uniform(-6, 6), "tails"));
      v.push_back(ref("{type: gelu, approximate: tanh}", {3, 4, 5}, 4, 1, kWide, "tanh form"));
    }
    rows.push_back(kernel_row(type, reference_activation, kFine, v));
  }
  for (const char* t : {"softmax", "log_softmax"}) {
    const std::string type = t;
    std::vector<Case> v = {
        fd("{type: " + type + "}", {6}, 3, type == "softmax" ? 42 : 43, 1e-2f, "was test_layer_gradients"),
        fd("{type: " + type + "}", {5}, 1, 46, 1e-2f, "batch 1"),
        ref("{type: " + type + "}", {4}, 3, 6, Inputs::uniform(-3, 3), "was test_kernels_reference"),
        ref("{type: " + type + "}", {10}, 8, 1, kWide, "was test_gpu_layers"),
    };
    if (type == "log_softmax")
      v.push_back(ref("{type: log_softmax}", {1000}, 3, 1, kWide, "was test_gpu_layers"));
    rows.push_back(kernel_row(type, reference_activation, kFine, v));
  }
  {
    Row r = kernel_row("dropout", reference_dropout, kExact,
                       {
                           fd("{type: dropout, rate: 0.4}", {10}, 3, 51, 1e-2f, "was test_layer_gradients"),
                           ref("{type: dropout, rate: 0.3}", {6, 5, 4}, 4, 11, Inputs::uniform(-1, 1),
                               "the same mask on every backend; was test_gpu_layers"),
                           eval(ref("{type: dropout, rate: 0.3}", {6, 5, 4}, 4, 11, Inputs::uniform(-1, 1),
                                    "was test_gpu_layers")),
                           fd("{type: dropout, rate: 0.5}", {9}, 1, 53, 1e-2f, "batch 1"),
                       });
    r.property = dropout_property;
    rows.push_back(r);
    r = kernel_row(
        "dropout2d", reference_dropout, kExact,
        {
            fd("{type: dropout2d, rate: 0.5}", {4, 3, 3}, 2, 52, 1e-2f, "was test_layer_gradients"),
            ref("{type: dropout2d, rate: 0.5}", {6, 5, 4}, 4, 11, Inputs::uniform(-1, 1),
                "the same mask on every backend; was test_gpu_layers"),
            eval(ref("{type: dropout2d, rate: 0.5}", {6, 5, 4}, 4, 11, Inputs::uniform(-1, 1),
                     "was test_gpu_layers")),
            ref("{type: dropout2d, rate: 0.5}", {8, 3, 3}, 4, 62, Inputs::uniform(1, 1),
                "whole channels; was test_gpu_layers"),
            ref("{type: dropout2d, rate: 0.5}", {8, 4, 4}, 4, 62, Inputs::grid(),
                "whole channels; was test_layer_gradients"),
        });
    r.property = dropout_property;
    rows.push_back(r);
  }
  {
    const std::string clamped = "were clamped";
    Case repeated = fd("{type: embedding, input_dim: 9, output_dim: 3}", {5}, 3, 101, 1e-2f,
                       "a repeated id: its rows add up; was test_layers_more");
    repeated.inputs = Inputs::tokens(9);
    repeated.set_inputs = {{0, 4.f}, {1, 4.f}};
    Case batch1 = fd("{type: embedding, input_dim: 4, output_dim: 2}", {3}, 1, 102, 1e-2f, "batch 1");
    batch1.inputs = Inputs::tokens(4);
    Case clamp = ref("{type: embedding, input_dim: 6, output_dim: 4}", {5}, 2, 191, Inputs::tokens(6),
                     "out-of-range ids clamp; was test_layers_more");
    clamp.set_inputs = {{0, 0}, {1, 5}, {2, 2}, {3, 2}, {4, 3}, {5, 1}, {6, 4}, {7, -3}, {8, 6}, {9, 1e9f}};
    clamp.expect_warning = clamped;
    Case text = ref("{type: embedding, input_dim: 50, output_dim: 8}", {300}, 8, 5, Inputs::tokens(50, 0.6),
                    "padding-heavy text, ids to clamp: negative, fractional, too large, NaN, -0; was "
                    "test_gpu_layers_more");
    text.set_inputs = {
        {3, -3.f},   {10, 2.5f},   {11, 50.f}, {400, 1e9f}, {401, std::numeric_limits<float>::quiet_NaN()},
        {999, -0.f}, {2399, 49.5f}};
    text.expect_warning = clamped;
    Case one_id = ref("{type: embedding, input_dim: 30, output_dim: 33}", {64}, 5, 9, Inputs::tokens(30),
                      "one id everywhere");
    for (size_t i = 0; i < 320; ++i) one_id.set_inputs.push_back({i, 12.f});
    Case rows_first = fd("{type: embedding, input_dim: 9, output_dim: 3, channels_first: false}", {5}, 3, 103,
                         1e-2f, "(L, D) output; a repeated id");
    rows_first.inputs = Inputs::tokens(9);
    rows_first.set_inputs = {{0, 4.f}, {1, 4.f}};
    Row r =
        kernel_row("embedding", reference_embedding, {0, 0, 1e-5, 1e-5},
                   {
                       repeated,
                       batch1,
                       clamp,
                       text,
                       ref("{type: embedding, input_dim: 6, output_dim: 4}", {5}, 2, 6,
                           Inputs::tokens(6, 0.2), "was test_gpu_layers_more"),
                       ref("{type: embedding, input_dim: 1000, output_dim: 7}", {40}, 3, 7,
                           Inputs::tokens(1000), "D = 7: odd thread layout"),
                       one_id,
                       ref("{type: embedding, input_dim: 1, output_dim: 3}", {9}, 2, 8,
                           Inputs::tokens(1, 0.5), "a vocabulary of one"),
                       rows_first,
                       ref("{type: embedding, input_dim: 1000, output_dim: 48, channels_first: false}", {64},
                           3, 10, Inputs::tokens(1000, 0.1), "(L, D): a row per position, several chunks"),
                       ref("{type: embedding, input_dim: 50, output_dim: 7, channels_first: false}", {300}, 8,
                           11, Inputs::tokens(50, 0.6), "(L, D), padding-heavy, repeated ids"),
                   });
    r.input_differentiable = false;
    r.property = embedding_property;
    rows.push_back(r);
  }
  {
    Row flatten;
    flatten.type = "flatten";
    flatten.no_kernel = "a view: the output is the input reinterpreted, no kernel runs";
    flatten.cases = {fd("{type: flatten}", {2, 3, 4}, 1, 1), fd("{type: flatten}", {5, 7}, 1, 1)};
    rows.push_back(flatten);
    Row identity;
    identity.type = "identity";
    identity.no_kernel = "a view: the output is the input, no kernel runs";
    identity.cases = {fd("{type: identity}", {2, 3, 4}, 1, 1), fd("{type: identity}", {5}, 1, 1)};
    rows.push_back(identity);
    Row mlp;
    mlp.type = "mlp";
    mlp.no_kernel = "a macro: the model expands it into dense and activation layers, whose rows cover it";
    rows.push_back(mlp);
  }
  return rows;
}

}  // namespace

// Every f32 row again as a bf16 and an fp16 row: the same cases, checked against f32 (see the
// header).
std::vector<Row> with_low_precision_rows(std::vector<Row> rows) {
  const size_t n = rows.size();
  for (DType t : {DType::bf16, DType::f16})
    for (size_t i = 0; i < n; ++i) {
      Row r = rows[i];
      r.dtype = t;
      r.property = nullptr;
      rows.push_back(std::move(r));
    }
  return rows;
}

const std::vector<Row>& conformance_table() {
  static const std::vector<Row> rows = with_low_precision_rows(build_table());
  return rows;
}

}  // namespace trainer::conformance
