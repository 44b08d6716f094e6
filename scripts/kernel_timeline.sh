#!/usr/bin/env bash
# Kernel timeline of one command, without Nsight Systems (scripts/kernel_timeline.c, CUPTI):
#   scripts/kernel_timeline.sh [--last N] [--out FILE] [--program NAME] [--shim SO] -- COMMAND...
#   scripts/kernel_timeline.sh --build DIR     (builds DIR/kernel_timeline.so with libcupti beside it,
#                                               for a machine without a compiler or CUPTI's headers)
# Prints the span of the last N kernels (default 20000), the time in kernels and in the gaps
# between them, and per kernel name its count, mean time, mean gap before it and launch shape.
# --program NAME traces only processes whose name starts with NAME (default: the command's own
# name), so wrapper scripts stay untraced. E.g. the cold/warm gap of docs/performance.md:
#   d=$(mktemp -d); for k in cold warm; do TRAINER_CACHE_DIR=$d scripts/kernel_timeline.sh -- \
#     build/trainer bench configs/resnet_fashion_mnist.yaml --device gpu:0 --steps 1000; done
# Exit: the command's status; 2 for bad arguments or when the shim cannot be built.
set -uo pipefail
usage() { sed -n 2,12p "$0"; exit 2; }
last=20000 out= program= shim= build=
while [ $# -gt 0 ]; do
  case "$1" in
    --last) last=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --program) program=$2; shift 2 ;;
    --shim) shim=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --) shift; break ;;
    -h | --help) usage ;;
    *) usage ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
make_shim() {  # $1: directory
  local inc lib
  inc=$(dirname "$(ls "$cuda"/include/cupti.h "$cuda"/extras/CUPTI/include/cupti.h 2>/dev/null | head -1)")
  lib=$(ls -d "$cuda"/lib64/libcupti.so.* "$cuda"/lib/libcupti.so.* "$cuda"/extras/CUPTI/lib64/libcupti.so.* \
    2>/dev/null | head -1)
  [ -n "$inc" ] && [ -f "$inc/cupti.h" ] && [ -n "$lib" ] || { echo "kernel_timeline: no CUPTI under $cuda" >&2; return 2; }
  mkdir -p "$1" && cp -L "$lib" "$1/" &&
    gcc -O2 -Wall -Wextra -shared -fPIC "$here/kernel_timeline.c" -o "$1/kernel_timeline.so" -I"$inc" \
      "$1/$(basename "$lib")" -Wl,-rpath,'$ORIGIN'
}
if [ -n "$build" ]; then make_shim "$build" || exit 2; echo "$build/kernel_timeline.so"; exit 0; fi
[ $# -gt 0 ] || usage
[[ $last =~ ^[1-9][0-9]*$ ]] || usage
if [ -z "$shim" ]; then
  dir=$(mktemp -d) && trap 'rm -rf "$dir"' EXIT
  make_shim "$dir" || exit 2
  shim=$dir/kernel_timeline.so
fi
[ -n "$program" ] || program=$(basename "$1" | cut -c1-15)
vars=(TRACE_PROGRAM="$program" TRACE_LAST="$last" LD_PRELOAD="$shim${LD_PRELOAD:+:$LD_PRELOAD}")
[ -z "$out" ] || vars+=(TRACE_OUT="$out")
env "${vars[@]}" "$@"
