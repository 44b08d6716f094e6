#!/usr/bin/env bash
# ctest "cublas_opened_lazily": a CUDA build of trainer does not link cuBLAS or cuBLASLt (their static
# initializers cost every process 130 ms and 211 MB), and a CPU run, a summary or --help never opens
# them (kernels/cuda/cublas_lazy.cc). Skipped (77) in a build without the CUDA backend.
#   tests/scripts/lazy_cublas_test.sh TRAINER_BINARY
set -euo pipefail
trainer=$(realpath "$1")
repo=$(cd "$(dirname "$0")/../.." && pwd)
if ! "$trainer" --version | grep -q '^CUDA:'; then
  echo "a build without the CUDA backend: nothing to check"
  exit 77
fi
if readelf -d "$trainer" | grep -E 'NEEDED.*libcublas'; then
  echo "FAIL: trainer links cuBLAS (see above); it should open it at its first use" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
opened() {  # the files the dynamic loader opens while the command runs
  LD_DEBUG=files "$@" >"$work/out" 2>"$work/debug" || { cat "$work/out" "$work/debug" | tail -20 >&2; exit 1; }
  grep -E 'file=libcublas' "$work/debug" || true
}
for cmd in "--help" "summary $repo/configs/iris_mlp.yaml" \
           "fit $repo/configs/iris_mlp.yaml --device cpu --epochs 1 --no-out -q"; do
  # shellcheck disable=SC2086
  got=$(opened "$trainer" $cmd)
  if [ -n "$got" ]; then
    echo "FAIL: 'trainer $cmd' opened cuBLAS:" >&2
    echo "$got" >&2
    exit 1
  fi
  echo "ok: trainer $cmd opens no cuBLAS"
done
