#!/usr/bin/env bash
# ctest "sweep_script": scripts/sweep.sh run from another directory on the disc config sweeps two
# keys (4 runs), writes summary.csv and sweep.csv and prints the table; a failing value makes the
# sweep exit 1 with the run marked failed; a usage error exits 2.
#   tests/scripts/sweep_test.sh TRAINER_BINARY
set -euo pipefail
export TRAINER=$(realpath "$1")
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"  # not the checkout: the script must find its way from anywhere
fail() { echo "sweep_test: $*" >&2; exit 1; }

"$repo/scripts/sweep.sh" "$repo/configs/mlp_disc.yaml" optimizer.lr=0.3,0.03 model.layers.0.depth=2,3 \
  --out sw -- --epochs 3 >table.txt 2>log.txt || fail "the sweep failed: $(cat log.txt)"
cat table.txt
[ "$(head -1 table.txt | tr -s ' ')" = "run optimizer.lr model.layers.0.depth device status exit epochs_run monitor best_value best_epoch final_loss seconds" ] ||
  fail "unexpected table header"
[ "$(grep -cE ' config +completed +0 ' table.txt)" -eq 4 ] || fail "expected 4 completed runs on the config's device"
grep -q '^lr=0.03_depth=3 ' table.txt || fail "run names are key=value"
[ "$(wc -l <sw/summary.csv)" -eq 5 ] || fail "summary.csv: expected a header and 4 rows"
[ "$(wc -l <sw/sweep.csv)" -eq 13 ] || fail "sweep.csv: expected a header and 4 x 3 epoch rows"
head -1 sw/sweep.csv | grep -q '^run,optimizer.lr,model.layers.0.depth,epoch,step,loss,accuracy' ||
  fail "sweep.csv header: $(head -1 sw/sweep.csv)"
[ -f sw/lr=0.3_depth=2/model.safetensors ] || fail "each run has its run directory"

rc=0
"$repo/scripts/sweep.sh" "$repo/configs/mlp_disc.yaml" optimizer.lr=0.1,-1 --out bad -- --epochs 1 \
  >bad.txt 2>badlog.txt || rc=$?
[ "$rc" -eq 1 ] || fail "a failed run must make the sweep exit 1, got $rc"
grep -qE '^lr=-1 .* failed +3 ' bad.txt || fail "the failed run is in the table with its exit code: $(cat bad.txt)"
grep -q 'optimizer.lr: value -1 is out of range' badlog.txt || fail "the failure's error line is shown"
grep -q '^lr=0.1 .* completed' bad.txt || fail "the other runs still run"

rc=0
"$repo/scripts/sweep.sh" "$repo/configs/mlp_disc.yaml" 2>/dev/null || rc=$?
[ "$rc" -eq 2 ] || fail "no KEY=values is a usage error (exit 2), got $rc"

# Concurrent runs over a device list (two CPU slots here; gpu:0,gpu:1 on a GPU machine), one run
# forced to fail: the others finish, the table names each run's device and is sorted by the
# monitored value, best first, failed runs last.
rc=0
"$repo/scripts/sweep.sh" "$repo/configs/mlp_disc.yaml" optimizer.lr=0.03,-1,0.3,0.1 --devices cpu,cpu \
  --out par -- --epochs 2 >par.txt 2>parlog.txt || rc=$?
cat par.txt
[ "$rc" -eq 1 ] || fail "one failed run of four: the sweep exits 1, got $rc"
[ "$(grep -cE ' cpu +completed +0 ' par.txt)" -eq 3 ] || fail "three runs complete on cpu: $(cat par.txt)"
[ "$(tail -1 par.txt | awk '{print $1}')" = "lr=-1" ] || fail "the failed run is listed last"
python3 - par/summary.csv <<'PY' || fail "summary.csv is not sorted by best_value"
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["status"] == "completed"]
vals = [float(r["best_value"]) for r in rows]
assert rows and all(r["monitor"].endswith("loss") for r in rows), rows
assert vals == sorted(vals), vals
PY
grep -q 'sweep: lr=0.3 on cpu' parlog.txt || fail "each run's device is logged"
for bad in "--devices tpu:0" "--per-gpu 0" "--devices"; do
  rc=0
  # shellcheck disable=SC2086
  "$repo/scripts/sweep.sh" "$repo/configs/mlp_disc.yaml" optimizer.lr=0.1 $bad 2>/dev/null || rc=$?
  [ "$rc" -eq 2 ] || fail "'$bad' is a usage error (exit 2), got $rc"
done
# Duplicate values (issue 30, item 13): lr=0.3,0.3 runs once and reports it completed, run one
# after another and concurrently; a second sweep into the same --out keeps the first one's runs.
for devs in "" "--devices cpu,cpu"; do
  rc=0
  # shellcheck disable=SC2086
  "$repo/scripts/sweep.sh" "$repo/configs/mlp_disc.yaml" optimizer.lr=0.3,0.3 $devs --out dup -- --epochs 1 \
    >dup.txt 2>duplog.txt || rc=$?
  [ "$rc" -eq 0 ] || fail "duplicate values ($devs): exit $rc: $(cat duplog.txt)"
  grep -q 'is given twice; it runs once' duplog.txt || fail "the duplicate is named"
  [ "$(grep -cE ' completed +0 ' dup.txt)" -eq 1 ] ||
    fail "duplicate values ($devs): expected one completed run: $(cat dup.txt)"
done
[ -f dup/lr=0.3/model.safetensors ] || fail "the first sweep's run is kept"
[ -f dup/lr=0.3-2/model.safetensors ] || fail "the second sweep's run gets a name of its own"
grep -q '^lr=0.3-2 ' dup.txt || fail "the second sweep reports its own run: $(cat dup.txt)"
echo "sweep_test: OK"
