#!/usr/bin/env bash
# Fails when a C++/CUDA source differs from .clang-format (Debian's clang-format 14), naming the
# files; --fix rewrites them instead.
#   scripts/check_format.sh [--fix]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_missing.sh format clang-format
mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cu' '*.cuh')
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  echo "check_format: formatted ${#files[@]} files"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ "${#bad[@]}" -gt 0 ]; then
  printf 'check_format: %s differs from .clang-format\n' "${bad[@]}"
  echo "check_format: FAILED: ${#bad[@]} of ${#files[@]} files; run scripts/check_format.sh --fix"
  exit 1
fi
echo "check_format: OK: ${#files[@]} files match .clang-format"
