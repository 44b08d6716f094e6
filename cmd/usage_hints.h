// Did-you-mean for the command line, as config keys have: an unknown verb ("train" -> fit) or
// flag ("--epoch" -> --epochs) is named with the closest known one.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace trainer::cmd {

// "unknown verb 'train' (did you mean 'fit'?); verbs: fit, summary, ...". Words other tools use
// for a verb (train, evaluate, infer, ...) map to ours; a config file given without a verb
// suggests fit.
std::string unknown_verb_message(const CLI::App& app, const std::string& word);

// For a parse error of `verb` (null: before any verb): the first argument that starts with '-'
// and is no flag of it, as "unknown flag '--epoch' (did you mean '--epochs'?)"; "" when every
// flag is known (the error is about something else).
std::string unknown_flag_message(const CLI::App& app, const CLI::App* verb,
                                 const std::vector<std::string>& args);

// For a parse error of `verb`: an option of one value given more than once, naming every value,
// as "--out given twice: 'a' and 'b'; give it once"; "" when there is none.
std::string repeated_option_message(const CLI::App* verb, const std::vector<std::string>& args);

}  // namespace trainer::cmd
