#!/usr/bin/env bash
# Crash test (issue 10): a run whose checkpoints do not fit on its disk.
#   scripts/full_disk_test.sh
#
# Mounts a 3 MiB tmpfs in a private mount namespace (unshare: the mount disappears with the test,
# even when it is killed; as root directly, otherwise through a user namespace) and trains there a
# model whose checkpoints (~0.5 MiB each, all kept) fill it after a few epochs. Checks:
#   - the run exits 5 with one error line naming the full disk ("No space left on device"),
#   - no temporary file is left and no line of metrics.csv or events.jsonl is torn,
#   - every checkpoint written before the disk filled loads (weights, optimizer and training
#     state), and the newest one resumes to the end once there is room.
# Where no tmpfs can be mounted (no root, no user namespaces), it prints "SKIPPED: ..." and exits 0.
set -euo pipefail
source "$(dirname "$0")/crash_common.sh"

SIZE="${FULL_DISK_SIZE:-3m}"
disk="$work/disk"
mkdir -p "$disk"

if [ "${1:-}" != --inside ]; then
  # Re-run this script in a private mount namespace; the scratch directory stays the parent's.
  ns=() why=""
  if [ "$(id -u)" -eq 0 ] && why="$(unshare --mount true 2>&1)"; then
    ns=(unshare --mount --propagation private)
  elif why="$(unshare --user --map-root-user --mount true 2>&1)"; then
    ns=(unshare --user --map-root-user --mount --propagation private)
  fi
  if [ "${#ns[@]}" -eq 0 ]; then
    why="no private mount namespace (uid $(id -u); unshare: ${why:-failed})"
  elif ! probe="$("${ns[@]}" mount -t tmpfs -o size=64k tmpfs "$disk" 2>&1)"; then
    why="mount -t tmpfs is not permitted here: $probe"
  fi
  if [ -n "$why" ]; then
    say "SKIPPED: cannot mount a small tmpfs: $why"
    exit 0
  fi
  KEEP_WORK=1 TRAINER="$TRAINER" FULL_DISK_WORK="$work" "${ns[@]}" bash "$0" --inside
  exit $?
fi

# ---- inside the namespace ----
[ -n "${FULL_DISK_WORK:-}" ] && { rmdir "$disk" "$work" 2>/dev/null || true; work="$FULL_DISK_WORK"; disk="$work/disk"; }
trap 'umount "$disk" 2>/dev/null || true; rm -rf "$work"' EXIT
mount -t tmpfs -o "size=$SIZE" tmpfs "$disk"
say "mounted a $SIZE tmpfs at $disk ($(df -k --output=avail "$disk" | tail -1 | tr -d ' ') KiB free)"

config="$work/tiny.yaml"
# 256 hidden units: ~67k parameters, 0.26 MiB of weights and 0.52 MiB of Adam state per checkpoint.
write_mlp_config "$config" 256 1000
run="$disk/run"
status=0
"$TRAINER" fit "$config" --epochs 30 --out "$run" >"$work/fit.out" 2>"$work/fit.err" || status=$?
cat "$work/fit.err" | sed 's/^/  stderr: /' | grep -v ' info: ' || true
[ "$status" -eq 5 ] || fail "a full disk should end the run with exit 5, got $status"
errors="$(grep -c '^error: ' "$work/fit.err" || true)"
[ "$errors" -eq 1 ] || fail "expected exactly one 'error:' line on stderr, got $errors"
grep -q '^error: .*No space left on device' "$work/fit.err" || fail "the error line does not name the full disk (No space left on device)"
say "exit $status: $(grep '^error: ' "$work/fit.err")"

check_no_torn_files "$run"
mapfile -t bases < <(list_checkpoint_bases "$run")
[ "${#bases[@]}" -ge 1 ] || fail "no checkpoint was written before the disk filled (make the tmpfs larger)"
# Copy the run off the full disk, so that loading (which writes a scratch run directory) has room.
cp -r "$run" "$work/copy"
for b in "${bases[@]}"; do check_checkpoint_loads "$config" "$work/copy" "$b"; done
for f in "$work"/copy/checkpoints/*.safetensors; do
  case "$f" in *.state.safetensors) ;; *) check_weights_load "$config" "$f" ;; esac
done
"$TRAINER" fit "$config" --epochs 30 --resume "$work/copy" >"$work/resume.log" 2>&1 ||
  { cat "$work/resume.log"; fail "--resume of the copied run failed"; }
grep -q '"status": "completed"' "$work/copy/summary.json" || fail "the resumed copy did not complete"
say "PASSED: exit 5 naming the full disk; ${#bases[@]} earlier checkpoints (${bases[0]} .. ${bases[-1]}) load; no torn or temporary files; the newest resumes to the end elsewhere"
