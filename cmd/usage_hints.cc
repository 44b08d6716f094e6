#include "cmd/usage_hints.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#include "lib/keys/node_reader.h"  // closest_match

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
      {"draw", "plot"},         {"onnx", "export"},      {"convert", "export"}};
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

std::string repeated_option_message(const CLI::App* verb, const std::vector<std::string>& args) {
  if (!verb) return "";
  std::vector<std::pair<std::string, std::vector<std::string>>> seen;  // in order of first use
  bool after_verb = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (!after_verb) {
      after_verb = arg == verb->get_name();
      continue;
    }
    if (arg == "--") break;
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) continue;
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const CLI::Option* opt = verb->get_option_no_throw(name);
    // Options of one value only: not flags, not --set (repeatable by design).
    if (!opt || opt->get_type_size() != 1 || opt->get_expected_max() != 1) continue;
    std::string value;
    if (eq != std::string::npos)
      value = arg.substr(eq + 1);
    else if (i + 1 < args.size())
      value = args[++i];
    auto it = std::find_if(seen.begin(), seen.end(), [&](const auto& s) { return s.first == name; });
    if (it == seen.end()) it = seen.insert(seen.end(), {name, {}});
    it->second.push_back(value);
  }
  for (const auto& [name, values] : seen) {
    if (values.size() < 2) continue;
    std::string listed;
    for (size_t k = 0; k < values.size(); ++k)
      listed += std::string(k == 0 ? "" : k + 1 == values.size() ? " and " : ", ") + "'" + values[k] + "'";
    return name + " given " +
           (values.size() == 2 ? std::string("twice") : std::to_string(values.size()) + " times") + ": " +
           listed + "; give it once";
  }
  return "";
}

}  // namespace trainer::cmd
