#!/usr/bin/env bash
# scripts/timeline_steps.py on hand-made timelines: one device, steps cut at the optimizer's
# kernel, a GEMM and an NCCL kernel overlapping by a known amount; the comparison against a
# timeline where the same GEMM is shorter; exit codes for a file that is not a timeline.
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
tool=$here/scripts/timeline_steps.py
dir=$(mktemp -d) && trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# Three steps of 100 us (optimizer kernels end at 100, 200, 300 us). In each: a GEMM at 10-60 us,
# an NCCL kernel at 40-80 us (20 us overlapping the GEMM, 20 alone), the optimizer's 90-100.
{
  echo "device,stream,start_ns,end_ns,name"
  echo '0,7,0,100000,"optimizer_steps_cu_AdamW"'
  for s in 0 1 2; do
    b=$((s * 100000 + 100000))
    echo "0,7,$((b + 10000)),$((b + 60000)),\"nvjet_gemm\""
    echo "0,9,$((b + 40000)),$((b + 80000)),\"ncclDevKernel_AllReduce\""
    echo "0,7,$((b + 90000)),$((b + 100000)),\"optimizer_steps_cu_AdamW\""
  done
} > "$dir/two.csv"
python3 - "$dir/two.csv" "$dir/one.csv" <<'PY'
import sys
rows = open(sys.argv[1]).read().splitlines()
out = [rows[0]]
for r in rows[1:]:
    d, s, a, b, n = r.split(",", 4)
    if "nccl" in n:
        continue
    if "gemm" in n:
        b = str(int(a) + 40000)  # 40 us where the other has 50
    out.append(",".join([d, s, a, b, n]))
open(sys.argv[2], "w").write("\n".join(out) + "\n")
PY
out=$(python3 "$tool" "$dir/two.csv" --against "$dir/one.csv" --steps 2) || fail "exit $? on a good timeline: $out"
echo "$out"
echo "$out" | grep -q "3 steps between 'optimizer_steps' kernels" || fail "steps not cut at the optimizer"
[ "$(echo "$out" | grep -c '^  step 100.0 us: compute kernels 60.0 us, NCCL kernels 40.0 us; both running 20.0, NCCL alone 20.0, compute alone 40.0, neither 20.0$')" = 2 ] ||
  fail "the step's split"
echo "$out" | grep -q "total +10.0 us a step over 2 names in both" || fail "the comparison's total"
echo "$out" | grep -qE '^ +\+10\.0 +40\.00 -> +50\.00 +x1\.0 +nvjet_gemm$' || fail "the GEMM's line"
printf 'a,b\n1,2\n' > "$dir/bad.csv"
python3 "$tool" "$dir/bad.csv" > "$dir/err" 2>&1; rc=$?
[ "$rc" = 2 ] && grep -q "not a TRACE_RAW timeline" "$dir/err" || fail "a foreign CSV: exit $rc, $(cat "$dir/err")"
python3 "$tool" "$dir/none.csv" > "$dir/err" 2>&1; rc=$?
[ "$rc" = 2 ] || fail "a missing file: exit $rc"
python3 "$tool" "$dir/one.csv" --marker nothing_matches > "$dir/err" 2>&1; rc=$?
[ "$rc" = 1 ] || fail "no steps: exit $rc"
echo "timeline_steps: OK"
