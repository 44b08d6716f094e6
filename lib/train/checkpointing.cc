#include "lib/train/checkpointing.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "lib/checkpoint/atomic_file.h"
#include "lib/checkpoint/safetensors.h"
#include "lib/core/error.h"
#include "lib/core/file_kind.h"
#include "trainer_version.h"

namespace fs = std::filesystem;

namespace trainer {
namespace {

const char* kStateKey = "trainer.state";

// PyTorch's names for each optimizer's per-parameter state.
std::vector<std::string> slot_names(const OptimizerConfig& c, int slots) {
  std::vector<std::string> names;
  if (c.type == "sgd")
    names = {"momentum_buffer"};
  else if (c.type == "rmsprop")
    names = {"square_avg", "momentum_buffer", "grad_avg"};
  else
    names = {"exp_avg", "exp_avg_sq"};
  names.resize(size_t(slots));
  for (int i = 0; i < slots; ++i)
    if (names[size_t(i)].empty()) names[size_t(i)] = "state" + std::to_string(i);
  return names;
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

nlohmann::json scalars_json(const StepScalars& s) {
  // Floats widen to doubles exactly and JSON keeps doubles exactly: the values come back bit for bit.
  return {{"lr", s.lr},
          {"bias_correction1", s.bias_correction1},
          {"bias_correction2", s.bias_correction2},
          {"momentum_product", s.momentum_product},
          {"mu_t", s.mu_t},
          {"mu_next", s.mu_next},
          {"step", s.step},
          {"seed", s.seed}};
}

StepScalars scalars_from(const nlohmann::json& j) {
  StepScalars s;
  s.lr = j.at("lr").get<float>();
  s.bias_correction1 = j.at("bias_correction1").get<float>();
  s.bias_correction2 = j.at("bias_correction2").get<float>();
  s.momentum_product = j.at("momentum_product").get<float>();
  s.mu_t = j.at("mu_t").get<float>();
  s.mu_next = j.at("mu_next").get<float>();
  s.step = j.at("step").get<uint64_t>();
  s.seed = j.at("seed").get<uint64_t>();
  return s;
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
  if (s.has_loss_scale)
    j["loss_scale"] = {{"scale", s.loss_scale.scale},
                       {"good_steps", s.loss_scale.good_steps},
                       {"overflow_steps", s.loss_scale.overflow_steps}};
  return j;
}

TrainState train_state_from_json(const nlohmann::json& j, const std::string& path) {
  try {
    TrainState s;
    s.epochs_done = j.at("epochs_done").get<int64_t>();
    s.batches_done = j.at("batches_done").get<int64_t>();
    s.step = j.at("step").get<int64_t>();
    s.scalars = scalars_from(j.at("scalars"));
    const auto& p = j.at("partial");
    s.partial.loss_sum = p.at("loss_sum").get<double>();
    s.partial.samples = p.at("samples").get<int64_t>();
    s.partial.confusion = p.at("confusion").get<std::vector<double>>();
    s.partial.topk = p.at("topk").get<std::vector<double>>();
    if (p.contains("nonfinite")) {  // absent in checkpoints of older versions
      const auto& n = p.at("nonfinite");
      s.partial.nonfinite.first_step = n.at("first_step").get<uint64_t>();
      s.partial.nonfinite.steps = n.at("steps").get<uint64_t>();
      s.partial.nonfinite.samples = n.at("samples").get<uint64_t>();
      s.partial.nonfinite.first_what = n.at("first_what").get<uint32_t>();
      s.partial.nonfinite.what = n.at("what").get<uint32_t>();
    }
    s.skipped_batches = j.value("skipped_batches", int64_t(0));
    s.first_loss = j.value("first_loss", 0.0);
    s.first_loss_epoch = j.value("first_loss_epoch", int64_t(0));
    s.schedule = j.value("schedule", nlohmann::json());
    s.early_stopping = j.value("early_stopping", nlohmann::json());
    s.best = j.value("best", nlohmann::json());
    s.seconds = j.value("seconds", 0.0);
    s.optimizer = j.at("optimizer").get<std::string>();
    s.seed = j.at("seed").get<uint64_t>();
    s.batch_size = j.at("batch_size").get<int64_t>();
    s.train_samples = j.at("train_samples").get<int64_t>();
    if (j.contains("loss_scale")) {
      const auto& l = j.at("loss_scale");
      s.has_loss_scale = true;
      s.loss_scale.scale = l.at("scale").get<float>();
      s.loss_scale.good_steps = l.at("good_steps").get<uint64_t>();
      s.loss_scale.overflow_steps = l.at("overflow_steps").get<uint64_t>();
      if (!(s.loss_scale.scale > 0.f) || !std::isfinite(s.loss_scale.scale))
        throw DataError(path + ": the training state's loss scale " + std::to_string(s.loss_scale.scale) +
                        " is not a positive number");
      s.loss_scale.inv_scale = 1.f / s.loss_scale.scale;
    }
    return s;
  } catch (const nlohmann::json::exception& e) {
    throw DataError(path + ": the training state (" + kStateKey + ") is incomplete: " + e.what());
  }
}

HostWeights download_weights(Session& s) {
  HostWeights w;
  w.params.resize(size_t(s.model->param_arena_floats()));
  w.buffers.resize(size_t(s.model->buffer_arena_floats()));
  s.runner().download_params(w.params.data(), w.buffers.empty() ? nullptr : w.buffers.data());
  return w;
}

void upload_weights(Session& s, const HostWeights& w) {
  s.runner().upload_params(w.params.data(), w.buffers.empty() ? nullptr : w.buffers.data());
}

void save_weights(const std::string& path, const Model& model, const HostWeights& w,
                  std::map<std::string, std::string> metadata) {
  std::vector<TensorRef> refs;
  for (const TensorSlot& t : model.params())
    refs.push_back({t.name, t.shape.dims, w.params.data() + t.offset});
  for (const TensorSlot& t : model.buffers())
    refs.push_back({t.name, t.shape.dims, w.buffers.data() + t.offset});
  metadata["format"] = "pt";  // what safetensors.torch expects; the tensors use PyTorch layouts
  metadata["trainer.version"] = TRAINER_VERSION;
  write_safetensors(path, refs, metadata);
}

// A checkpoint of an older version names batchnorm's weight and bias gamma and beta.
static std::string legacy_name(const TensorSlot& t) {
  if (t.spec.role != ParamRole::gamma && t.spec.role != ParamRole::beta) return "";
  return t.name.substr(0, t.name.rfind('.')) + (t.spec.role == ParamRole::gamma ? ".gamma" : ".beta");
}

HostWeights load_weights(const std::string& path, const Model& model, const std::string& role) {
  SafetensorsFile f = read_safetensors(path);
  HostWeights w;
  w.params.assign(size_t(model.param_arena_floats()), 0.f);
  w.buffers.assign(size_t(model.buffer_arena_floats()), 0.f);
  std::vector<std::string> problems;
  std::map<std::string, bool> used;
  auto take = [&](const std::vector<TensorSlot>& slots, std::vector<float>& arena) {
    for (const TensorSlot& t : slots) {
      auto it = f.tensors.find(t.name);
      if (it == f.tensors.end() && !legacy_name(t).empty()) it = f.tensors.find(legacy_name(t));
      if (it == f.tensors.end()) {
        problems.push_back("the model has " + t.name + " " + shape_text(t.shape.dims) +
                           " but the file does not");
        continue;
      }
      used[it->first] = true;
      if (it->second.shape != t.shape.dims) {
        problems.push_back(t.name + " is " + shape_text(t.shape.dims) + " in the model but " +
                           shape_text(it->second.shape) + " in the file");
        continue;
      }
      // Non-finite weights would evaluate and predict silently wrong (a NaN row argmaxes to class
      // 0): the file is refused, naming the tensor and the first such element.
      const std::vector<float>& data = it->second.data;
      for (size_t i = 0; i < data.size(); ++i)
        if (!std::isfinite(data[i])) {
          throw DataError(role + " " + path + ": tensor " + it->first + " holds " +
                          (std::isnan(data[i]) ? "NaN" : (data[i] > 0 ? "+inf" : "-inf")) + " at element " +
                          std::to_string(i) + " of " + std::to_string(data.size()) +
                          ": the weights are damaged or come from a diverged run; use an earlier checkpoint");
        }
      std::copy(data.begin(), data.end(), arena.begin() + t.offset);
    }
  };
  take(model.params(), w.params);
  take(model.buffers(), w.buffers);
  for (const auto& name : f.names)
    if (!used.count(name))
      problems.push_back("the file has " + name + " " + shape_text(f.tensors[name].shape) +
                         " but the model does not");
  if (!problems.empty()) {
    std::string msg =
        role + " " + path + ": the weights do not fit the model of the config (was the model changed?): ";
    for (size_t i = 0; i < problems.size() && i < 6; ++i) msg += (i ? "; " : "") + problems[i];
    if (problems.size() > 6) msg += "; and " + std::to_string(problems.size() - 6) + " more";
    throw ConfigError(msg);
  }
  return w;
}

int64_t weights_epoch(const std::string& path) {
  auto meta = read_safetensors_metadata(path);
  auto it = meta.find("epoch");
  if (it == meta.end()) return -1;
  try {
    return std::stoll(it->second);
  } catch (const std::exception&) {
    return -1;
  }
}

CheckpointInfo save_checkpoint(const std::string& dir, Session& s, const TrainState& st,
                               const std::string& config_yaml) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw RuntimeError("cannot create the checkpoint directory " + dir + ": " + ec.message());
  char name[64];
  if (st.batches_done == 0)
    std::snprintf(name, sizeof name, "epoch-%04lld", (long long)st.epochs_done);
  else
    std::snprintf(name, sizeof name, "epoch-%04lld-batch-%06lld", (long long)st.epochs_done + 1,
                  (long long)st.batches_done);
  CheckpointInfo ck{dir + "/" + name, st.step, st.epochs_done, st.batches_done};

  HostWeights w = download_weights(s);
  save_weights(ck.weights(), *s.model, w,
               {{"epoch", std::to_string(st.epochs_done)},
                {"step", std::to_string(st.step)},
                {"trainer.config", config_yaml}});

  const Model& m = *s.model;
  const int slots = s.optimizer->state_slots();
  std::vector<float> state(size_t(s.runner().optimizer_state_floats()));
  if (!state.empty()) s.runner().download_optimizer_state(state.data());
  const auto names = slot_names(s.optimizer->config(), slots);
  std::vector<TensorRef> refs;
  for (int k = 0; k < slots; ++k)
    for (const TensorSlot& t : m.params())
      refs.push_back({t.name + "." + names[size_t(k)], t.shape.dims,
                      state.data() + size_t(k) * size_t(m.param_arena_floats()) + t.offset});
  write_safetensors(ck.state(), refs,
                    {{kStateKey, train_state_json(st).dump()}, {"trainer.version", TRAINER_VERSION}});
  return ck;
}

std::vector<CheckpointInfo> list_checkpoints(const std::string& dir, std::vector<std::string>* unreadable) {
  std::vector<CheckpointInfo> out;
  std::error_code ec;
  const std::string suffix = ".state.safetensors";
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string file = e.path().filename().string();
    if (file.size() <= suffix.size() || file.compare(file.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    CheckpointInfo ck;
    ck.base = dir + "/" + file.substr(0, file.size() - suffix.size());
    if (!fs::exists(ck.weights())) continue;
    try {
      auto meta = read_safetensors_metadata(ck.state());
      auto it = meta.find(kStateKey);
      if (it == meta.end()) throw DataError(ck.state() + ": no " + std::string(kStateKey) + " metadata");
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(it->second);
      } catch (const nlohmann::json::exception& e) {
        throw DataError(ck.state() + ": " + kStateKey + " is not JSON: " + e.what());
      }
      TrainState st = train_state_from_json(j, ck.state());
      ck.step = st.step;
      ck.epochs_done = st.epochs_done;
      ck.batches_done = st.batches_done;
      out.push_back(ck);
    } catch (const InterruptedError&) {
      throw;  // a signal during start-up, not a damaged checkpoint
    } catch (const std::exception& ex) {
      if (unreadable)
        unreadable->push_back(ex.what());
      else
        spdlog::warn("skipping checkpoint {}: {}", ck.state(), ex.what());
    }
  }
  std::sort(out.begin(), out.end(), [](const CheckpointInfo& a, const CheckpointInfo& b) {
    return a.step != b.step ? a.step < b.step : a.base < b.base;
  });
  return out;
}

TrainState load_checkpoint(const CheckpointInfo& ck, Session& s, const Config& cfg) {
  const Model& m = *s.model;
  HostWeights w = load_weights(ck.weights(), m, "--resume");
  SafetensorsFile f = read_safetensors(ck.state());
  auto it = f.metadata.find(kStateKey);
  if (it == f.metadata.end()) throw DataError(ck.state() + ": no " + std::string(kStateKey) + " metadata");
  TrainState st;
  try {
    st = train_state_from_json(nlohmann::json::parse(it->second), ck.state());
  } catch (const nlohmann::json::exception& e) {
    throw DataError(ck.state() + ": " + kStateKey + " is not JSON: " + e.what());
  }
  if (st.optimizer != cfg.optimizer.type)
    throw ConfigError("--resume: the checkpoint " + ck.state() + " was trained with optimizer." + "type " +
                      st.optimizer + " but the config says " + cfg.optimizer.type +
                      " (the optimizer state cannot carry over)");
  const int slots = s.optimizer->state_slots();
  const auto names = slot_names(s.optimizer->config(), slots);
  std::vector<float> state(size_t(s.runner().optimizer_state_floats()), 0.f);
  for (int k = 0; k < slots; ++k)
    for (const TensorSlot& t : m.params()) {
      const std::string name = t.name + "." + names[size_t(k)];
      auto jt = f.tensors.find(name);
      if (jt == f.tensors.end() && !legacy_name(t).empty())
        jt = f.tensors.find(legacy_name(t) + "." + names[size_t(k)]);
      if (jt == f.tensors.end() || jt->second.shape != t.shape.dims)
        throw ConfigError("--resume: the checkpoint " + ck.state() + " has no optimizer state " + name + " " +
                          shape_text(t.shape.dims) + " (were optimizer settings such as momentum changed?)");
      std::copy(jt->second.data.begin(), jt->second.data.end(),
                state.begin() + long(size_t(k) * size_t(m.param_arena_floats()) + size_t(t.offset)));
    }
  upload_weights(s, w);
  if (!state.empty()) s.runner().upload_optimizer_state(state.data());
  s.runner().host_scalars() = st.scalars;
  // Resume across math modes: a scaled run's state goes on where it stopped; an fp32 or bf16
  // checkpoint resumed under fp16 starts from the configured scale; fp32 ignores a saved scale.
  if (s.runner().loss_scaling() && st.has_loss_scale) s.runner().restore_loss_scale(st.loss_scale);
  return st;
}

void prune_checkpoints(const std::string& dir, int64_t keep_last) {
  if (keep_last <= 0) return;
  auto all = list_checkpoints(dir);
  for (size_t i = 0; i + size_t(keep_last) < all.size(); ++i) {
    std::error_code ec;
    fs::remove(all[i].state(), ec);  // uncommit first: a half-pruned checkpoint is never listed
    fs::remove(all[i].weights(), ec);
  }
  fsync_directory(dir);
}

std::string resolve_weights(const std::string& arg) {
  std::error_code ec;
  const auto status = fs::status(arg, ec);
  if (fs::is_regular_file(status)) return arg;
  if (!fs::exists(status)) throw UsageError("--weights " + arg + ": no such file or directory");
  struct stat st {};
  if (!fs::is_directory(status) && ::stat(arg.c_str(), &st) == 0)
    throw DataError("--weights " + arg + " is " + file_kind(st.st_mode) +
                    ", not a regular file; give a .safetensors file or a run directory");
  if (fs::is_regular_file(arg + "/model.safetensors")) return arg + "/model.safetensors";
  for (const std::string& dir : {arg + "/checkpoints", arg}) {
    auto cks = list_checkpoints(dir);
    if (!cks.empty()) return cks.back().weights();
  }
  const std::string ext = ".safetensors";
  if (arg.size() > ext.size() && arg.compare(arg.size() - ext.size(), ext.size(), ext) == 0)
    throw DataError("--weights " + arg + " is " + file_kind(S_IFDIR) +
                    ", not a regular file; give a .safetensors file or a run directory");
  throw UsageError("--weights " + arg + ": the directory has no model.safetensors and no checkpoint");
}

}  // namespace trainer
