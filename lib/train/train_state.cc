#include "lib/train/train_state.h"

#include <cmath>
#include <cstdint>
#include <iterator>
#include <vector>

#include "lib/core/error.h"

namespace trainer {
namespace {

const char* kStateKey = "trainer.state";

nlohmann::json scalars_json(const StepScalars& s) {
  // Floats widen to doubles exactly and JSON keeps doubles exactly: the values come back bit for bit.
  return {{"lr", s.lr},
          {"optimizer_scalars", std::vector<double>(std::begin(s.optim), std::end(s.optim))},
          {"step", s.step},
          {"seed", s.seed}};
}

}  // namespace

nlohmann::json train_state_json(const TrainState& s) {
  nlohmann::json j = {{"epochs_done", s.epochs_done},
                      {"batches_done", s.batches_done},
                      {"step", s.step},
                      {"scalars", scalars_json(s.scalars)},
                      {"partial",
                       {{"loss_sum", s.partial.loss_sum},
                        {"samples", s.partial.samples},
                        {"confusion", s.partial.confusion},
                        {"topk", s.partial.topk},
                        {"nonfinite",
                         {{"first_step", s.partial.nonfinite.first_step},
                          {"steps", s.partial.nonfinite.steps},
                          {"samples", s.partial.nonfinite.samples},
                          {"first_what", s.partial.nonfinite.first_what},
                          {"what", s.partial.nonfinite.what}}}}},
                      {"skipped_batches", s.skipped_batches},
                      {"first_loss", s.first_loss},
                      {"first_loss_epoch", s.first_loss_epoch},
                      {"schedule", s.schedule},
                      {"early_stopping", s.early_stopping},
                      {"best", s.best},
                      {"seconds", s.seconds},
                      {"optimizer", s.optimizer},
                      {"seed", s.seed},
                      {"batch_size", s.batch_size},
                      {"train_samples", s.train_samples}};
  if (!s.checkpoint_id.empty()) j["checkpoint_id"] = s.checkpoint_id;
  if (s.cpu_threads > 0) j["cpu_threads"] = s.cpu_threads;
  if (!s.summary.is_null()) j["summary"] = s.summary;
  if (s.has_loss_scale)
    j["loss_scale"] = {{"scale", s.loss_scale.scale},
                       {"good_steps", s.loss_scale.good_steps},
                       {"overflow_steps", s.loss_scale.overflow_steps}};
  return j;
}

TrainState train_state_from_json(const nlohmann::json& j, const std::string& path) {
  // Every field is checked for its type and range: a state that names a negative epoch or step
  // would otherwise train from "epoch -4/5" or silently from another epoch.
  const std::string where = path + ": the training state (" + kStateKey + ")";
  const auto damaged = [&](const std::string& what) { return DataError(where + " is damaged: " + what); };
  const auto at = [&](const nlohmann::json& o, const std::string& key) -> const nlohmann::json& {
    if (!o.is_object()) throw damaged("'" + key + "' is in something that is not an object");
    const auto it = o.find(key);
    if (it == o.end()) throw DataError(where + " is incomplete: key '" + key + "' not found");
    return *it;
  };
  const auto shown = [](const nlohmann::json& v) {
    std::string t = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return t.size() > 40 ? t.substr(0, 40) + "..." : t;
  };
  const auto count = [&](const nlohmann::json& o, const std::string& key, int64_t min) {
    const nlohmann::json& v = at(o, key);
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)) ||
        v.get<int64_t>() < min)
      throw damaged("'" + key + "' is " + shown(v) + ", not an integer of at least " + std::to_string(min));
    return v.get<int64_t>();
  };
  const auto unsigned_count = [&](const nlohmann::json& o, const std::string& key) {
    const nlohmann::json& v = at(o, key);
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
      throw damaged("'" + key + "' is " + shown(v) + ", not an integer of at least 0");
    return v.get<uint64_t>();
  };
  const auto number = [&](const nlohmann::json& o, const std::string& key, bool finite) {
    const nlohmann::json& v = at(o, key);
    if (!v.is_number() || (finite && !std::isfinite(v.get<double>())))
      throw damaged("'" + key + "' is " + shown(v) + ", not a " + (finite ? "finite " : "") + "number");
    return v.get<double>();
  };
  // A float of the step's scalars: 1e300 is a finite JSON number but an infinite float.
  const auto finite_float = [&](const nlohmann::json& o, const std::string& key) {
    const float f = float(number(o, key, true));
    if (!std::isfinite(f)) throw damaged("'" + key + "' is " + shown(at(o, key)) + ", not a finite float");
    return f;
  };
  const auto numbers = [&](const nlohmann::json& o, const std::string& key) {
    const nlohmann::json& v = at(o, key);
    std::vector<double> out;
    if (v.is_array())
      for (const auto& x : v) {
        if (!x.is_number()) break;
        out.push_back(x.get<double>());
      }
    if (!v.is_array() || out.size() != v.size()) throw damaged("'" + key + "' is not a list of numbers");
    return out;
  };
  const auto optional = [&](const std::string& key, auto read, auto fallback) {
    return j.is_object() && j.contains(key) ? read(j, key) : fallback;
  };
  const auto component = [&](const std::string& key) {
    if (!j.is_object() || !j.contains(key)) return nlohmann::json();
    const nlohmann::json& v = j.at(key);
    if (!v.is_object() && !v.is_null()) throw damaged("'" + key + "' is " + shown(v) + ", not an object");
    return v;
  };
  if (!j.is_object()) throw damaged("it is " + shown(j) + ", not an object");
  TrainState s;
  s.epochs_done = count(j, "epochs_done", 0);
  s.batches_done = count(j, "batches_done", 0);
  s.step = count(j, "step", 0);
  const nlohmann::json& sc = at(j, "scalars");
  s.scalars.lr = finite_float(sc, "lr");
  // The optimizer's scalars (StepScalars::optim); checkpoints before the optimizer registry named
  // the Adam family's five, in the same order.
  if (sc.is_object() && sc.contains("optimizer_scalars")) {
    const std::vector<double> o = numbers(sc, "optimizer_scalars");
    if (o.size() != size_t(kOptimizerScalars))
      throw damaged("'optimizer_scalars' has " + std::to_string(o.size()) + " numbers, not " +
                    std::to_string(kOptimizerScalars));
    for (size_t k = 0; k < o.size(); ++k) {
      // JSON holds no infinity, but 1e300 is one as a float.
      s.scalars.optim[k] = float(o[k]);
      if (!std::isfinite(s.scalars.optim[k]))
        throw damaged("'optimizer_scalars' holds a number that is not a finite float");
    }
  } else {
    const char* legacy[kOptimizerScalars] = {"bias_correction1", "bias_correction2", "momentum_product",
                                             "mu_t", "mu_next"};
    for (int k = 0; k < kOptimizerScalars; ++k) s.scalars.optim[k] = finite_float(sc, legacy[k]);
  }
  s.scalars.step = unsigned_count(sc, "step");
  s.scalars.seed = unsigned_count(sc, "seed");
  const nlohmann::json& p = at(j, "partial");
  s.partial.loss_sum = number(p, "loss_sum", false);
  s.partial.samples = count(p, "samples", 0);
  s.partial.confusion = numbers(p, "confusion");
  s.partial.topk = numbers(p, "topk");
  if (p.contains("nonfinite")) {  // absent in checkpoints of older versions
    const nlohmann::json& n = at(p, "nonfinite");
    s.partial.nonfinite.first_step = unsigned_count(n, "first_step");
    s.partial.nonfinite.steps = unsigned_count(n, "steps");
    s.partial.nonfinite.samples = unsigned_count(n, "samples");
    const uint64_t first_what = unsigned_count(n, "first_what"), what = unsigned_count(n, "what");
    if (first_what > UINT32_MAX || what > UINT32_MAX) throw damaged("'nonfinite' holds a flag out of range");
    s.partial.nonfinite.first_what = uint32_t(first_what);
    s.partial.nonfinite.what = uint32_t(what);
  }
  s.skipped_batches = optional(
      "skipped_batches", [&](auto& o, auto& k) { return count(o, k, 0); }, int64_t(0));
  s.first_loss = optional(
      "first_loss", [&](auto& o, auto& k) { return number(o, k, false); }, 0.0);
  s.first_loss_epoch = optional(
      "first_loss_epoch", [&](auto& o, auto& k) { return count(o, k, 0); }, int64_t(0));
  s.schedule = component("schedule");
  s.early_stopping = component("early_stopping");
  s.best = component("best");
  s.summary = component("summary");
  s.seconds = optional(
      "seconds", [&](auto& o, auto& k) { return number(o, k, true); }, 0.0);
  if (s.seconds < 0) throw damaged("'seconds' is negative");
  const nlohmann::json& opt = at(j, "optimizer");
  if (!opt.is_string()) throw damaged("'optimizer' is " + shown(opt) + ", not a name");
  s.optimizer = opt.get<std::string>();
  s.seed = unsigned_count(j, "seed");
  s.batch_size = count(j, "batch_size", 1);
  s.train_samples = count(j, "train_samples", 1);
  s.checkpoint_id = optional(
      "checkpoint_id",
      [&](auto& o, auto& k) {
        const nlohmann::json& v = at(o, k);
        if (!v.is_string()) throw damaged("'checkpoint_id' is " + shown(v) + ", not a string");
        return v.template get<std::string>();
      },
      std::string());
  s.cpu_threads = optional(
      "cpu_threads", [&](auto& o, auto& k) { return count(o, k, 1); }, int64_t(0));
  if (s.cpu_threads > 4096)
    throw damaged("'cpu_threads' is " + std::to_string(s.cpu_threads) + ", above 4096");
  if (j.contains("loss_scale")) {
    const nlohmann::json& l = at(j, "loss_scale");
    s.has_loss_scale = true;
    s.loss_scale.scale = float(number(l, "scale", true));
    s.loss_scale.good_steps = unsigned_count(l, "good_steps");
    s.loss_scale.overflow_steps = unsigned_count(l, "overflow_steps");
    if (!(s.loss_scale.scale > 0.f) || !std::isfinite(s.loss_scale.scale))
      throw DataError(path + ": the training state's loss scale " + std::to_string(s.loss_scale.scale) +
                      " is not a positive number");
    s.loss_scale.inv_scale = 1.f / s.loss_scale.scale;
  }
  return s;
}

}  // namespace trainer
