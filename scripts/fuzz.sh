#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/) with clang, ASan and UBSan into build-fuzz/, and runs
# each for N seconds on a copy of its seed corpus (tests/fuzz/corpus/<target>/). Fails when any
# target finds a crash, a sanitizer report, an uncaught exception, a leak, an input slower than
# FUZZ_TIMEOUT seconds or one using more than 2 GB; the inputs are saved in build-fuzz/crashes/.
#   scripts/fuzz.sh                  # 60 s per target
#   scripts/fuzz.sh 10               # CI
#   scripts/fuzz.sh 600 fuzz_npy     # one target, longer
#   FUZZ_JOBS=2 scripts/fuzz.sh      # two targets at a time
# Replay a crash: build-fuzz/fuzz/fuzz_npy build-fuzz/crashes/fuzz_npy-crash-<sha1>
# The corpus each run grows stays in build-fuzz/corpus/ and seeds the next run.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-60}"
shift || true
all_targets=(fuzz_idx fuzz_idx_gzip fuzz_npy fuzz_csv fuzz_cifar10 fuzz_sequences fuzz_tokens fuzz_safetensors fuzz_config fuzz_png fuzz_jpeg
  fuzz_train_state fuzz_set_keys)
targets=("$@")
[ "${#targets[@]}" -eq 0 ] && targets=("${all_targets[@]}")
jobs="${FUZZ_JOBS:-1}"
build_dir="${FUZZ_BUILD_DIR:-build-fuzz}"

# Largest input per target: a few records or rows are enough to reach every branch, and small
# inputs keep the executions fast (a CIFAR-10 record alone is 3073 bytes).
max_len_of() {
  case "$1" in
    fuzz_cifar10) echo 16384 ;;
    fuzz_config) echo 8192 ;;
    fuzz_png | fuzz_jpeg) echo 8192 ;;
    fuzz_set_keys) echo 65536 ;;  # room for keys thousands of segments deep
    *) echo 4096 ;;
  esac
}

# Debian 12 packages the fuzz build needs (clang-14 with its sanitizer and libFuzzer runtimes),
# installed the way scripts/setup.sh installs its own.
packages=(cmake ninja-build clang-14 libclang-rt-14-dev zlib1g-dev libpng-dev libjpeg62-turbo-dev libyaml-cpp-dev nlohmann-json3-dev
          libspdlog-dev)
scripts/install_missing.sh fuzz "${packages[@]}"
cc=clang cxx=clang++
command -v clang++ >/dev/null || { cc=clang-14; cxx=clang++-14; }

start=$(date +%s)
launcher=()
if command -v ccache >/dev/null; then  # as scripts/setup.sh: one cache for every clone
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(pwd)}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
CC=$cc CXX=$cxx cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRAINER_FUZZ=ON \
  "${launcher[@]}" >/dev/null
cmake --build "$build_dir" -j "$(nproc)" --target "${targets[@]}"
echo "fuzz: built ${#targets[@]} targets in $(( $(date +%s) - start )) s; ${seconds} s each, ${jobs} at a time"

mkdir -p "$build_dir/crashes" "$build_dir/logs"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

run_one() {
  local t=$1 corpus="$build_dir/corpus/$1" log="$build_dir/logs/$1.log"
  mkdir -p "$corpus"
  cp -n tests/fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true
  local rc=0 dict=()
  [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
  "$build_dir/fuzz/$t" "$corpus" "${dict[@]}" -max_total_time="$seconds" -max_len="$(max_len_of "$t")" -rss_limit_mb=2048 \
    -timeout="${FUZZ_TIMEOUT:-25}" -print_final_stats=1 -artifact_prefix="$build_dir/crashes/$t-" >"$log" 2>&1 || rc=$?
  local execs
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  if [ "$rc" -eq 0 ]; then
    printf 'fuzz: %-18s %10s executions in %s s, corpus %s files: ok\n' "$t" "${execs:-?}" "$seconds" \
      "$(ls "$corpus" | wc -l)"
  else
    printf 'fuzz: %-18s %10s executions: FAILED (exit %s), see %s\n' "$t" "${execs:-?}" "$rc" "$log"
    grep -E "^(==[0-9]+==ERROR|SUMMARY|.*runtime error|.*deadly signal|.*uncaught exception|artifact_prefix|Test unit written)" \
      "$log" | head -8 | sed 's/^/      /'
  fi
  return "$rc"
}

failed=()
pids=() names=()
for t in "${targets[@]}"; do
  run_one "$t" & pids+=($!) names+=("$t")
  if [ "${#pids[@]}" -ge "$jobs" ]; then
    wait "${pids[0]}" || failed+=("${names[0]}")
    pids=("${pids[@]:1}") names=("${names[@]:1}")
  fi
done
for i in "${!pids[@]}"; do wait "${pids[$i]}" || failed+=("${names[$i]}"); done

echo "fuzz: done in $(( $(date +%s) - start )) s"
if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]}; inputs in $build_dir/crashes/:"
  ls -1 "$build_dir/crashes" | sed 's/^/  /'
  exit 1
fi
echo "fuzz: no crashes"
