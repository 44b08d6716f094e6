// The declarations of lib/config/config_keys.h. Defaults and ranges are the ones config.cc applies;
// a doc is one line, printed by `trainer help KEY`, docs/config.md and the schema's descriptions.
#include "lib/config/config_keys.h"

#include "lib/backend/layer_kernel.h"
#include "lib/losses/losses.h"

namespace trainer {
namespace {

constexpr int64_t kMillion = 1000000;

// A key without a default whose absence means something else (stratify follows shuffle).
KeySpec without_default(KeySpec k) {
  k.def = YAML::Node();
  return k;
}

// A monitored quantity: a metric name of this run, resolved when the config loads.
KeySpec monitor_key(const std::string& name, const std::string& doc) {
  return string_key(name, "auto",
                    doc +
                        ": loss, a metric (accuracy, top5_accuracy, ...), either with val_ for the "
                        "validation data, or auto");
}

}  // namespace

const KeySpecs& root_keys() {
  static const KeySpecs keys{
      section_key("model", "the network: its input shape and its layers")
          .require("is required: model: {input_shape: [...], layers: [...]}"),
      section_key("loss", "the loss: a loss name, or a mapping with its type and keys"),
      section_key("optimizer", "the optimizer: its type and hyper-parameters"),
      section_key("metrics",
                  "the metrics reported each epoch: names, or mappings with their keys (default: the "
                  "loss's task's own)"),
      section_key("data", "the training data, the validation data and how batches are made")
          .require("is required: data: {train: {...}, validation: {...}, num_classes: N}"),
      section_key("train", "the training loop: epochs, seed, what a non-finite step does, loss scaling"),
      section_key("device",
                  "where to train: cpu, auto, gpu, gpu:N, gpu:N,M,... or gpu:all, or a mapping with the "
                  "memory and data-parallel settings"),
      choice_key("math", "fp32", math_names(),
                 "arithmetic: fp32 | tf32 (GPU tensor cores) | bf16 | fp16 (GPU; loss scaling on by "
                 "default)"),
      number_key("low_precision_min_mflops", 256, 0, 1e12,
                 "under math bf16/fp16: a convolution or dense layer doing fewer MFLOP a step stays fp32"),
      integer_key("threads", 0, 0, 4096,
                  "CPU threads (0: the cores this process may use, or OMP_NUM_THREADS when set)"),
      section_key("early_stopping", "stop when a monitored quantity stops improving (present: on)"),
      section_key("checkpoint", "resumable checkpoints and the best weights"),
      section_key("schedule", "the learning-rate schedule: a type name, or a mapping with its keys"),
      number_key("clip_grad_norm", 0, 0, 1e12,
                 "the largest global L2 norm of the gradients (0: no clipping)"),
      section_key("pipeline", "model parallelism: how each batch is pipelined through model.stages"),
  };
  return keys;
}

const KeySpecs& model_keys() {
  static const KeySpecs keys{
      integer_list_key("input_shape", 1, int64_t(1) << 31,
                       "the shape of one sample: [channels, height, width] for images, [features] for "
                       "tables, [length] for token ids")
          .require("is required, e.g. input_shape: [1, 28, 28]"),
      choice_key("init", "torch", {"torch", "keras", "gpt2"},
                 "how weights start: PyTorch's default initialization, Keras' (Glorot uniform), or "
                 "GPT-2's (N(0, 0.02), zero biases, *c_proj.weight scaled by 1/sqrt(2 x attention layers))"),
      section_key("layers",
                  "the layers in order, each {type: T, ...}: a stack, or a graph through inputs: "
                  "(trainer help layers)")
          .require("is required: a non-empty list of layers, e.g. - {type: dense, units: 10}"),
      section_key("blocks", "named sub-graphs with parameters, used in layers like a layer type"),
      string_list_key("stages",
                      "model parallelism: the layers where stage 2, 3, ... begin (one GPU each), by name"),
  };
  return keys;
}

const KeySpecs& data_keys() {
  static const KeySpecs keys{
      section_key("train", "the training data: a source of some format (trainer help data.train.format)")
          .require(
              "is required: the training data source, e.g. train: {format: idx, images: ..., labels: ...}"),
      section_key("validation", "the validation data, a source like train (or split the training data)"),
      integer_key("num_classes", 0, 1, 1 << 20,
                  "classes of a classification loss, at least 2 (default: the number of class_names, or "
                  "what a csv or image folder source finds)"),
      section_key("class_names", "the classes' names in class id order, or a file with one name per line"),
      integer_key("batch_size", 32, 1, 1 << 20, "samples per training step"),
      bool_key("shuffle", true, "shuffle the training samples every epoch"),
      bool_key("drop_last", false, "drop the last partial batch of an epoch"),
      integer_key(
          "loader_threads", 0, 0, 256,
          "threads that fill a large batch (0: on a GPU half the usable cores, 1 to 8, or all but one "
          "for streamed images and random_resized_crop; on the CPU 1)"),
      number_key("validation_split", 0, 0, 0.99, "the short form of split: {fraction: f}"),
      section_key("split", "hold out part of the training data for validation"),
      section_key("normalize", "x * scale, then (x - mean) / std per channel"),
      bool_key("normalize_targets", false,
               "regression: train on (y - mean) / std per output, with the training rows' statistics; "
               "metrics, predictions and exports stay in the targets' units"),
      mapping_key("target_statistics", "learned: {mean: [...], std: [...]} per output (normalize_targets)"),
      section_key("augment", "random changes to each training image"),
  };
  return keys;
}

const KeySpecs& split_keys() {
  static const KeySpecs keys{
      number_key("fraction", 0, 0, 0.99, "the fraction of the training data held out (0: no split)"),
      bool_key("shuffle", true,
               "pick the held-out rows at random (seeded); false: the last rows of the file"),
      without_default(bool_key("stratify", true,
                               "keep each class's share in both parts (needs shuffle; default: shuffle's "
                               "value)")),
  };
  return keys;
}

const KeySpecs& normalize_keys() {
  static const KeySpecs keys{
      [] {
        KeySpec k = number_key("scale", 1.0, -1e12, 1e12,
                               "applied first, x * scale (default: 1/255 for byte data: idx, cifar10, uint8 "
                               "npy and images; else 1)");
        k.min_magnitude = 1e-12;  // x * 0 would erase the data (and 1e-50 is 0 in float)
        return k;
      }(),
      number_list_key("mean", {0.0}, -1e12, 1e12,
                      "subtracted after the scale: one value, or one per channel"),
      number_list_key("std", {1.0}, 1e-12, 1e12, "divides after the mean: one value, or one per channel"),
  };
  return keys;
}

const KeySpecs& augment_keys() {
  static const KeySpecs keys{
      integer_key("crop_padding", 0, 0, 4096,
                  "pad each side by P zeros, then crop a random window of the input size (RandomCrop)"),
      choice_key("flip", "none", {"none", "horizontal"}, "horizontal: flip half the images left to right"),
      section_key("random_resized_crop",
                  "true, or {scale, ratio}: crop a random area and aspect ratio, resized to the input "
                  "size (RandomResizedCrop)"),
  };
  return keys;
}

const KeySpecs& random_resized_crop_keys() {
  static const KeySpecs keys{
      number_list_key("scale", {0.08, 1.0}, 1e-6, 1.0, "[low, high]: the crop's share of the image's area"),
      number_list_key("ratio", {3.0 / 4.0, 4.0 / 3.0}, 1e-3, 1e3, "[low, high]: the crop's width / height"),
  };
  return keys;
}

const KeySpecs& train_keys() {
  static const KeySpecs keys{
      integer_key("epochs", 10, 1, kMillion, "passes over the training data"),
      integer_key("seed", 0, 0, int64_t(1) << 62,
                  "seed of the initialization, shuffling, dropout and splits"),
      bool_key("deterministic", false,
               "GPU: only deterministic cuDNN algorithms, attention without its fused kernels"),
      choice_key("on_nan", "stop", {"stop", "skip"},
                 "a step with a non-finite loss or gradients: stop the run (exit 5), or skip the batch"),
      choice_key("divergence", "stop", {"stop", "warn"},
                 "a loss grown by orders of magnitude: stop the run (exit 5), or warn"),
      choice_or_number_key("loss_scale", "auto", {"auto", "dynamic", "none"}, 1e-30, 1e38,
                           "loss scaling: auto (dynamic under math fp16, none otherwise), dynamic, none, or "
                           "a fixed scale"),
      number_key("loss_scale_init", 65536, 1e-30, 1e38, "the dynamic scale's start (not with a fixed scale)"),
      integer_key("loss_scale_growth_interval", 2000, 1, int64_t(1) << 40,
                  "steps without overflow after which the dynamic scale doubles"),
  };
  return keys;
}

const KeySpecs& early_stopping_keys() {
  static const KeySpecs keys{
      bool_key("enabled", true, "false: off, the other keys kept"),
      monitor_key("monitor", "the quantity watched (auto: val_loss with validation data, else loss)"),
      integer_key("patience", 5, 0, kMillion, "epochs without improvement before stopping"),
      number_key("min_delta", 0, 0, 1e12, "the least change that counts as an improvement"),
      bool_key("restore_best", true, "put the best epoch's weights back at the end"),
  };
  return keys;
}

const KeySpecs& checkpoint_keys() {
  static const KeySpecs keys{
      integer_key("every", 1, 0, kMillion, "a resumable checkpoint every N epochs (0: the last epoch only)"),
      integer_key("keep_last", 3, 0, kMillion, "resumable checkpoints kept (0: all)"),
      [] {
        KeySpec k = monitor_key("best", "the quantity best.safetensors follows (none: no best weights)");
        k.doc += ", or none";
        return k;
      }(),
  };
  return keys;
}

const KeySpecs& pipeline_keys() {
  static const KeySpecs keys{
      integer_key("micro_batches", 1, 1, 4096, "each batch runs through the stages in M parts (GPipe)"),
  };
  return keys;
}

const KeyVariants& schedule_keys() {
  static const KeyVariants variants = [] {
    const KeySpecs warmup{
        integer_key("warmup_steps", 0, 0, int64_t(1) << 40, "a linear warm-up over the first N updates"),
        integer_key("warmup_epochs", 0, 0, kMillion, "a linear warm-up over the first N epochs"),
    };
    const auto with_warmup = [&](KeySpecs own) {
      KeySpecs all = warmup;
      all.insert(all.end(), own.begin(), own.end());
      return all;
    };
    const KeySpec min_lr = number_key("min_lr", 0, 0, 1e6, "the lowest learning rate");
    return KeyVariants{
        {"constant", warmup, "optimizer.lr throughout"},
        {"step",
         with_warmup({integer_key("step_size", 1, 1, kMillion, "epochs between decays"),
                      number_key("gamma", 0.1, 0, 1e6, "factor of each decay")}),
         "the rate times gamma every step_size epochs (StepLR)"},
        {"exponential", with_warmup({number_key("gamma", 0.9, 0, 1e6, "factor per epoch")}),
         "the rate times gamma every epoch (ExponentialLR)"},
        {"cosine", with_warmup({min_lr}), "from lr down to min_lr along a half cosine (CosineAnnealingLR)"},
        {"reduce_on_plateau",
         with_warmup(
             {monitor_key("monitor",
                          "the quantity watched (auto: val_loss with validation data, else "
                          "loss)"),
              number_key("factor", 0.1, 0, 0.999999, "the rate's factor at each reduction"),
              integer_key("patience", 10, 0, kMillion, "epochs without improvement before a reduction"),
              number_key("min_delta", 1e-4, 0, 1e12, "the least change that counts as an improvement"),
              integer_key("cooldown", 0, 0, kMillion, "epochs after a reduction before watching again"),
              min_lr}),
         "the rate times factor when the monitored quantity stops improving (ReduceLROnPlateau)"},
    };
  }();
  return variants;
}

const KeyVariants& metric_keys() {
  static const KeyVariants variants = [] {
    const std::vector<std::pair<std::string, std::string>> docs{
        {"accuracy", "the share of samples (tokens: of positions) whose prediction is right"},
        {"top_k_accuracy", "the share of samples whose class is among the k highest outputs"},
        {"precision", "true positives / predicted positives (classes: their mean; labels: over them all)"},
        {"recall", "true positives / actual positives (classes: their mean; labels: over them all)"},
        {"f1", "the harmonic mean of precision and recall (classes: the mean of each class's)"},
        {"macro_f1", "f1 per label, averaged over the labels"},
        {"auc", "the area under the ROC curve"},
        {"mae", "mean absolute error"},
        {"mse", "mean squared error"},
        {"rmse", "root mean squared error"},
        {"r2", "the coefficient of determination R^2"},
        {"perplexity", "exp(the mean loss per token): a language model's perplexity"},
    };
    KeyVariants out;
    for (Task t : {Task::classification, Task::binary, Task::multilabel, Task::regression, Task::tokens})
      for (const std::string& name : task_metrics(t)) {
        bool seen = false;
        for (const KeyVariant& v : out) seen |= v.name == name;
        if (seen) continue;
        std::string doc;
        for (const auto& d : docs)
          if (d.first == name) doc = d.second;
        KeySpecs keys;
        if (name == "top_k_accuracy")
          keys.push_back(integer_key("k", 5, 1, 1 << 20,
                                     "how many of the highest outputs count (at most "
                                     "data.num_classes)"));
        out.push_back({name, keys, doc});
      }
    return out;
  }();
  return variants;
}

}  // namespace trainer
