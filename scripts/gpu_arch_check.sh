#!/usr/bin/env bash
# On a GPU machine: a build whose only architecture the GPU cannot run must stop with one clear
# message and exit 5 (no CUDA error text), and --device auto must fall back to the CPU.
#   scripts/gpu_arch_check.sh TRAINER_BUILT_FOR_OTHER_ARCH
# Build one with: cmake -S . -B build-sm100 -G Ninja -DCMAKE_CUDA_ARCHITECTURES=100-real -DTRAINER_TESTS=OFF
set -uo pipefail
cd "$(dirname "$0")/.."
t="${1:?usage: $0 TRAINER_BUILT_FOR_ANOTHER_GPU}"
fail=0
echo "== trainer devices"
"$t" devices
echo "== bench --device gpu:0 (expect exit 5, one line, no CUDA error text)"
out=$("$t" bench configs/mnist_cnn.yaml --device gpu:0 --steps 5 --warmup 1 2>&1); rc=$?
echo "$out"; echo "exit code: $rc"
[ "$rc" -eq 5 ] || { echo "FAIL: exit code $rc, expected 5"; fail=1; }
[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || { echo "FAIL: more than one line"; fail=1; }
if printf '%s' "$out" | grep -qiE "no kernel image|cudaError|cuda runtime error"; then echo "FAIL: CUDA error text"; fail=1; fi
echo "== bench --device auto (expect a one-line warning, then the CPU)"
out=$("$t" bench configs/mnist_cnn.yaml --device auto --steps 5 --warmup 1 2>&1); rc=$?
echo "$out"; echo "exit code: $rc"
[ "$rc" -eq 0 ] || { echo "FAIL: auto did not fall back"; fail=1; }
printf '%s' "$out" | grep -q "CPU" || { echo "FAIL: auto did not run on the CPU"; fail=1; }
[ "$fail" -eq 0 ] && echo "arch check: PASSED" || echo "arch check: FAILED"
exit $fail
