#include "cmd/config_flags.h"

#include "lib/core/error.h"

namespace trainer::cmd {

void ConfigFlags::add_to(CLI::App* sub, bool training_flags) {
  sub->add_option("config", path, "YAML config file")->required()->check(CLI::ExistingFile);
  sub->add_option("--set", sets,
                  "Override any config key: dotted.key=value (repeatable), e.g. --set optimizer.lr=0.01 "
                  "--set model.layers.3.units=64")
      ->take_all();
  if (!training_flags) return;
  sub->add_option("--device", device, "cpu | gpu:N | gpu | auto (first GPU, else the CPU) [default: config's device, cpu]");
  sub->add_option("--epochs", epochs, "Number of epochs [default: config's train.epochs, 10]")->check(CLI::Range(int64_t(1), int64_t(1000000)));
  sub->add_option("--batch-size", batch_size, "Batch size [default: config's data.batch_size, 32]")->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  sub->add_option("--seed", seed, "Random seed for init, shuffling and dropout [default: config's train.seed, 0]")->check(CLI::Range(int64_t(0), int64_t(1) << 62));
}

Config ConfigFlags::load() const {
  std::vector<std::string> all = sets;
  if (!device.empty()) {
    if (!valid_device_string(device))
      throw UsageError("--device " + device + ": allowed: cpu, auto, gpu, gpu:N");
    all.push_back("device=" + device);
  }
  if (epochs > 0) all.push_back("train.epochs=" + std::to_string(epochs));
  if (batch_size > 0) all.push_back("data.batch_size=" + std::to_string(batch_size));
  if (seed >= 0) all.push_back("train.seed=" + std::to_string(seed));
  return load_config(path, all);
}

}  // namespace trainer::cmd
