// trainer generate RUN | CONFIG --weights CKPT --prompt TEXT [--tokens N] [--temperature T]
// [--top-k K] [--seed S]: text from a language model trained on format text (bytes) or tokens
// (ids), streamed to stdout as it is sampled (lib/train/generate.h).
#include <iostream>

#include "cmd/commands.h"
#include "cmd/config_flags.h"
#include "lib/core/error.h"
#include "lib/train/generate.h"

namespace trainer::cmd {

void add_generate_command(CLI::App& app) {
  struct State {
    ConfigFlags cf;
    GenerateOptions go;
  };
  auto st = std::make_shared<State>();
  CLI::App* sub = app.add_subcommand(
      "generate", "Sample text from a language model (a run trained on data format text or tokens)");
  st->cf.add_to(sub, FlagSet::inference, ConfigArg::file_or_run);
  sub->add_option(
      "--weights", st->go.weights,
      "A .safetensors file or a run directory [default with RUN: RUN's model.safetensors; required "
      "with CONFIG]");
  sub->add_option("--prompt", st->go.prompt,
                  "The text to continue (format text), or token ids separated by spaces or commas (format "
                  "tokens) [default: a new line, or token 0]");
  sub->add_option("--tokens", st->go.tokens, "How many tokens to sample [default: 200]")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  sub->add_option("--temperature", st->go.temperature,
                  "Divides the logits before the softmax; 0: always the most likely token [default: 1]")
      ->check(CLI::Range(0.0, 100.0));
  sub->add_option("--top-k", st->go.top_k, "Sample among the K most likely tokens only; 0: all [default: 0]")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 30));
  sub->add_option("--seed", st->go.seed, "Seed of the draws: the same seed gives the same text [default: 0]");
  sub->callback([st]() {
    ConfigFlags cf = st->cf;
    GenerateOptions go = st->go;
    const std::string run = cf.use_run_config();
    if (go.weights.empty() && run.empty())
      throw UsageError(
          "--weights is required with a config file (or give a run directory: trainer generate RUN)");
    if (go.weights.empty()) go.weights = run;
    Config cfg = cf.load();
    go.device = device_request(cfg);
    generate_tokens(cfg, go, std::cout);
    std::cout << std::endl;
  });
}

}  // namespace trainer::cmd
