// A last word on a crash. Nothing the user types or feeds may crash trainer; if a bug does, the
// fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL) prints which thread died and the stack, as
// "module(+offset)" frames that `addr2line -f -C -e build/trainer OFFSET` turns into functions,
// then the signal ends the process as it would have (exit status 128 + signal).
#pragma once

namespace trainer::cmd {

// Installs the handler (not under AddressSanitizer or ThreadSanitizer, whose reports say more).
void install_crash_report();

}  // namespace trainer::cmd
