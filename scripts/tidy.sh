#!/usr/bin/env bash
# clang-tidy (Debian's clang-tidy 14) with a short list of checks, on the C++ files a change
# touched, against build/compile_commands.json (so it runs after the build; CI runs it after the
# test step). Every finding is an error. CUDA sources (.cu) are left out: clang-tidy parses them
# with clang's CUDA front end, not nvcc's.
#   scripts/tidy.sh                 # the .cc files changed by the last commit (HEAD~1..HEAD)
#   scripts/tidy.sh BASE            # ... changed since BASE (a commit, e.g. origin/main)
#   scripts/tidy.sh --all           # every .cc file in the build (minutes per dozen files)
#
# The checks, each a kind of defect that has cost someone a day:
#   bugprone-use-after-move, bugprone-dangling-handle    a moved-from object or a view of a temporary
#   bugprone-suspicious-memset-usage, bugprone-undefined-memory-manipulation
#                                                        memset/memcpy on the wrong thing
#   bugprone-string-constructor, bugprone-string-integer-assignment
#                                                        std::string built from a number
#   bugprone-sizeof-expression                           sizeof(pointer) where the size was meant
#   performance-unnecessary-copy-initialization, performance-for-range-copy
#                                                        copies of containers in loops and locals
#   misc-redundant-expression                            x == x, a || a
# Left out as noise here: bugprone-misplaced-widening-cast (every size_t(i + 1) index) and
# bugprone-integer-division (integer channel and row arithmetic written that way on purpose).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_missing.sh tidy clang-tidy
build_dir="${TIDY_BUILD_DIR:-build}"
db="$build_dir/compile_commands.json"
[ -f "$db" ] || { echo "tidy: no $db (build first: scripts/test.sh)" >&2; exit 2; }

checks="-*,bugprone-use-after-move,bugprone-dangling-handle,bugprone-suspicious-memset-usage"
checks+=",bugprone-undefined-memory-manipulation,bugprone-string-constructor"
checks+=",bugprone-string-integer-assignment,bugprone-sizeof-expression"
checks+=",performance-unnecessary-copy-initialization,performance-for-range-copy,misc-redundant-expression"

if [ "${1:-}" = "--all" ]; then
  mapfile -t files < <(git ls-files '*.cc')
else
  base="${1:-HEAD~1}"
  if ! git rev-parse -q --verify "$base^{commit}" >/dev/null; then
    echo "tidy: no commit $base to compare with; nothing to check"
    exit 0
  fi
  mapfile -t files < <(git diff --name-only --diff-filter=d "$base" -- '*.cc')
fi
# Only files the build compiles (tests/fuzz/*.cc need a clang fuzzing build).
checked=()
for f in "${files[@]}"; do
  grep -q "\"file\": \"$(pwd)/$f\"" "$db" && checked+=("$f")
done
if [ "${#checked[@]}" -eq 0 ]; then
  echo "tidy: no changed C++ file in the build; nothing to check"
  exit 0
fi
echo "tidy: ${#checked[@]} files, checks: $checks"
# GCC-only warning flags in the database mean nothing to clang; -Werror is the build's business.
out=$(mktemp /tmp/tidy.XXXXXX)
trap 'rm -f "$out"' EXIT
status=0
printf '%s\n' "${checked[@]}" |
  xargs -P "$(nproc)" -n 4 clang-tidy -p "$build_dir" --quiet --checks="$checks" --warnings-as-errors='*' \
    --header-filter="^$(pwd)/(lib|kernels|cmd|datasets|tests)/" \
    --extra-arg=-Wno-unknown-warning-option --extra-arg=-Wno-error >"$out" 2>&1 || status=$?
grep -v "^[0-9]* warnings\? generated\.$\|^Suppressed [0-9]* warnings\|^Use -header-filter" "$out" || true
if [ "$status" -ne 0 ]; then
  echo "tidy: FAILED: clang-tidy found defects above (or could not parse a file)"
  exit 1
fi
echo "tidy: OK: ${#checked[@]} files"
