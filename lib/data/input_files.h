// Before any data is read or any model is built: every data file the config names exists and is a
// regular file. Reading Fashion-MNIST takes seconds; a misspelt path should fail at once.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

namespace trainer {

// Opens (and closes) every file of data.train (`train`: when need_train, or when the validation
// split comes from it) and data.validation (`validation`) of the config `file`. Throws DataError
// naming the first that is missing, unreadable or not a regular file, in the words the readers use.
void check_input_files(const YAML::Node& train, const YAML::Node& validation, const std::string& file,
                       bool need_train);

// Where in the config a data error about the source `section` (at `path`, "data.train") belongs, as
// a prefix for its message: file:line:column of the file key whose value the message quotes
// ('x.npy', or a place "x.csv:12:" at its start), then that key: "x.yaml:7:24: data.train.path: ";
// else the source's own place and path. A message that already starts with `path` gets the place
// alone. A value from --set has no line: "--set: data.train.path: ".
std::string data_error_place(const YAML::Node& section, const std::string& path, const std::string& file,
                             const std::string& message);

}  // namespace trainer
