// The rows of the README's "Bad input" table (scripts/bad_input_table.sh prints it): each runs
// `trainer ARGS` in a directory and checks the exit code and the key part of the one line on
// stderr. Shared by tests/test_bad_input_table*.cc.
#pragma once

#include <sys/wait.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace trainer::test {

// The small classifier on generated points (no data files) that most rows start from.
inline const char* kTiny = R"(model:
  input_shape: [2]
  layers:
    - {type: dense, units: 8}
    - {type: relu}
    - {type: dense, units: 2}
loss: {type: sparse_categorical_crossentropy, from_logits: true}
optimizer:
  type: adam
  lr: 0.01
data:
  train: {format: disc, samples: 200, seed: 3}
  validation_split: 0.2
  num_classes: 2
  batch_size: 20
train:
  epochs: 2
  seed: 7
)";

struct Row {
  std::string args;
  int exit_code;
  std::string message;
  std::string prefix = "";  // before the binary: "env OMP_NUM_THREADS=9", "taskset -c 0"
};

inline size_t lines(const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); }

// Runs each row in `dir`: the exit code, and for refused inputs one "error: " line containing the
// message.
inline void check_rows(const std::string& dir, const std::vector<Row>& rows) {
  for (const Row& row : rows) {
    CAPTURE(row.args);
    const std::string cmd =
        "cd '" + dir + "' && " + row.prefix + " " + std::string(TRAINER_BINARY) + " " + row.args;
    const std::string out = dir + "/.err";
    const int status = std::system((cmd + " >/dev/null 2>" + out + " </dev/null").c_str());
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    const std::string err = slurp(out);
    INFO(err);
    REQUIRE(code == row.exit_code);
    REQUIRE_THAT(err, Catch::Contains(row.message));
    if (row.exit_code >= 2 && row.exit_code <= 4) {  // one error line after any info lines
      std::string rest = err;
      // libgomp checks OMP_NUM_THREADS itself, in its constructor, before main() runs: its own
      // "\nlibgomp: Invalid value ...\n" cannot be suppressed, so it is passed over here.
      if (rest.rfind("\nlibgomp: ", 0) == 0) rest.erase(0, 1);
      while ((rest.rfind("[", 0) == 0 && rest.find("] info: ") < rest.find('\n')) ||
             rest.rfind("libgomp: ", 0) == 0)
        rest = rest.substr(rest.find('\n') + 1);
      REQUIRE(rest.rfind("error: ", 0) == 0);
      REQUIRE(lines(rest) == 1);
    }
  }
}

inline std::string replace(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  REQUIRE(at != std::string::npos);
  return s.replace(at, from.size(), to);
}

}  // namespace trainer::test
