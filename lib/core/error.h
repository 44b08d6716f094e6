// Typed errors. Everything inside lib/, kernels/ and datasets/ reports failure by throwing one of
// these; cmd/ maps each kind to a documented exit code (README "Exit codes"). Messages are written
// for the user: they say what was wrong, where, and what is allowed.
#pragma once

#include <stdexcept>
#include <string>

namespace trainer {

enum class ExitCode : int {
  ok = 0,
  internal = 1,      // a bug: an invariant of ours failed
  usage = 2,         // bad command line
  config = 3,        // bad YAML config or --set override
  data = 4,          // unreadable or malformed dataset / weights file
  runtime = 5,       // device, out-of-memory, numerical failure during a run
  interrupted = 130  // SIGINT/SIGTERM
};

class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ExitCode code() const { return code_; }

 private:
  ExitCode code_;
};

struct UsageError : Error {
  explicit UsageError(const std::string& m) : Error(ExitCode::usage, m) {}
};
struct ConfigError : Error {
  explicit ConfigError(const std::string& m) : Error(ExitCode::config, m) {}
};
struct DataError : Error {
  explicit DataError(const std::string& m) : Error(ExitCode::data, m) {}
};
struct RuntimeError : Error {
  explicit RuntimeError(const std::string& m) : Error(ExitCode::runtime, m) {}
};
// Raised when a memory cap (--mem-limit) or the device itself cannot satisfy an allocation.
struct OutOfMemoryError : Error {
  explicit OutOfMemoryError(const std::string& m) : Error(ExitCode::runtime, m) {}
};
struct InterruptedError : Error {
  explicit InterruptedError(const std::string& m) : Error(ExitCode::interrupted, m) {}
};
// A broken invariant of ours (not the user's fault).
struct InternalError : Error {
  explicit InternalError(const std::string& m) : Error(ExitCode::internal, m) {}
};

}  // namespace trainer
