#!/usr/bin/env bash
# Learning rate x batch size sweep of one config, collected into one CSV from the JSON lines of
# `trainer fit --log-format json`.
#
#   scripts/sweep.sh CONFIG [OUT_DIR] [-- extra fit flags...]
#   LRS="0.1 0.03 0.01" BATCH_SIZES="32 128" scripts/sweep.sh configs/mlp_disc.yaml runs/sweep -- --epochs 20
#
# Each combination runs
#   trainer fit CONFIG --set optimizer.lr=LR --set data.batch_size=BS --log-format json --out OUT_DIR/lrLR-bsBS
# keeping its JSON lines in OUT_DIR/lrLR-bsBS.jsonl and its log in OUT_DIR/lrLR-bsBS.log. Then
#   OUT_DIR/sweep.csv    one row per epoch of every run:
#                        base_lr,batch_size,epoch,step,loss,<metrics>,val_loss,<val metrics>,lr,seconds
#   OUT_DIR/summary.csv  one row per run: base_lr,batch_size,status,epochs_run,monitor,best_epoch,
#                        best_value,seconds
# and prints summary.csv. Environment: LRS, BATCH_SIZES (space-separated), TRAINER (the binary,
# default build/trainer). Needs jq (or python3).
set -euo pipefail
usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[ $# -ge 1 ] || usage
config=$1
shift
out=runs/sweep-$(date +%Y%m%d-%H%M%S)
if [ $# -ge 1 ] && [ "$1" != "--" ]; then out=$1; shift; fi
[ $# -ge 1 ] && [ "$1" = "--" ] && shift
trainer=${TRAINER:-build/trainer}
lrs=${LRS:-"0.1 0.01 0.001"}
batch_sizes=${BATCH_SIZES:-"32 128"}
[ -x "$trainer" ] || { echo "sweep: $trainer not found; build first or set TRAINER" >&2; exit 1; }
[ -f "$config" ] || { echo "sweep: no config $config" >&2; exit 1; }
mkdir -p "$out"

# JSON lines -> CSV rows. $1: the JSON lines file, $2: base lr, $3: batch size, $4: epoch|summary|header.
to_csv() {
  if command -v jq >/dev/null; then
    case $4 in
      header) jq -r 'select(.event=="epoch") | ["base_lr","batch_size"] + (keys_unsorted - ["event","epochs"]) | @csv' "$1" | head -1 ;;
      epoch) jq -r --arg lr "$2" --arg bs "$3" 'select(.event=="epoch") | del(.event, .epochs) | [$lr, $bs] + [.[]] | @csv' "$1" ;;
      summary) jq -r --arg lr "$2" --arg bs "$3" 'select(.event=="summary") | [$lr, $bs, .status, .epochs_run, .monitor, .best_epoch, .best_value, .seconds] | @csv' "$1" ;;
    esac
  else
    python3 - "$@" <<'PY'
import csv, json, sys
path, lr, bs, what = sys.argv[1:5]
w = csv.writer(sys.stdout, lineterminator="\n")
for line in open(path):
    j = json.loads(line)
    if what == "header" and j["event"] == "epoch":
        w.writerow(["base_lr", "batch_size"] + [k for k in j if k not in ("event", "epochs")]); break
    if what == "epoch" and j["event"] == "epoch":
        w.writerow([lr, bs] + [v for k, v in j.items() if k not in ("event", "epochs")])
    if what == "summary" and j["event"] == "summary":
        w.writerow([lr, bs] + [j.get(k) for k in ("status", "epochs_run", "monitor", "best_epoch", "best_value", "seconds")])
PY
  fi
}

csv=$out/sweep.csv
summary=$out/summary.csv
: >"$csv"
echo '"base_lr","batch_size","status","epochs_run","monitor","best_epoch","best_value","seconds"' >"$summary"
for lr in $lrs; do
  for bs in $batch_sizes; do
    name=lr$lr-bs$bs
    echo "sweep: $name" >&2
    rm -rf "${out:?}/$name"
    rc=0
    "$trainer" fit "$config" --set "optimizer.lr=$lr" --set "data.batch_size=$bs" --log-format json \
      --out "$out/$name" "$@" >"$out/$name.jsonl" 2>"$out/$name.log" || rc=$?
    if [ "$rc" -ne 0 ]; then
      echo "sweep: $name failed (exit $rc); see $out/$name.log" >&2
      continue
    fi
    [ -s "$csv" ] || to_csv "$out/$name.jsonl" "$lr" "$bs" header >"$csv"
    to_csv "$out/$name.jsonl" "$lr" "$bs" epoch >>"$csv"
    to_csv "$out/$name.jsonl" "$lr" "$bs" summary >>"$summary"
  done
done
echo "sweep: $(($(wc -l <"$csv") - 1)) epoch rows in $csv" >&2
column -s, -t <"$summary" 2>/dev/null || cat "$summary"
