# Shared by the crash tests (scripts/kill_loop.sh, full_disk_test.sh, concurrent_writers_test.sh).
# Sourced, not run. Plain bash and coreutils: CI needs nothing beyond what scripts/setup.sh installs.
#
#   TRAINER=path/to/trainer   the binary under test (default: build/trainer, which scripts/test.sh builds)
#   KEEP_WORK=1               keep the scratch directory (printed) instead of removing it

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TRAINER="${TRAINER:-$root/build/trainer}"
case "$TRAINER" in /*) ;; *) TRAINER="$PWD/$TRAINER" ;; esac
# One thread: the models are tiny, the CI machine has 2 cores, and the same thread count in every
# run is what makes CPU training bit-identical (docs/reliability.md, Determinism).
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
test_name="$(basename "$0" .sh)"

say() { echo "$test_name: $*"; }
fail() {
  echo "$test_name: FAILED: $*" >&2
  exit 1
}
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

[ -x "$TRAINER" ] || fail "no trainer binary at $TRAINER (build it with scripts/setup.sh, or set TRAINER)"

work="$(mktemp -d "${TMPDIR:-/tmp}/trainer-$test_name.XXXXXX")"
cleanup_work() {
  if [ "${KEEP_WORK:-0}" = 1 ]; then say "scratch directory kept: $work"; else rm -rf "$work"; fi
}
trap cleanup_work EXIT

# write_mlp_config FILE HIDDEN_UNITS SAMPLES [extra YAML lines]: a tiny classifier on generated
# points (the disc problem, no data files): dense-relu-dropout-dense-relu-dense, Adam, a 20%
# validation split, a checkpoint every epoch, all of them kept. Dropout and shuffling make the
# bit-identical checks meaningful (both follow (seed, epoch, step), docs/reliability.md, Determinism).
write_mlp_config() {
  local file="$1" units="$2" samples="$3"
  shift 3
  cat >"$file" <<EOF
model:
  input_shape: [2]
  layers:
    - {type: dense, units: $units}
    - {type: relu}
    - {type: dropout, rate: 0.2}
    - {type: dense, units: $units}
    - {type: relu}
    - {type: dense, units: 2}
loss: {type: sparse_categorical_crossentropy, from_logits: true}
optimizer: {type: adam, lr: 0.001}
metrics: [accuracy]
data:
  train: {format: disc, samples: $samples, seed: 3}
  validation_split: 0.2
  num_classes: 2
  batch_size: 50
  shuffle: true
checkpoint: {every: 1, keep_last: 0, best: none}
train: {epochs: 10, seed: 7}
device: cpu
EOF
  local line
  for line in "$@"; do echo "$line" >>"$file"; done
}

# Complete checkpoints of a run directory (their base names, "epoch-0004"), oldest first.
list_checkpoint_bases() {
  local f
  for f in "$1"/checkpoints/epoch-*.state.safetensors; do
    [ -e "$f" ] || continue
    f="$(basename "$f")"
    echo "${f%.state.safetensors}"
  done | sort
}

# check_checkpoint_loads CONFIG RUN_DIR BASE: the checkpoint BASE (both files) restores into the
# config's model: a scratch run directory holding only that checkpoint is resumed up to the
# checkpoint's own epoch, which loads the weights, the optimizer state and the training state and
# then has nothing left to train. Mid-epoch checkpoints (epoch-0005-batch-000012) have an epoch to
# finish; they are resumed to that epoch's end.
check_checkpoint_loads() {
  local config="$1" run="$2" base="$3" scratch="$work/load-check"
  local epoch="${base#epoch-}"
  epoch="${epoch%%-*}"
  epoch=$((10#$epoch))
  rm -rf "$scratch" && mkdir -p "$scratch/checkpoints"
  cp "$run/checkpoints/$base.safetensors" "$run/checkpoints/$base.state.safetensors" "$scratch/checkpoints/"
  if ! "$TRAINER" fit "$config" --resume "$scratch" --epochs "$epoch" --quiet >"$scratch.out" 2>&1; then
    cat "$scratch.out" >&2
    fail "checkpoint $run/checkpoints/$base does not load (trainer fit --resume, output above)"
  fi
}

# check_weights_load CONFIG FILE: a weights file (checkpoint or final) evaluates with trainer eval.
check_weights_load() {
  local config="$1" file="$2"
  if ! "$TRAINER" eval "$config" --weights "$file" --quiet >"$work/eval.out" 2>&1; then
    cat "$work/eval.out" >&2
    fail "weights file $file does not load (trainer eval, output above)"
  fi
}

# check_no_torn_files RUN_DIR [allow-tmp]: every events.jsonl line is one whole JSON object, every
# metrics.csv row has the header's number of columns, and (unless allow-tmp: SIGKILLed writers
# leave theirs) no temporary file of an atomic write is left.
check_no_torn_files() {
  local run="$1" tmp
  if [ "${2:-}" != allow-tmp ]; then
    tmp="$(find "$run" -name '*.tmp-*' | head -5)"
    [ -z "$tmp" ] || fail "temporary files left in $run: $tmp"
  fi
  if [ -s "$run/events.jsonl" ]; then
    local bad
    bad="$(grep -nv '^{.*}$' "$run/events.jsonl" | head -3 || true)"
    [ -z "$bad" ] || fail "torn lines in $run/events.jsonl: $bad"
  fi
  if [ -s "$run/metrics.csv" ]; then
    local bad
    bad="$(awk -F, 'NR == 1 { n = NF } NF != n { print NR ": " $0 }' "$run/metrics.csv" | head -3 || true)"
    [ -z "$bad" ] || fail "rows of $run/metrics.csv with the wrong number of columns: $bad"
  fi
}
