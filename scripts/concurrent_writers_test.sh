#!/usr/bin/env bash
# Crash test (issue 10, defect 2): two processes writing one run directory.
#   scripts/concurrent_writers_test.sh
#
# The run directory is locked for the life of a run (flock on a lock file in it). Of two
# `fit ... --out D` started at the same moment, exactly one runs; the other fails at once (while
# the first still runs) with exit 2 and a message naming the holder's pid and host. The same holds
# for two `fit ... --resume D`. The run that holds the lock leaves a directory with one history:
# one metrics.csv header and one row per epoch, whole events.jsonl lines with one start (or
# resume) and one end event, and a completed summary.json.
set -euo pipefail
source "$(dirname "$0")/crash_common.sh"

config="$work/tiny.yaml"
# 256 hidden units, 4000 points: 20 epochs take a few seconds, so the loser's exit falls well
# inside the winner's run.
write_mlp_config "$config" 256 4000
run="$work/run"
host="$(hostname)"

# race NAME EPOCHS ARGS...: starts two `fit CONFIG --epochs EPOCHS ARGS` at once and checks that
# exactly one runs (exit 0) and the other exits 2 at once, naming the holder.
race() {
  local name="$1" epochs="$2"
  shift 2
  local cmd=("$TRAINER" fit "$config" --epochs "$epochs" "$@")
  say "$name: starting two 'trainer ${cmd[*]:1}' at once"
  "${cmd[@]}" >"$work/$name.a.out" 2>"$work/$name.a.err" &
  local pid_a=$!
  "${cmd[@]}" >"$work/$name.b.out" 2>"$work/$name.b.err" &
  local pid_b=$!
  local t0 first status=0
  t0=$(now_ms)
  wait -n -p first "$pid_a" "$pid_b" || status=$?
  local first_ms=$(( $(now_ms) - t0 ))
  local loser winner loser_tag winner_tag
  if [ "$first" = "$pid_a" ]; then
    loser=$pid_a winner=$pid_b loser_tag=a winner_tag=b
  else
    loser=$pid_b winner=$pid_a loser_tag=b winner_tag=a
  fi
  local still_running=0
  kill -0 "$winner" 2>/dev/null && still_running=1
  local winner_status=0
  wait "$winner" || winner_status=$?
  local loser_err="$work/$name.$loser_tag.err"
  if [ "$status" -eq 0 ] && [ "$winner_status" -eq 0 ]; then
    fail "$name: both runs exited 0: the run directory is not locked, so both wrote into it (issue 10 defect 2; metrics.csv has $(grep -c '^epoch' "$run/metrics.csv" || true) header lines)"
  fi
  if [ "$status" -ne 2 ]; then
    sed 's/^/  stderr: /' "$loser_err" >&2
    fail "$name: the process that ended first (pid $loser) exited $status, expected 2 (the directory is in use)"
  fi
  grep -q '^error: ' "$loser_err" || fail "$name: the refused run printed no 'error:' line"
  local msg
  msg="$(grep '^error: ' "$loser_err" | head -1)"
  echo "$msg" | grep -qw -- "$winner" || fail "$name: the refusal does not name the holder's pid $winner: $msg"
  echo "$msg" | grep -qwF -- "$host" || fail "$name: the refusal does not name the holder's host $host: $msg"
  [ "$still_running" -eq 1 ] || fail "$name: the refused run ended after ${first_ms} ms, not while the other ran (it must fail at once, not wait for the lock)"
  if [ "$winner_status" -ne 0 ]; then
    sed 's/^/  stderr: /' "$work/$name.$winner_tag.err" >&2
    fail "$name: the run holding the directory exited $winner_status"
  fi
  say "$name: pid $loser exited 2 after ${first_ms} ms while pid $winner ran on: $msg"
}

# check_one_history EPOCHS STARTS: the directory holds the history of one run of EPOCHS epochs.
check_one_history() {
  local epochs="$1" starts="$2"
  check_no_torn_files "$run"
  local headers rows
  headers="$(grep -c '^epoch' "$run/metrics.csv" || true)"
  rows="$(grep -vc '^epoch' "$run/metrics.csv" || true)"
  [ "$headers" -eq 1 ] || fail "metrics.csv has $headers header lines"
  [ "$rows" -eq "$epochs" ] || fail "metrics.csv has $rows rows for $epochs epochs"
  [ "$(cut -d, -f1 "$run/metrics.csv" | tail -n +2 | sort -n | uniq -d | wc -l)" -eq 0 ] ||
    fail "metrics.csv repeats an epoch"
  local n
  n="$(grep -Ec '"event": ?"(start|resume)"' "$run/events.jsonl" || true)"
  [ "$n" -eq "$starts" ] || fail "events.jsonl has $n start/resume events, expected $starts"
  n="$(grep -Ec '"event": ?"end"' "$run/events.jsonl" || true)"
  [ "$n" -eq "$starts" ] || fail "events.jsonl has $n end events, expected $starts"
  grep -q '"status": "completed"' "$run/summary.json" || fail "summary.json does not say completed"
}

race fresh 20 --out "$run"
check_one_history 20 1
race resume 40 --resume "$run"
check_one_history 40 2
say "PASSED: of two fits on one --out, and of two --resume of one directory, one ran and the other exited 2 at once naming the holder; the directory holds one history"
