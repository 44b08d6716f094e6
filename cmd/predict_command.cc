// trainer predict RUN | CONFIG --weights CKPT --input x.npy|x.csv|photo.jpg|folder|list.csv
// --output probs.npy|probs.csv: class probabilities and/or the arg-max class (--write) for every
// input sample. RUN: a run directory, its config.yaml and weights. A model trained on images
// (format image_folder or image_list) takes images, decoded and sized as its validation images.
#include <iostream>

#include "cmd/commands.h"
#include "cmd/config_flags.h"
#include "lib/core/error.h"
#include "lib/train/evaluate.h"

namespace trainer::cmd {

void add_predict_command(CLI::App& app) {
  struct State {
    ConfigFlags cf;
    PredictOptions po;
  };
  auto st = std::make_shared<State>();
  CLI::App* sub = app.add_subcommand(
      "predict", "Write class probabilities for the samples of an .npy or .csv file, or for images");
  st->cf.add_to(sub, FlagSet::inference, ConfigArg::file_or_run);
  sub->add_option("--weights", st->po.weights,
                  "A .safetensors file or a run directory (its model.safetensors) [default with RUN: RUN's "
                  "model.safetensors; required with CONFIG]");
  sub->add_option(
         "--input", st->po.input,
         ".npy of shape (N, *model.input_shape) or (N, features); or .csv with one sample per row, "
         "read with the CSV training source's columns and learned encoding, the label column optional "
         "(other sources: features only, an optional header row). A model trained on images: a PNG/JPEG "
         "file, a folder of them (and its subfolders, one level) or a .csv list with a file column; the "
         ".csv output then starts with a file column")
      ->required()
      ->check(CLI::ExistingPath);
  sub->add_option("--output", st->po.output,
                  ".npy: (N, num_classes) float32 | .csv: one row per sample, one column per class headed by "
                  "its name (data.class_names) or class_<id>")
      ->required();
  sub->add_option("--write", st->po.write,
                  "probabilities | class: the arg-max class (.csv: predicted_id and, with data.class_names, "
                  "predicted_name; .npy: (N,) int64 ids) | both (.csv only) [default: probabilities]")
      ->check(CLI::IsMember({"probabilities", "class", "both"}));
  sub->callback([st]() {
    ConfigFlags cf = st->cf;
    PredictOptions po = st->po;
    const std::string run = cf.use_run_config();
    if (po.weights.empty() && run.empty())
      throw UsageError(
          "--weights is required with a config file (or give a run directory: trainer predict RUN)");
    if (po.weights.empty()) po.weights = run;
    Config cfg = cf.load();
    po.device = device_request(cfg);
    predict_file(cfg, po, std::cout);
  });
}

}  // namespace trainer::cmd
