#include "lib/train/generate.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include "lib/core/error.h"
#include "lib/core/rng.h"
#include "lib/data/data_formats.h"
#include "lib/train/checkpointing.h"
#include "lib/train/session.h"

namespace trainer {
namespace {

constexpr uint64_t kGenerateSalt = 0x67656e6572617465ull;  // "generate"

// The prompt's tokens: a text's bytes, or ids for format tokens.
std::vector<int32_t> prompt_tokens(const std::string& prompt, bool bytes, int64_t classes) {
  std::vector<int32_t> ids;
  if (bytes) {
    for (unsigned char c : prompt) ids.push_back(int32_t(c));
    return ids;
  }
  std::string s = prompt;
  std::replace(s.begin(), s.end(), ',', ' ');
  std::istringstream in(s);
  std::string word;
  while (in >> word) {
    char* end = nullptr;
    const long long v = std::strtoll(word.c_str(), &end, 10);
    if (end == word.c_str() || *end != '\0' || v < 0 || v >= classes)
      throw UsageError("--prompt: '" + word + "' is not a token id in [0, " + std::to_string(classes) +
                       ") (a model trained on format tokens takes ids separated by spaces or commas)");
    ids.push_back(int32_t(v));
  }
  return ids;
}

}  // namespace

int32_t sample_token(const float* logits, int64_t C, double temperature, int64_t top_k, double u) {
  if (temperature <= 0) return int32_t(std::max_element(logits, logits + C) - logits);
  std::vector<int32_t> order(static_cast<size_t>(C));
  std::iota(order.begin(), order.end(), 0);
  int64_t keep = top_k > 0 ? std::min(top_k, C) : C;
  // The kept tokens, most likely first (ties: the lower id first, so the draw is reproducible).
  const auto higher = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  if (keep < C) std::partial_sort(order.begin(), order.begin() + keep, order.end(), higher);
  const double mx = *std::max_element(logits, logits + C);
  std::vector<double> p(static_cast<size_t>(keep));
  double sum = 0;
  for (int64_t i = 0; i < keep; ++i)
    sum += p[size_t(i)] = std::exp((double(logits[order[size_t(i)]]) - mx) / temperature);
  double at = u * sum;
  for (int64_t i = 0; i < keep; ++i) {
    at -= p[size_t(i)];
    if (at < 0) return order[size_t(i)];
  }
  return order[size_t(keep - 1)];
}

std::vector<int32_t> generate_tokens(const Config& cfg, const GenerateOptions& o, std::ostream& out) {
  const DataFormat* f = section_format(cfg.data.train);
  const bool bytes = f && f->name == "text";
  if (cfg.loss_config.positions <= 1 || !f || !f->per_position())
    throw UsageError(cfg.file +
                     ": generate samples from a language model, trained on data.train.format text or tokens; "
                     "this run's model predicts one class a sample (use trainer predict)");
  const NormalizeConfig& norm = cfg.data.normalize;
  if (norm.mean.size() > 1 || norm.std.size() > 1)
    throw ConfigError(cfg.file +
                      ": data.normalize.mean/std: token ids have one channel; give one value or none");
  const std::string weights = resolve_weights(o.weights);
  auto model = make_model(cfg);
  const HostWeights w = load_weights(weights, *model, "--weights");
  const int64_t T = cfg.loss_config.positions, C = model->output_shape().dims.back();
  std::vector<int32_t> context = prompt_tokens(o.prompt, bytes, C);
  if (context.empty()) context.push_back(bytes ? int32_t('\n') : 0);  // nothing to go on: a new line
  auto s = open_session(cfg, o.device, {1}, std::move(model));
  upload_weights(*s, w);
  // The loader's arithmetic for one channel (datasets/batch_loader.h): x * scale / std - mean / std.
  const float stdv = norm.std.empty() ? 1.f : float(norm.std[0]),
              mean = norm.mean.empty() ? 0.f : float(norm.mean[0]);
  const float mul = float(norm.scale) / stdv, add = -mean / stdv;
  std::vector<float> x(static_cast<size_t>(T)), logits(static_cast<size_t>(T * C));
  SplitMix64 rng(mix64(o.seed ^ kGenerateSalt));
  std::vector<int32_t> made;
  for (int64_t n = 0; n < o.tokens; ++n) {
    const int64_t have = int64_t(context.size()), first = std::max<int64_t>(0, have - T), used = have - first;
    std::fill(x.begin(), x.end(), add);
    for (int64_t t = 0; t < used; ++t) x[size_t(t)] = float(context[size_t(first + t)]) * mul + add;
    s->executor->predict(1, x.data(), logits.data());
    const int32_t next =
        sample_token(logits.data() + (used - 1) * C, C, o.temperature, o.top_k, rng.uniform());
    context.push_back(next);
    made.push_back(next);
    if (bytes)
      out.put(char(next));
    else
      out << (n ? " " : "") << next;
    out.flush();
  }
  if (!bytes) out << "\n";
  out.flush();
  return made;
}

}  // namespace trainer
