#!/usr/bin/env bash
# The CPU test suite under AddressSanitizer + UndefinedBehaviorSanitizer (CI step; issue 10).
#   scripts/sanitize.sh                 # configure + build build-asan/, run ctest there
#   BUILD_DIR=... scripts/sanitize.sh
# Builds only trainer and trainer_tests (CPU only, -O1 -g1: line numbers in reports, quick to
# compile). Any ASan or UBSan report aborts the process it is in, so it fails that test; ctest
# prints the report (--output-on-failure). Leaks are detected (LeakSanitizer, at every exit) and
# none is suppressed: the suite, and every trainer process it starts, reports no leak, oneDNN's and
# libgomp's allocations included (what they keep for the life of the process is still reachable at
# exit, which LeakSanitizer does not count). Should a third-party leak appear (another oneDNN),
# suppress it by library name in a committed suppressions file (LSAN_OPTIONS=suppressions=...),
# never with detect_leaks=0.
# Needs what scripts/setup.sh installs (run it first on a fresh machine).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
build_dir="${BUILD_DIR:-build-asan}"

# Without MPI: Open MPI's runtime (its malloc hooks, its never-freed globals) is not ASan-clean, so
# ctest mpi_data_parallel is skipped here; the data-parallel code itself runs under ASan in
# trainer_tests (ranks as threads: tests/test_data_parallel.cc).
launcher=()
if command -v ccache >/dev/null; then  # as scripts/setup.sh
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$build_dir" -G Ninja -DTRAINER_CUDA=OFF -DTRAINER_SANITIZE=ON -DTRAINER_MPI=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" "${launcher[@]}" >/dev/null
targets=(trainer trainer_tests)
# The man page (cmake/docs.cmake) exists as a target where help2man is installed; its test reads it.
if cmake --build "$build_dir" --target help | grep -q trainer_man_page; then targets+=(trainer_man_page); fi
cmake --build "$build_dir" -j "$(nproc)" --target "${targets[@]}"

# halt_on_error/abort_on_error: the first report ends the process with a non-zero status.
# strict_string_checks and detect_stack_use_after_return find more; check_initialization_order
# catches static-init races between our translation units.
# Reports go to files in $logs too (log_path), because many tests run build-asan/trainer as a
# child process whose stderr the test captures: a child's report, even in a test that expects a
# non-zero exit, fails this step and is printed below.
logs="$(cd "$build_dir" && pwd)/sanitizer-logs"
rm -rf "$logs" && mkdir -p "$logs"
export ASAN_OPTIONS="log_path=$logs/asan:halt_on_error=1:abort_on_error=1:print_stacktrace=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:symbolize=1"
export UBSAN_OPTIONS="log_path=$logs/ubsan:halt_on_error=1:abort_on_error=1:print_stacktrace=1:report_error_type=1"
status=0
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" || status=$?
reports=("$logs"/*)
if [ -e "${reports[0]}" ]; then
  for r in "${reports[@]}"; do echo "==== $r"; cat "$r"; done
  echo "sanitize: FAILED: ${#reports[@]} sanitizer report(s) above" >&2
  exit 1
fi
[ "$status" -eq 0 ] || { echo "sanitize: FAILED: ctest exit $status" >&2; exit "$status"; }
echo "sanitize: the CPU test suite passed under ASan + UBSan ($build_dir)"
