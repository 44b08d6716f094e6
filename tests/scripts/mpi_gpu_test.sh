#!/usr/bin/env bash
# ctest "gpu_data_parallel": data parallelism over GPUs with NCCL, on a GPU machine.
#   tests/scripts/mpi_gpu_test.sh TRAINER_BINARY
# Skipped (exit 77, "Skipped" in ctest) without a GPU or without NCCL in the build; with one GPU
# it runs the checks one GPU allows, then exits 77 for the rest:
#  1. (1 GPU) a bad GPU list is a usage error naming it: a GPU listed twice, a GPU not present;
#     mpirun -np 2 --device gpu with fewer GPUs than ranks on the host is one too;
#  2. (2 GPUs) --device gpu:0,1 (one process, a replica per GPU) ends with the weights of gpu:0
#     alone with the same global batch, within 1e-5 absolute; so does it with a gradient bucket
#     per layer (device.bucket_mb: 0.001), each all-reduced during the backward pass;
#  3. (2 GPUs, MPI) mpirun -np 2 --device gpu (a rank per GPU) likewise, also in buckets;
#  4. (2 GPUs) device.sync_batchnorm: a batchnorm MLP over gpu:0,1 (in buckets) and mpirun -np 2
#     ends with gpu:0's weights and running statistics within 1e-5 (the start line says so).
set -euo pipefail
trainer=$(realpath "$1")
if ! "$trainer" --version | grep -q '^NCCL: [0-9]'; then
  echo "SKIPPED: this trainer was built without NCCL"
  exit 77
fi
gpus=$("$trainer" devices | grep -c '^gpu:[0-9]' || true)
if [ "$gpus" -lt 1 ]; then
  echo "SKIPPED: no usable GPU"
  exit 77
fi
py=${PYTHON:-python3}  # with numpy (Debian: python3-numpy; the GPU machines: PyTorch's)
work=$(mktemp -d); echo "mpi_gpu_test: work in $work ($gpus GPUs)"
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
cd "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export NCCL_NVLS_ENABLE=0
say() { echo "mpi_gpu_test: $*"; }
fail() {
  echo "mpi_gpu_test: FAILED: $*" >&2
  exit 1
}
max_diff() {
  "$py" - "$1" "$2" <<'PY'
import json, struct, sys
import numpy as np
def load(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    head = json.loads(b[8:8 + n])
    return {k: np.frombuffer(b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], dtype=np.float32)
            for k, v in head.items() if k != "__metadata__"}
a, b = load(sys.argv[1]), load(sys.argv[2])
assert a.keys() == b.keys(), (sorted(a), sorted(b))
print("%.3g" % max(float(np.abs(a[k] - b[k]).max()) for k in a))
PY
}
within() { "$py" -c "import sys; sys.exit(0 if float('$1') <= float('$2') else 1)"; }
# expect_usage "WHAT" "MESSAGE PART" CMD...: CMD exits 2 and says MESSAGE PART.
expect_usage() {
  local what=$1 part=$2 status=0
  shift 2
  timeout 300 "$@" >/dev/null 2>err.txt || status=$?
  [ "$status" -eq 2 ] || { cat err.txt >&2; fail "$what: exit $status, expected 2"; }
  grep -q -- "$part" err.txt || { cat err.txt >&2; fail "$what: the message does not say '$part'"; }
  say "$what: exit 2: $(head -c 160 err.txt)"
}

cat >mlp.yaml <<'YAML'
model:
  input_shape: [2]
  layers: [{type: dense, units: 32}, {type: relu}, {type: dense, units: 32}, {type: tanh}, {type: dense, units: 2}]
loss: {type: sparse_categorical_crossentropy, from_logits: true}
optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
data: {train: {format: disc, samples: 1990, seed: 3}, num_classes: 2, batch_size: 100, validation_split: 0.2}
train: {epochs: 4, seed: 7}
YAML

# 1. Bad GPU lists.
expect_usage "--device gpu:0,0" "listed twice" "$trainer" fit mlp.yaml --no-out --device gpu:0,0
expect_usage "--device gpu:0,$gpus" "gpu:$gpus is not present" "$trainer" fit mlp.yaml --no-out --device "gpu:0,$gpus"
if [ "$gpus" -lt 2 ]; then
  if command -v mpirun >/dev/null && "$trainer" --version | grep -q '^MPI: [^n]'; then
    expect_usage "mpirun -np 2 --device gpu on 1 GPU" "ranks per host" mpirun -np 2 "$trainer" fit mlp.yaml --no-out --device gpu
  fi
  echo "SKIPPED: the 1-GPU checks passed; the 2-GPU ones need 2 GPUs, this machine has $gpus"
  exit 77
fi

# 2. One process, a replica per GPU.
"$trainer" fit mlp.yaml --out one --device gpu:0 --deterministic -q
timeout 600 "$trainer" fit mlp.yaml --out two --device gpu:0,1 --deterministic -q 2>two.err || { cat two.err >&2; fail "--device gpu:0,1 failed"; }
grep -Eq '"ranks": ?2' two/summary.json || fail "two/summary.json does not record 2 replicas"
d=$(max_diff one/model.safetensors two/model.safetensors)
within "$d" 1e-5 || fail "--device gpu:0,1: weights differ from gpu:0 alone by $d (> 1e-5)"
say "--device gpu:0,1: max |weight difference| to gpu:0 alone $d"
# 0.001 MiB (1,048 bytes): the three dense layers' gradients (512, 4,352 and 512 bytes) make a
# bucket each.
buckets=(--set device.bucket_mb=0.001)
timeout 600 "$trainer" fit mlp.yaml --out twob --device gpu:0,1 --deterministic "${buckets[@]}" >/dev/null 2>twob.err ||
  { cat twob.err >&2; fail "--device gpu:0,1 in buckets failed"; }
grep -q "in 3 buckets of at most .*, overlapped with the backward pass" twob.err ||
  { cat twob.err >&2; fail "--device gpu:0,1 in buckets: the start line does not name 3 buckets"; }
d=$(max_diff one/model.safetensors twob/model.safetensors)
within "$d" 1e-5 || fail "--device gpu:0,1 in buckets: weights differ from gpu:0 alone by $d (> 1e-5)"
say "--device gpu:0,1, a bucket per layer: max |weight difference| to gpu:0 alone $d"

# 3. A rank per GPU under mpirun.
if command -v mpirun >/dev/null && "$trainer" --version | grep -q '^MPI: [^n]'; then
  timeout 600 mpirun -np 2 "$trainer" fit mlp.yaml --out np2 --device gpu --deterministic -q 2>np2.err || { cat np2.err >&2; fail "mpirun -np 2 --device gpu failed"; }
  grep -Eq '"ranks": ?2' np2/summary.json || fail "np2/summary.json does not record 2 ranks"
  d=$(max_diff one/model.safetensors np2/model.safetensors)
  within "$d" 1e-5 || fail "mpirun -np 2 --device gpu: weights differ from gpu:0 alone by $d (> 1e-5)"
  say "mpirun -np 2 --device gpu: max |weight difference| to gpu:0 alone $d"
  timeout 600 mpirun -np 2 "$trainer" fit mlp.yaml --out np2b --device gpu --deterministic -q "${buckets[@]}" \
    2>np2b.err || { cat np2b.err >&2; fail "mpirun -np 2 --device gpu in buckets failed"; }
  d=$(max_diff one/model.safetensors np2b/model.safetensors)
  within "$d" 1e-5 || fail "mpirun -np 2 --device gpu in buckets: weights differ from gpu:0 alone by $d (> 1e-5)"
  say "mpirun -np 2 --device gpu, a bucket per layer: max |weight difference| to gpu:0 alone $d"
else
  say "no MPI in this build or no mpirun: the mpirun part was not run"
fi

# 4. Synchronized batchnorm: the replicas normalize by the whole batch's statistics, so they train
# what gpu:0 trains, running statistics (in model.safetensors) included.
sed -e 's/{type: relu}/{type: batchnorm}, {type: relu}/' -e 's/{type: tanh}/{type: batchnorm, momentum: 0.3}, {type: tanh}/' \
  -e 's/epochs: 4/epochs: 2/' mlp.yaml >bn.yaml
echo 'device: {type: gpu, sync_batchnorm: true}' >>bn.yaml
"$trainer" fit bn.yaml --out bn_one --device gpu:0 --deterministic -q
timeout 600 "$trainer" fit bn.yaml --out bn_two --device gpu:0,1 --deterministic "${buckets[@]}" >/dev/null 2>bn_two.err ||
  { cat bn_two.err >&2; fail "--device gpu:0,1 with sync_batchnorm failed"; }
grep -q "sync_batchnorm: batchnorm statistics are synchronized over 2 replicas" bn_two.err ||
  { cat bn_two.err >&2; fail "--device gpu:0,1 with sync_batchnorm: no start-up line about it"; }
d=$(max_diff bn_one/model.safetensors bn_two/model.safetensors)
within "$d" 1e-5 || fail "--device gpu:0,1 with sync_batchnorm: weights differ from gpu:0 alone by $d (> 1e-5)"
say "--device gpu:0,1 with sync_batchnorm, a bucket per layer: max |weight or running-statistic difference| to gpu:0 $d"
if command -v mpirun >/dev/null && "$trainer" --version | grep -q '^MPI: [^n]'; then
  timeout 600 mpirun -np 2 "$trainer" fit bn.yaml --out bn_np2 --device gpu --deterministic -q 2>bn_np2.err ||
    { cat bn_np2.err >&2; fail "mpirun -np 2 --device gpu with sync_batchnorm failed"; }
  d=$(max_diff bn_one/model.safetensors bn_np2/model.safetensors)
  within "$d" 1e-5 || fail "mpirun -np 2 --device gpu with sync_batchnorm: weights differ from gpu:0 alone by $d (> 1e-5)"
  say "mpirun -np 2 --device gpu with sync_batchnorm: max |weight or running-statistic difference| to gpu:0 $d"
fi
say "PASSED"
