#!/usr/bin/env bash
# ctest "kernel_timeline_script": scripts/kernel_timeline.sh builds its CUPTI shim (--build DIR),
# keeps the traced command's exit status, refuses bad arguments (exit 2), and with a GPU traces a
# short `trainer bench`: the summary names the kernels it saw. Skips (77) without CUPTI's headers.
#   tests/scripts/kernel_timeline_test.sh TRAINER_BINARY
set -uo pipefail
trainer=$(realpath "$1")
repo=$(cd "$(dirname "$0")/../.." && pwd)
script=$repo/scripts/kernel_timeline.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "kernel_timeline_test: $*" >&2; exit 1; }

if ! bash "$script" --build "$work/shim" >"$work/build.txt" 2>&1; then
  grep -q "no CUPTI" "$work/build.txt" && { echo "kernel_timeline_test: SKIP: no CUPTI"; exit 77; }
  fail "the shim did not build: $(cat "$work/build.txt")"
fi
[ -f "$work/shim/kernel_timeline.so" ] && ls "$work/shim"/libcupti.so.* >/dev/null 2>&1 ||
  fail "--build must leave kernel_timeline.so and libcupti beside it"

rc=0; bash "$script" --shim "$work/shim/kernel_timeline.so" -- sh -c 'exit 3' >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 3 ] || fail "the traced command's status must come back, got $rc"
rc=0; bash "$script" --last x -- true >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "--last x must exit 2, got $rc"
rc=0; bash "$script" >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "no command must exit 2, got $rc"

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  # --program trainer: the binary may be a wrapper script (the GPU machine's bundle) that execs it.
  TRAINER_CACHE_DIR=$work/cache bash "$script" --shim "$work/shim/kernel_timeline.so" --out "$work/t.txt" \
    --program trainer -- \
    "$trainer" bench "$repo/configs/mnist_cnn.yaml" --device gpu:0 --steps 50 >"$work/bench.txt" 2>&1 ||
    fail "the traced bench failed: $(tail -5 "$work/bench.txt")"
  head -1 "$work/t.txt" | grep -Eq '^kernels [1-9][0-9]* \(of [0-9]+\): span ' || fail "no summary: $(head -3 "$work/t.txt")"
  [ "$(wc -l <"$work/t.txt")" -ge 3 ] || fail "no kernel lines"
  head -3 "$work/t.txt"
else
  echo "kernel_timeline_test: no GPU here: the shim built and the wrapper checked, no trace taken"
fi
echo "kernel_timeline_test: OK"
