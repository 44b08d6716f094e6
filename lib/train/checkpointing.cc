#include "lib/train/checkpointing.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>

#include "lib/checkpoint/atomic_file.h"
#include "lib/checkpoint/safetensors.h"
#include "lib/core/error.h"
#include "lib/core/file_kind.h"
#include "lib/core/json_text.h"
#include "trainer_version.h"

namespace fs = std::filesystem;

namespace trainer {
namespace {

const char* kStateKey = "trainer.state";
const char* kCheckpointIdKey = "trainer.checkpoint_id";

// The id both files of a checkpoint carry: a 64-bit FNV-1a hash of the weights, the optimizer
// state and the counts. Weights and state saved apart (another epoch, step or run) do not match,
// and a deterministic run still writes byte-identical checkpoints (the kill loop compares bytes).
std::string checkpoint_id(const HostWeights& w, const std::vector<float>& state, const TrainState& st) {
  uint64_t h = 1469598103934665603ull;
  const auto mix = [&h](const void* data, size_t bytes) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  };
  for (const std::vector<float>* v : {&w.params, &w.buffers, &state})
    mix(v->data(), v->size() * sizeof(float));
  const int64_t counts[] = {st.epochs_done, st.batches_done, st.step};
  mix(counts, sizeof counts);
  char text[20];
  std::snprintf(text, sizeof text, "%016llx", (unsigned long long)h);
  return text;
}

// The epochs and batches done that a checkpoint's name says ("epoch-0004": 4 and 0;
// "epoch-0005-batch-000012": 4 and 12); false for a name save_checkpoint does not write.
bool counts_in_name(const std::string& base, int64_t* epochs_done, int64_t* batches_done) {
  long long e = 0, b = 0;
  int used = 0;
  const std::string name = fs::path(base).filename().string();
  if (std::sscanf(name.c_str(), "epoch-%lld-batch-%lld%n", &e, &b, &used) == 2 &&
      size_t(used) == name.size()) {
    *epochs_done = e - 1;
    *batches_done = b;
    return true;
  }
  if (std::sscanf(name.c_str(), "epoch-%lld%n", &e, &used) == 1 && size_t(used) == name.size()) {
    *epochs_done = e;
    *batches_done = 0;
    return true;
  }
  return false;
}

// Weights and state of one checkpoint agree: the name, the state's epoch and step, and the
// weights file's epoch, step and id (files of older versions have no id). DataError otherwise.
void check_pair(const CheckpointInfo& ck, const TrainState& st) {
  const auto mismatch = [&](const std::string& what) {
    return DataError(ck.state() + " and " + ck.weights() + " do not belong together: " + what);
  };
  int64_t name_epochs = 0, name_batches = 0;
  if (counts_in_name(ck.base, &name_epochs, &name_batches) &&
      (name_epochs != st.epochs_done || name_batches != st.batches_done))
    throw mismatch("the name says " + std::to_string(name_epochs) + " epoch(s) and " +
                   std::to_string(name_batches) + " batch(es) done, the state " +
                   std::to_string(st.epochs_done) + " and " + std::to_string(st.batches_done));
  const auto meta = read_safetensors_metadata(ck.weights());
  const auto value = [&](const char* key) {
    const auto it = meta.find(key);
    return it == meta.end() ? std::string() : it->second;
  };
  if (value("epoch") != std::to_string(st.epochs_done) || value("step") != std::to_string(st.step))
    throw mismatch("the weights are of epoch " + (value("epoch").empty() ? "?" : value("epoch")) + ", step " +
                   (value("step").empty() ? "?" : value("step")) + ", the state of epoch " +
                   std::to_string(st.epochs_done) + ", step " + std::to_string(st.step));
  if (!st.checkpoint_id.empty() && value(kCheckpointIdKey) != st.checkpoint_id)
    throw mismatch("the weights file's checkpoint id is '" + value(kCheckpointIdKey) + "', the state's '" +
                   st.checkpoint_id + "'");
}

// PyTorch's names for each optimizer's per-parameter state.
std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

}  // namespace

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
  CheckpointInfo ck{dir + "/" + name, st.step, st.epochs_done, st.batches_done, st.cpu_threads};

  // One id in both files: weights and state that were not saved together never pass for a
  // checkpoint (a renamed or copied weights file of the same epoch and step included).
  TrainState saved = st;
  HostWeights w = download_weights(s);
  const Model& m = *s.model;
  const int slots = s.optimizer->state_slots();
  std::vector<float> state(size_t(s.runner().optimizer_state_floats()));
  if (!state.empty()) s.runner().download_optimizer_state(state.data());
  saved.checkpoint_id = checkpoint_id(w, state, st);
  save_weights(ck.weights(), *s.model, w,
               {{"epoch", std::to_string(st.epochs_done)},
                {"step", std::to_string(st.step)},
                {kCheckpointIdKey, saved.checkpoint_id},
                {"trainer.config", config_yaml}});

  const std::vector<std::string> names = s.optimizer->state_names();
  std::vector<TensorRef> refs;
  for (int k = 0; k < slots; ++k)
    for (const TensorSlot& t : m.params())
      refs.push_back({t.name + "." + names[size_t(k)], t.shape.dims,
                      state.data() + size_t(k) * size_t(m.param_arena_floats()) + t.offset});
  write_safetensors(ck.state(), refs,
                    {{kStateKey, json_text(train_state_json(saved))}, {"trainer.version", TRAINER_VERSION}});
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
    try {
      // The weights file is written first and pruned last: a state file without one is damage.
      std::error_code wec;
      if (!fs::exists(fs::symlink_status(ck.weights(), wec)))
        throw DataError(ck.state() + ": its weights file " + ck.weights() + " is missing");
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
      check_pair(ck, st);
      ck.step = st.step;
      ck.epochs_done = st.epochs_done;
      ck.batches_done = st.batches_done;
      ck.cpu_threads = st.cpu_threads;
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
  const std::vector<std::string> names = s.optimizer->state_names();
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
