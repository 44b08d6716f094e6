#include "cmd/usage_hints.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#include "lib/config/node_reader.h"  // closest_match

namespace trainer::cmd {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Every spelling of a flag of `app`: "--epochs", "-q".
std::vector<std::string> flag_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : app.get_options()) {
    for (const auto& l : opt->get_lnames()) names.push_back("--" + l);
    for (const auto& s : opt->get_snames()) names.push_back("-" + s);
  }
  return names;
}

bool is_number(const std::string& s) {
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return !s.empty() && end && *end == '\0';
}

}  // namespace

std::string unknown_verb_message(const CLI::App& app, const std::string& word) {
  std::vector<std::string> verbs;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    verbs.push_back(sub->get_name());
  static const std::map<std::string, std::string> synonyms{
      {"train", "fit"},         {"training", "fit"},     {"resume", "fit"},      {"evaluate", "eval"},
      {"test", "eval"},         {"validate", "eval"},    {"score", "eval"},      {"infer", "predict"},
      {"inference", "predict"}, {"classify", "predict"}, {"benchmark", "bench"}, {"gpus", "devices"},
      {"gpu", "devices"},       {"list", "devices"},     {"show", "summary"},    {"describe", "summary"},
      {"info", "summary"},      {"params", "summary"},   {"chart", "plot"},      {"graph", "plot"},
      {"draw", "plot"}};
  std::string near;
  if (auto it = synonyms.find(word); it != synonyms.end())
    near = it->second;
  else
    near = closest_match(word, verbs);
  std::string hint = near.empty() ? "" : " (did you mean '" + near + "'?)";
  if (near.empty() && (ends_with(word, ".yaml") || ends_with(word, ".yml")))
    hint = " (did you mean 'trainer fit " + word + "'?)";
  std::string list;
  for (const auto& v : verbs) list += (list.empty() ? "" : ", ") + v;
  return "unknown verb '" + word + "'" + hint + "; verbs: " + list;
}

std::string unknown_flag_message(const CLI::App& app, const CLI::App* verb,
                                 const std::vector<std::string>& args) {
  const CLI::App& scope = verb ? *verb : app;
  const std::vector<std::string> known = flag_names(scope);
  bool after_verb = verb == nullptr;
  for (const std::string& arg : args) {
    if (!after_verb) {
      after_verb = arg == verb->get_name();
      continue;
    }
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-' || is_number(arg)) continue;
    const std::string name = arg.substr(0, arg.find('='));
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    // "-qv": bundled short flags are known when each of them is.
    if (name[1] != '-') {
      bool all_known = true;
      for (size_t i = 1; i < name.size(); ++i)
        all_known =
            all_known && std::find(known.begin(), known.end(), "-" + name.substr(i, 1)) != known.end();
      if (all_known) continue;
    }
    const std::string near = closest_match(name, known);
    return "unknown flag '" + name + "'" + (near.empty() ? "" : " (did you mean '" + near + "'?)");
  }
  return "";
}

}  // namespace trainer::cmd
