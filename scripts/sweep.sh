#!/usr/bin/env bash
# Sweep any config keys: one `trainer fit` per combination of the values given, then one summary.
#
#   scripts/sweep.sh CONFIG KEY=V1,V2,... [KEY=V1,V2,...]... [--out DIR] [--devices D1,D2,...]
#                    [--per-gpu K] [-- extra fit flags...]
#   scripts/sweep.sh configs/mlp_disc.yaml optimizer.lr=0.3,0.1,0.03 data.batch_size=50,100 -- --epochs 20
#   scripts/sweep.sh configs/fashion_mnist_cnn.yaml optimizer.lr=0.1,0.03,0.01,0.003 --devices gpu:0,gpu:1
#
# --devices D1,D2,...: run concurrently, each run on one of these devices (gpu:N or cpu; `gpu:all`
# is every GPU `trainer devices` lists), --per-gpu K runs at a time on each (default 1). Without
# --devices the runs go one after another on the config's device.
# KEY is any dotted config key that `--set` takes; values are split at commas outside brackets
# (model.input_shape=[1,28,28],[3,28,28] is two values). Each combination runs
#   trainer fit CONFIG --set KEY=V... --log-format json --out DIR/NAME [extra fit flags]
# with NAME built from the keys' last parts and the values (lr=0.1_batch_size=50), keeping its
# JSON lines in DIR/NAME.jsonl and its log in DIR/NAME.log. A combination given twice runs once;
# a NAME already in DIR (an earlier sweep's) gets a suffix (-2, -3, ...): a sweep never deletes
# or writes over what it did not create. Then it writes
#   DIR/summary.csv  one row per run: run, every KEY, device, status, exit, epochs_run, monitor,
#                    best_value, best_epoch, final_loss, seconds; sorted by the monitored value, best
#                    first (highest for accuracy-like monitors, lowest for losses), failed runs last
#   DIR/sweep.csv    one row per epoch of every run: run, every KEY, then the epoch record's fields
# and prints summary.csv as an aligned table. A failed run (any non-zero exit) is reported in the
# table with its exit code and the sweep goes on; the sweep then exits 1. Usage errors exit 2.
#
# Runs from any directory: CONFIG and --out are taken relative to the current directory; the
# trainer is the build/trainer of this checkout, or $TRAINER. DIR defaults to
# runs/sweep-YYYYmmdd-HHMMSS. Needs python3 (for the JSON lines).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
usage() {
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}" >&2
  [ $# -gt 0 ] && echo "sweep: error: $*" >&2
  exit 2
}
[ $# -ge 1 ] || usage "a CONFIG is required"
case $1 in -h | --help) usage ;; esac
config=$1
shift
out=runs/sweep-$(date +%Y%m%d-%H%M%S)
keys=()
value_lists=()
devices_arg=""
per_gpu=1
while [ $# -gt 0 ]; do
  case $1 in
    --) shift; break ;;
    --out) [ $# -ge 2 ] || usage "--out needs a directory"; out=$2; shift 2 ;;
    --out=*) out=${1#--out=}; shift ;;
    --devices) [ $# -ge 2 ] || usage "--devices needs a list, e.g. gpu:0,gpu:1"; devices_arg=$2; shift 2 ;;
    --devices=*) devices_arg=${1#--devices=}; shift ;;
    --per-gpu) [ $# -ge 2 ] || usage "--per-gpu needs a number"; per_gpu=$2; shift 2 ;;
    --per-gpu=*) per_gpu=${1#--per-gpu=}; shift ;;
    -*) usage "unknown option '$1' (extra fit flags go after --)" ;;
    *=*)
      key=${1%%=*}
      [ -n "$key" ] && [ -n "${1#*=}" ] || usage "'$1': expected KEY=V1,V2,..."
      keys+=("$key")
      value_lists+=("${1#*=}")
      shift
      ;;
    *) usage "'$1': expected KEY=V1,V2,... (a config key and its values)" ;;
  esac
done
[ ${#keys[@]} -ge 1 ] || usage "give at least one KEY=V1,V2,... to sweep"
trainer=${TRAINER:-$repo/build/trainer}
[ -x "$trainer" ] || { echo "sweep: error: $trainer not found; build first (scripts/setup.sh) or set TRAINER" >&2; exit 2; }
[ -f "$config" ] || usage "no config file '$config'"
command -v python3 >/dev/null || { echo "sweep: error: python3 is needed to read the runs' JSON lines" >&2; exit 2; }
mkdir -p "$out" || usage "cannot create --out '$out'"
[[ $per_gpu =~ ^[1-9][0-9]*$ ]] || usage "--per-gpu: '$per_gpu' is not a positive whole number"

# Slots: one per concurrent run, each with its device ("" = the config's own).
devices=()
if [ -n "$devices_arg" ]; then
  IFS=, read -r -a devices <<<"$devices_arg"
  if [ "${devices[*]}" = "gpu:all" ]; then
    mapfile -t devices < <("$trainer" devices 2>/dev/null | sed -n 's/^ *\(gpu:[0-9][0-9]*\).*/\1/p')
    [ ${#devices[@]} -ge 1 ] || usage "--devices gpu:all: trainer devices lists no usable GPU"
  fi
  for d in "${devices[@]}"; do
    [[ $d =~ ^(cpu|gpu:[0-9]+)$ ]] || usage "--devices: '$d' is not cpu or gpu:N"
  done
else
  devices=("")
fi
slots=()
for d in "${devices[@]}"; do
  for ((k = 0; k < per_gpu; k++)); do slots+=("$d"); done
done
slot_pid=()

# Values of one KEY=... list: split at commas that are not inside [] or {}.
split_values() {
  local s=$1 depth=0 cur="" ch i
  for ((i = 0; i < ${#s}; i++)); do
    ch=${s:i:1}
    case $ch in
      '[' | '{') depth=$((depth + 1)) ;;
      ']' | '}') depth=$((depth - 1)) ;;
    esac
    if [ "$ch" = "," ] && [ $depth -eq 0 ]; then
      printf '%s\n' "$cur"
      cur=""
    else
      cur+=$ch
    fi
  done
  printf '%s\n' "$cur"
}

# Every combination, one per line: the values joined by a tab, in key order.
combos=("")
for i in "${!keys[@]}"; do
  mapfile -t values < <(split_values "${value_lists[$i]}")
  next=()
  for c in "${combos[@]}"; do
    for v in "${values[@]}"; do
      [ -n "$v" ] || usage "an empty value in ${keys[$i]}=${value_lists[$i]}"
      next+=("${c:+$c$'\t'}$v")
    done
  done
  combos=("${next[@]}")
done
# A combination given twice (lr=0.3,0.3) runs once: two runs of one name would share a run
# directory, and each would report the other's exit code.
unique=()
declare -A seen_combo=()
for c in "${combos[@]}"; do
  if [ -n "${seen_combo[$c]:-}" ]; then
    echo "sweep: $(printf '%s' "$c" | tr '\t' ' ') is given twice; it runs once" >&2
    continue
  fi
  seen_combo[$c]=1
  unique+=("$c")
done
combos=("${unique[@]}")

runs=()
run_devices=()
# Starts one run in the background on slot $1's device.
start_run() {
  local slot=$1 name=$2
  shift 2
  local dev=${slots[$slot]}
  local devflag=()
  [ -z "$dev" ] || devflag=(--device "$dev")
  echo "sweep: $name${dev:+ on $dev}" >&2
  (
    rc=0
    "$trainer" fit "$config" "$@" "${devflag[@]}" --log-format json --out "$out/$name" "${extra[@]}" \
      >"$out/$name.jsonl" 2>"$out/$name.log" || rc=$?
    echo "$rc" >"$out/$name.exit"
  ) &
  slot_pid[$slot]=$!
}
# Sets `slot` to the first slot with no run going; waits for a run to end when all are busy.
free_slot() {
  local s
  while :; do
    for s in "${!slots[@]}"; do
      if [ -z "${slot_pid[$s]:-}" ] || ! kill -0 "${slot_pid[$s]}" 2>/dev/null; then
        slot=$s
        return
      fi
    done
    wait -n 2>/dev/null || sleep 0.2
  done
}
extra=("$@")
for combo in "${combos[@]}"; do
  IFS=$'\t' read -r -a values <<<"$combo"
  sets=()
  name=""
  for i in "${!keys[@]}"; do
    sets+=(--set "${keys[$i]}=${values[$i]}")
    name+="${name:+_}${keys[$i]##*.}=${values[$i]}"
  done
  name=$(printf '%s' "$name" | tr -c 'A-Za-z0-9._=+-' '-')
  # A name that this sweep used already (two values that differ only in bytes the name drops) or
  # that an earlier sweep left in --out gets a suffix: nothing this invocation did not create is
  # deleted or written over.
  base=$name
  for ((k = 2; ; k++)); do
    taken=0
    for r in "${runs[@]}"; do [ "$r" != "$name" ] || taken=1; done
    for f in "$out/$name" "$out/$name.exit" "$out/$name.jsonl" "$out/$name.log"; do
      [ ! -e "$f" ] || taken=1
    done
    [ "$taken" -eq 1 ] || break
    name=$base-$k
  done
  runs+=("$name")
  free_slot
  run_devices+=("${slots[$slot]:-config}")
  start_run "$slot" "$name" "${sets[@]}"
done
wait
fails=0
for name in "${runs[@]}"; do
  rc=$(cat "$out/$name.exit" 2>/dev/null || echo 1)
  if [ "$rc" -ne 0 ]; then
    fails=$((fails + 1))
    echo "sweep: $name failed (exit $rc): $(grep -m1 '^error:' "$out/$name.log" || tail -1 "$out/$name.log")" >&2
  fi
done

# The CSV files and the table, from every run's JSON lines.
python3 - "$out" "${#keys[@]}" "${keys[@]}" "${combos[@]}" -- "${runs[@]}" -- "${run_devices[@]}" <<'PY'
import csv, json, os, sys
out, nkeys = sys.argv[1], int(sys.argv[2])
keys = sys.argv[3:3 + nkeys]
rest = sys.argv[3 + nkeys:]
sep = rest.index("--")
combos, rest = rest[:sep], rest[sep + 1:]
sep = rest.index("--")
runs, run_devices = rest[:sep], rest[sep + 1:]
summary_rows, epoch_rows, epoch_fields = [], [], []
for run, combo, device in zip(runs, combos, run_devices):
    values = combo.split("\t")
    records = []
    try:
        with open(os.path.join(out, run + ".jsonl")) as f:
            for line in f:
                try:
                    records.append(json.loads(line))
                except ValueError:
                    pass
    except OSError:
        pass
    rc = open(os.path.join(out, run + ".exit")).read().strip()
    epochs = [r for r in records if r.get("event") == "epoch"]
    summary = next((r for r in records if r.get("event") == "summary"), {})
    for e in epochs:
        fields = {k: v for k, v in e.items() if k not in ("event", "epochs")}
        for k in fields:
            if k not in epoch_fields:
                epoch_fields.append(k)
        epoch_rows.append([run] + values + [fields])
    status = summary.get("status", "failed")
    if rc != "0" and status == "completed":
        status = "failed"
    def num(v, f):
        return "" if v is None or v == "" else f % v
    summary_rows.append([run] + values + [
        device, status, rc, summary.get("epochs_run", len(epochs)), summary.get("monitor", ""),
        num(summary.get("best_value"), "%.6g"), summary.get("best_epoch", ""),
        num(epochs[-1].get("loss") if epochs else None, "%.6g"), num(summary.get("seconds"), "%.3f")])
# Best first by the monitored value (losses lowest first, other metrics highest first); failed runs
# and runs without a value last, in their order.
def rank(row):
    status, monitor, best = row[nkeys + 2], row[nkeys + 5], row[nkeys + 6]
    if status != "completed" or best == "":
        return (1, 0.0)
    v = float(best)
    return (0, v if monitor.endswith("loss") else -v)
summary_rows.sort(key=rank)
header = ["run"] + keys + ["device", "status", "exit", "epochs_run", "monitor", "best_value", "best_epoch", "final_loss",
                           "seconds"]
with open(os.path.join(out, "summary.csv"), "w", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(header)
    w.writerows(summary_rows)
with open(os.path.join(out, "sweep.csv"), "w", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["run"] + keys + epoch_fields)
    for row in epoch_rows:
        w.writerow(row[:-1] + [row[-1].get(k, "") for k in epoch_fields])
table = [header] + [[str(c) for c in r] for r in summary_rows]
widths = [max(len(r[i]) for r in table) for i in range(len(header))]
for r in table:
    print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
PY
echo "sweep: ${#runs[@]} runs, $fails failed; $out/summary.csv (one row per run), $out/sweep.csv (one row per epoch)" >&2
[ "$fails" -eq 0 ] || exit 1
