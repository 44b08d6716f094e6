#!/usr/bin/env bash
# ctest config_docs_fresh: docs/trainer.schema.json and docs/config.md are what the binary prints
# from the key declarations (`trainer schema`, `trainer schema --markdown`); a key declared, changed
# or documented differently without regenerating them fails here, naming the command that does.
#   tests/scripts/config_docs_fresh_test.sh TRAINER_BINARY
set -uo pipefail
trainer=$(realpath "$1")
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
stale=0
check() {  # FILE ARGS...: FILE must equal `trainer ARGS...`
  local file="$1"
  shift
  "$trainer" "$@" >"$work/printed" || { echo "config_docs_fresh: 'trainer $*' failed" >&2; exit 1; }
  if ! diff -u "$file" "$work/printed" >"$work/diff"; then
    echo "config_docs_fresh: $file is stale: it differs from 'trainer $*' (first lines of the diff):" >&2
    head -20 "$work/diff" >&2
    stale=1
  else
    echo "config_docs_fresh: $file is what 'trainer $*' prints"
  fi
}
check docs/trainer.schema.json schema
check docs/config.md schema --markdown
if [ "$stale" -ne 0 ]; then
  echo "config_docs_fresh: regenerate them from the repository root:" >&2
  echo "  build/trainer schema > docs/trainer.schema.json && build/trainer schema --markdown > docs/config.md" >&2
  exit 1
fi
