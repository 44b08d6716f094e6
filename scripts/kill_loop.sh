#!/usr/bin/env bash
# Crash test (issue 10): SIGKILL a small training at random moments, resume it each time, and check
# that nothing was lost.
#   scripts/kill_loop.sh                  # 30 kills, a fresh seed (printed)
#   KILL_SEED=1234 KILLS=40 scripts/kill_loop.sh
#
# 1. A reference run trains the tiny config of crash_common.sh uninterrupted (a checkpoint every
#    epoch, all kept); its time gives the startup time S and the epoch time E.
# 2. The same run is started in another directory and killed with SIGKILL after a random delay in
#    [0, S + 2E) (so kills land in start-up, in resume's loading, in training steps and in checkpoint
#    writes), KILLS times; each restart is `fit --resume` (or a fresh `fit --out` while no checkpoint
#    exists yet). Delays come from bash's RANDOM seeded with KILL_SEED: rerun with the printed seed
#    to replay the same delays (the moments they hit still depend on the machine's speed).
# 3. A last --resume runs to the end (exit 0, status "completed").
# Then: every checkpoint of the killed run loads (weights, optimizer and training state:
# check_checkpoint_loads), every weights file is byte-identical to the reference run's file of the
# same name (each epoch's checkpoint, and model.safetensors), and no file is torn.
set -euo pipefail
source "$(dirname "$0")/crash_common.sh"

KILLS="${KILLS:-30}"
KILL_SEED="${KILL_SEED:-$(( $(date +%s) % 100000 ))}"
EPOCHS="${EPOCHS:-80}"
say "seed $KILL_SEED (replay: KILL_SEED=$KILL_SEED scripts/kill_loop.sh), $KILLS kills, $EPOCHS epochs"
RANDOM="$KILL_SEED"

config="$work/tiny.yaml"
# 256 hidden units, 600 points: ~67k parameters, 10 steps per epoch, 0.8 MB per checkpoint (weights
# and Adam state): writing the checkpoint is a good part of each epoch.
write_mlp_config "$config" 256 600
fit=("$TRAINER" fit "$config" --epochs "$EPOCHS")  # stdout is a file: epoch lines, no live line

# ---- 1. reference run, and 1-epoch runs to separate start-up from epoch time ----
one_ms=""
for i in 1 2; do  # the faster of two: the first one also warms the page cache
  t0=$(now_ms)
  rm -rf "$work/one"
  "$TRAINER" fit "$config" --epochs 1 --out "$work/one" >"$work/one.log" 2>&1 || { cat "$work/one.log"; fail "the 1-epoch run failed"; }
  t=$(( $(now_ms) - t0 ))
  [ -n "$one_ms" ] && [ "$one_ms" -le "$t" ] || one_ms=$t
done
t1=$(now_ms)
"${fit[@]}" --out "$work/reference" >"$work/reference.log" 2>&1 || { cat "$work/reference.log"; fail "the reference run failed"; }
ref_ms=$(( $(now_ms) - t1 ))
epoch_ms=$(( (ref_ms - one_ms) / (EPOCHS - 1) ))
[ "$epoch_ms" -ge 1 ] || epoch_ms=1
start_ms=$(( one_ms - epoch_ms ))
[ "$start_ms" -ge 1 ] || start_ms=1
max_delay_ms=$(( start_ms + 2 * epoch_ms ))
say "reference run: ${ref_ms} ms for $EPOCHS epochs (start-up ~${start_ms} ms, ~${epoch_ms} ms per epoch with its checkpoint); kill delays in [0, ${max_delay_ms}) ms"

# ---- 2. the killed run ----
run="$work/killed"
kills=0 in_write=0 attempt=0 completed=0
while :; do
  attempt=$((attempt + 1))
  if [ -n "$(list_checkpoint_bases "$run" 2>/dev/null)" ]; then
    how=(--resume "$run")
  else
    how=(--out "$run")  # killed before the first checkpoint: start again (the directory may exist)
  fi
  log="$work/attempt-$attempt.log"
  if [ "$kills" -ge "$KILLS" ]; then
    # ---- 3. the last resume runs to the end ----
    "${fit[@]}" "${how[@]}" >"$log" 2>&1 || { cat "$log"; fail "the final ${how[*]} failed"; }
    completed=1
    break
  fi
  delay_ms=$(( (RANDOM * 32768 + RANDOM) % max_delay_ms ))
  "${fit[@]}" "${how[@]}" >"$log" 2>&1 &
  pid=$!
  sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
  if kill -KILL "$pid" 2>/dev/null; then
    status=0
    { wait "$pid"; } 2>/dev/null || status=$?  # (quiet: no "Killed" line from bash)
    if [ "$status" -ne 137 ]; then
      cat "$log"
      fail "attempt $attempt (${how[*]}) exited with $status before the kill at ${delay_ms} ms"
    fi
    kills=$((kills + 1))
    # A temporary file of the killed pid: the kill landed while a file was being written.
    torn="$(find "$run" -name "*.tmp-$pid" -printf '%f ' 2>/dev/null || true)"
    where=""
    if [ -n "$torn" ]; then
      in_write=$((in_write + 1))
      where=" (while writing ${torn% })"
    fi
    newest="$(list_checkpoint_bases "$run" 2>/dev/null | tail -1)"
    say "kill $kills at ${delay_ms} ms of ${how[0]}$where; newest checkpoint: ${newest:-none}"
  else
    # It ended before the kill: that must be the whole run, finished.
    status=0
    wait "$pid" || status=$?
    [ "$status" -eq 0 ] || { cat "$log"; fail "attempt $attempt (${how[*]}) exited with $status"; }
    fail "the run finished after only $kills kills (raise EPOCHS): the kill loop needs $KILLS"
  fi
done
grep -q '"status": "completed"' "$run/summary.json" || fail "$run/summary.json does not say completed: $(cat "$run/summary.json")"

# ---- checks ----
mapfile -t bases < <(list_checkpoint_bases "$run")
[ "${#bases[@]}" -eq "$EPOCHS" ] || fail "expected $EPOCHS checkpoints in $run/checkpoints, found ${#bases[@]}: ${bases[*]}"
for b in "${bases[@]}"; do check_checkpoint_loads "$config" "$run" "$b"; done
say "all ${#bases[@]} checkpoints load (weights, optimizer state, training state)"
compared=0
for f in "$run"/checkpoints/*.safetensors "$run/model.safetensors"; do
  case "$f" in *.state.safetensors) continue ;; esac  # state files hold wall-clock seconds
  rel="${f#"$run"/}"
  [ -e "$work/reference/$rel" ] || fail "$rel exists in the killed run but not in the reference run"
  cmp -s "$f" "$work/reference/$rel" || fail "$rel differs from the uninterrupted run's ($(cmp "$f" "$work/reference/$rel" 2>&1 | head -1))"
  compared=$((compared + 1))
done
check_weights_load "$config" "$run/model.safetensors"
check_no_torn_files "$run" allow-tmp
# Temporary files of killed writers are harmless (nothing reads *.tmp-PID) but take space; issue
# 10 item 7 has a run remove those of dead pids when it starts or resumes.
left="$(find "$run" -name '*.tmp-*' | wc -l)"
[ "$left" -eq 0 ] || say "note: $left temporary files of killed writers are left in $run"
say "PASSED: $kills SIGKILLs ($in_write during a file write), seed $KILL_SEED; every checkpoint loads; the last --resume completed; $compared weights files (every epoch's checkpoint and model.safetensors) are bit-identical to the uninterrupted run's"
