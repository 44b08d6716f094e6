#include "lib/train/fit_replicas.h"

#include <pthread.h>
#include <spdlog/sinks/sink.h>
#include <spdlog/spdlog.h>

#include <exception>
#include <memory>
#include <mutex>
#include <ostream>
#include <thread>
#include <typeinfo>

#include "lib/core/error.h"
#include "lib/dist/thread_world.h"

namespace trainer {
namespace {

// Replica threads other than 0 log errors only: a sink in front of the logger's own sinks drops
// their lower levels (spdlog's logger is shared by every thread; the level is not per thread).
thread_local bool t_quiet_replica = false;

class QuietReplicasSink final : public spdlog::sinks::sink {
 public:
  explicit QuietReplicasSink(std::vector<spdlog::sink_ptr> inner) : inner_(std::move(inner)) {}
  void log(const spdlog::details::log_msg& msg) override {
    if (t_quiet_replica && msg.level < spdlog::level::err) return;
    for (auto& s : inner_)
      if (s->should_log(msg.level)) s->log(msg);
  }
  void flush() override {
    for (auto& s : inner_) s->flush();
  }
  void set_pattern(const std::string& pattern) override {
    for (auto& s : inner_) s->set_pattern(pattern);
  }
  void set_formatter(std::unique_ptr<spdlog::formatter> f) override {
    for (auto& s : inner_) s->set_formatter(f->clone());
  }

 private:
  std::vector<spdlog::sink_ptr> inner_;
};

// Puts the quiet sink in front of the default logger's sinks for the lifetime of the object.
class QuietReplicas {
 public:
  QuietReplicas() : logger_(spdlog::default_logger()), saved_(logger_->sinks()) {
    logger_->sinks() = {std::make_shared<QuietReplicasSink>(saved_)};
  }
  ~QuietReplicas() { logger_->sinks() = saved_; }
  QuietReplicas(const QuietReplicas&) = delete;
  QuietReplicas& operator=(const QuietReplicas&) = delete;

 private:
  std::shared_ptr<spdlog::logger> logger_;
  std::vector<spdlog::sink_ptr> saved_;
};

// Where the output of replicas other than 0 goes: accepted and dropped.
std::ostream& discard_stream() {
  struct Discard : std::streambuf {
    int overflow(int c) override { return traits_type::not_eof(c); }
    std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
  };
  static thread_local Discard buffer;
  static thread_local std::ostream stream(&buffer);
  return stream;
}

bool is_interrupt(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const InterruptedError&) {
    return true;
  } catch (...) {
    return false;
  }
}

bool is_consequence(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const WorldStopped&) {
    return true;
  } catch (...) {
    return false;
  }
}

const std::type_info& type_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return typeid(x);
  } catch (...) {
    return typeid(void);
  }
}

// Rethrows replica r's error with the replica named (trainer errors keep their exit code).
[[noreturn]] void rethrow_named(const std::exception_ptr& e, const std::string& who) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& x) {
    throw Error(x.code(), who + ": " + x.what());
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& x) {
    throw RuntimeError(who + ": " + x.what());
  } catch (...) {
    throw;
  }
}

}  // namespace

FitResult fit_replicas(const Config& cfg, const FitOptions& opt, const std::vector<int>& gpus,
                       std::ostream& out) {
  const int n = int(gpus.size());
  std::string list;
  for (int g : gpus) list += (list.empty() ? "gpu:" : ",") + std::to_string(g);
  ThreadHub hub(n, "replica", std::to_string(n) + " replicas (threads of one process) on " + list);
  std::vector<FitResult> results(static_cast<size_t>(n));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  {
    const QuietReplicas quiet;
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        const std::string name = "trainer-gpu" + std::to_string(gpus[size_t(r)]);
        pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
        t_quiet_replica = r != 0;
        ThreadRank comm(hub, r);
        FitOptions o = opt;
        o.comm = &comm;
        o.device.device = "gpu:" + std::to_string(gpus[size_t(r)]);
        try {
          results[size_t(r)] = fit(cfg, o, r == 0 ? out : discard_stream());
        } catch (...) {
          errors[size_t(r)] = std::current_exception();
          // An interrupt is every replica's, at the same step: nothing to abort (replica 0 still
          // saves its checkpoint, and its last step's all-reduce may still be running).
          if (!is_interrupt(errors[size_t(r)])) {
            std::string what = "unknown error";
            try {
              std::rethrow_exception(errors[size_t(r)]);
            } catch (const std::exception& x) {
              what = x.what();
            } catch (...) {
            }
            hub.fail(r, what);
          }
        }
      });
    for (auto& t : threads) t.join();
  }
  const auto who = [&](int r) {
    return "replica " + std::to_string(r) + " of " + std::to_string(n) +
           " (gpu:" + std::to_string(gpus[size_t(r)]) + ")";
  };
  const int first = hub.failed_rank();
  if (first < 0) {
    // No failure, or an interrupt (every replica's): replica 0's result or error.
    if (errors[0]) std::rethrow_exception(errors[0]);
    for (int r = 1; r < n; ++r)
      if (errors[size_t(r)]) rethrow_named(errors[size_t(r)], who(r));
    return results[0];
  }
  // Replica 0's own error when it failed alike (a decision every replica takes on shared values,
  // such as divergence: replica 0's message names the run directory); else the first failure.
  if (errors[0] && !is_consequence(errors[0]) && !is_interrupt(errors[0]) &&
      type_of(errors[0]) == type_of(errors[size_t(first)]))
    rethrow_named(errors[0], who(0));
  rethrow_named(errors[size_t(first)], who(first));
}

}  // namespace trainer
