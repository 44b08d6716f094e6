// trainer eval RUN | CONFIG --weights CKPT: loss, metrics, per-class report and confusion matrix of
// the config's model with saved weights, on the validation data (or --split train). RUN: a run
// directory, its config.yaml and model.safetensors.
#include <iostream>

#include "cmd/commands.h"
#include "cmd/config_flags.h"
#include "lib/core/error.h"
#include "lib/train/evaluate.h"

namespace trainer::cmd {

void add_eval_command(CLI::App& app) {
  struct State {
    ConfigFlags cf;
    OutputFlags of;
    EvalOptions eo;
  };
  auto st = std::make_shared<State>();
  CLI::App* sub = app.add_subcommand(
      "eval",
      "Evaluate saved weights on the config's validation data: trainer eval RUN (a run directory: its "
      "config.yaml and model.safetensors), or trainer eval CONFIG --weights W");
  st->cf.add_to(sub, FlagSet::inference, ConfigArg::file_or_run);
  st->of.add_to(sub, false);
  sub->footer(
      "Prints the loss and the config's metrics, the per-class report (precision, recall, F1, support; "
      "classes named by data.class_names) and the confusion matrix (rows: true class, columns: predicted "
      "class). With --log-format json, stdout gets one object: event \"eval\", weights, data, samples, "
      "loss and every metric, class_names (when set), classes (id, name, precision, recall, f1, support "
      "per class), macro (the averages), confusion (integer counts); the human text goes to stderr.");
  sub->add_option(
      "--weights", st->eo.weights,
      "A .safetensors file (model.safetensors, a checkpoint, best.safetensors) or a run directory "
      "(its model.safetensors) [default with RUN: RUN's model.safetensors; required with CONFIG]");
  sub->add_option("--split", st->eo.split, "validation | train [default: validation]")
      ->check(CLI::IsMember({"validation", "train"}));
  sub->callback([st]() {
    ConfigFlags cf = st->cf;
    EvalOptions eo = st->eo;
    const std::string run = cf.use_run_config();
    if (eo.weights.empty() && run.empty())
      throw UsageError(
          "--weights is required with a config file (or give a run directory: trainer eval RUN)");
    if (eo.weights.empty()) eo.weights = run;
    Config cfg = cf.load();
    eo.device = device_request(cfg);
    eo.report = st->of.options();
    evaluate_weights(cfg, eo, std::cout);
  });
}

}  // namespace trainer::cmd
