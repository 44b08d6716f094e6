// trainer export RUN | CONFIG --weights CKPT --format onnx --out model.onnx: the trained network as
// an ONNX model (lib/export/onnx_export.h says what the graph holds). RUN: a run directory, its
// config.yaml and weights, as predict reads them.
#include <iostream>

#include "cmd/commands.h"
#include "cmd/config_flags.h"
#include "lib/core/error.h"
#include "lib/export/onnx_export.h"

namespace trainer::cmd {

void add_export_command(CLI::App& app) {
  struct State {
    ConfigFlags cf;
    ExportOptions eo;
  };
  auto st = std::make_shared<State>();
  CLI::App* sub = app.add_subcommand(
      "export", "Write a trained network as an ONNX model (opset 17, float32) that takes raw inputs");
  st->cf.add_to(sub, FlagSet::config_only, ConfigArg::file_or_run);
  sub->add_option("--weights", st->eo.weights,
                  "A .safetensors file or a run directory (its model.safetensors) [default with RUN: RUN's "
                  "model.safetensors; required with CONFIG]");
  sub->add_option("--format", st->eo.format, "onnx [default: onnx]")->check(CLI::IsMember({"onnx"}));
  sub->add_option(
         "--out", st->eo.out,
         ".onnx file to write (replaced atomically). Its input 'input' is float32 (N, *model.input_shape) "
         "as the data stores it (pixel bytes 0..255, CSV numbers, token ids): the graph applies the run's "
         "normalization first. Outputs: 'output' (the network's) and, for classifiers, 'probabilities' "
         "(what predict writes)")
      ->required();
  sub->callback([st]() {
    ConfigFlags cf = st->cf;
    ExportOptions eo = st->eo;
    const std::string run = cf.use_run_config();
    if (eo.weights.empty() && run.empty())
      throw UsageError(
          "--weights is required with a config file (or give a run directory: trainer export RUN)");
    if (eo.weights.empty()) eo.weights = run;
    export_file(cf.load(), eo, std::cout);
  });
}

}  // namespace trainer::cmd
