// trainer predict CONFIG --weights CKPT --input x.npy|x.csv --output probs.npy|probs.csv:
// class probabilities for every input sample.
#include <iostream>

#include "cmd/commands.h"
#include "cmd/config_flags.h"
#include "lib/train/evaluate.h"

namespace trainer::cmd {

void add_predict_command(CLI::App& app) {
  struct State {
    ConfigFlags cf;
    PredictOptions po;
  };
  auto st = std::make_shared<State>();
  CLI::App* sub =
      app.add_subcommand("predict", "Write class probabilities for the samples of an .npy or .csv file");
  st->cf.add_to(sub, FlagSet::inference);
  sub->add_option("--weights", st->po.weights,
                  "A .safetensors file or a run directory (its model.safetensors)")
      ->required();
  sub->add_option("--input", st->po.input,
                  ".npy of shape (N, *model.input_shape) or (N, features); or .csv with one sample per row "
                  "(features only, an optional header row)")
      ->required()
      ->check(CLI::ExistingFile);
  sub->add_option("--output", st->po.output,
                  ".npy: (N, num_classes) float32 | .csv: header class_0..class_{C-1}, one row per sample")
      ->required();
  sub->callback([st]() {
    Config cfg = st->cf.load();
    PredictOptions po = st->po;
    po.device = device_request(cfg);
    predict_file(cfg, po, std::cout);
  });
}

}  // namespace trainer::cmd
