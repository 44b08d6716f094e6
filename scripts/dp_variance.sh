#!/usr/bin/env bash
# Data parallelism on 2 GPUs, the same run several ways, ROUNDS times each, to tell a real
# difference from run-to-run noise: one GPU at the per-GPU batch and at the global batch, then two
# replicas as threads of one process (--device gpu:0,1), the same with OMP_WAIT_POLICY=passive and
# with data.loader_threads=4, and two mpirun ranks (--bind-to none). Steps/s from the median epoch
# after the first, `fit` on synthetic rows (the data pipeline included).
#   bash scripts/dp_variance.sh [TRAINER] [CONFIG] [GLOBAL_BATCH] [SAMPLES] [ROUNDS]
# defaults: build/trainer configs/cifar10_cnn.yaml 512 204800 2. Needs 2 GPUs (and mpirun for the
# last column). Exit 0 when every run gave a number, 1 otherwise.
set -uo pipefail
trainer=${1:-build/trainer} config=${2:-configs/cifar10_cnn.yaml} batch=${3:-512} samples=${4:-204800}
rounds=${5:-2}
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
fit=(fit "$config" --epochs 4 --no-out --log-format json --set
     "data.train={format: random, samples: $samples, seed: 1}" --set data.validation=null
     --set data.validation_split=0)
failed=0
steps() {  # BATCH: steps/s of the median epoch after the first, from fit's JSON lines on stdin
  python3 -c "
import json, statistics, sys
s = [json.loads(l)['seconds'] for l in sys.stdin if '\"epoch\"' in l]
print('%.1f' % (($samples / $1) / statistics.median(s[1:])) if len(s) > 1 else 'failed')"
}
run() {  # BATCH COMMAND...: one figure (in a command substitution: the caller checks it)
  local b=$1
  shift
  timeout -k 3 120 "$@" 2>/dev/null | steps "$b"
}
check() { for v in "$@"; do [[ $v =~ ^[0-9.]+$ ]] || failed=1; done; }
half=$((batch / 2))
one_half=$(run "$half" "$trainer" "${fit[@]}" --batch-size "$half" --device gpu:0)
one=$(run "$batch" "$trainer" "${fit[@]}" --batch-size "$batch" --device gpu:0)
check "$one_half" "$one"
echo "1 GPU at $half: $one_half | 1 GPU at $batch: $one"
for ((r = 1; r <= rounds; ++r)); do
  threads=$(run "$batch" "$trainer" "${fit[@]}" --batch-size "$batch" --device gpu:0,1)
  passive=$(OMP_WAIT_POLICY=passive run "$batch" "$trainer" "${fit[@]}" --batch-size "$batch" --device gpu:0,1)
  loader4=$(run "$batch" "$trainer" "${fit[@]}" --batch-size "$batch" --device gpu:0,1 --set data.loader_threads=4)
  mpi=$(run "$batch" mpirun -np 2 --bind-to none -x NCCL_NVLS_ENABLE "$trainer" "${fit[@]}" --batch-size "$batch" --device gpu)
  check "$threads" "$passive" "$loader4" "$mpi"
  echo "round $r: gpu:0,1 $threads | passive $passive | loader_threads 4 $loader4 | mpirun -np 2 $mpi"
done
exit $failed
