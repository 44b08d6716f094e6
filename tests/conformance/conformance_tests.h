// Registers the conformance table with Catch2: one test per (row, backend), each running every
// case of the row in its own section, so ctest lists one entry per row ("conformance: conv2d
// fp32 on cpu"). Called from the test binaries' main() before the session starts.
#pragma once

#include <string>

namespace trainer {
class Backend;
}

namespace trainer::conformance {

// The CPU binary: every row on the CPU backend.
void register_cpu_tests();

// The GPU binary: every row on `backend()`, each case also checked against `cpu()`.
void register_backend_tests(const std::string& backend_name, Backend& (*backend)(), Backend& (*cpu)());

}  // namespace trainer::conformance
