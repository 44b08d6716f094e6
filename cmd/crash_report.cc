// The fatal-signal report (see crash_report.h). Only async-signal-safe calls in the handler:
// write(2), backtrace_symbols_fd and pthread_getname_np's read of the thread's name; backtrace()
// runs once at installation so that its lazy loading of libgcc_s does not happen in the handler.
#include "cmd/crash_report.h"

#include <execinfo.h>
#include <pthread.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <initializer_list>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TRAINER_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TRAINER_SANITIZED 1
#endif
#endif

namespace trainer::cmd {
namespace {

#ifndef TRAINER_SANITIZED  // under a sanitizer, its own report serves (install_crash_report)
void say(const char* s) {
  const ssize_t ignored = write(STDERR_FILENO, s, strlen(s));
  (void)ignored;
}

void on_fatal_signal(int sig) {
  char thread[32] = "?";
  pthread_getname_np(pthread_self(), thread, sizeof thread);
  say("\ntrainer: internal error: ");
  say(sig == SIGSEGV  ? "segmentation fault"
      : sig == SIGBUS ? "bus error"
      : sig == SIGFPE ? "arithmetic fault"
                      : "illegal instruction");
  say(" in thread '");
  say(thread);
  say("'. This is a bug in trainer: please report it with this stack.\n");
  void* frames[64];
  const int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  // The default action ends the process with this signal once the handler returns to the fault.
  signal(sig, SIG_DFL);
  raise(sig);
}
#endif

}  // namespace

void install_crash_report() {
#ifndef TRAINER_SANITIZED
  void* warm[2];
  backtrace(warm, 2);
  struct sigaction sa {};
  sa.sa_handler = on_fatal_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) sigaction(sig, &sa, nullptr);
#endif
}

}  // namespace trainer::cmd
