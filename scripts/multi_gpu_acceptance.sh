#!/usr/bin/env bash
# The several-GPUs issue's acceptance run, on a lent machine with 2 GPUs, from a bundle made by
#   ../shared/device/bundle.sh --data build/trainer build/tests/trainer_gpu_tests
#   cp ../shared/bench/peer_torch.py .bundle/
# and started there as: bash scripts/multi_gpu_acceptance.sh [PART...]
# PARTs (default: all, in this order; each fits one 10-minute device call on its own):
#   tests     trainer_gpu_tests "[nccl]" and "[pipeline]", ctest gpu_data_parallel's script
#   curves    fashion_mnist_cnn, 5 epochs: gpu:0, gpu:0,1 and mpirun -np 2, loss and accuracy by epoch
#   scaling   scripts/dp_table.py: 1 vs 2 GPUs and mpirun -np 2 beside PyTorch DDP, global batch 512 and
#             1024, vgg11_bn_cifar bf16 then cifar_cnn fp32 (scaling-vgg, scaling-cifar: one of them, each
#             under 5 minutes)
#   pipeline  resnet18_cifar split over gpu:0,1 (model.stages) with 1, 4, 8 micro-batches vs gpu:0
#   sweep     scripts/sweep.sh: 4 learning rates over gpu:0,gpu:1
# Every command runs under `timeout -k 3`: a hang costs its own limit, not the device call.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(tests curves scaling pipeline sweep)
tar -xJf .bundle/trainer.tar.xz -C /tmp
printf '#!/bin/sh\nexec /tmp/bundle/run trainer "$@"\n' >/tmp/trainer && chmod +x /tmp/trainer
printf '#!/bin/sh\nexec /tmp/bundle/run trainer_gpu_tests "$@"\n' >/tmp/trainer_gpu_tests && chmod +x /tmp/trainer_gpu_tests
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
data=.bundle/data/fashion-mnist
fm=(--set "data.train.images=$data/train-images-idx3-ubyte.gz" --set "data.train.labels=$data/train-labels-idx1-ubyte.gz"
    --set "data.validation.images=$data/t10k-images-idx3-ubyte.gz" --set "data.validation.labels=$data/t10k-labels-idx1-ubyte.gz")
out=/tmp/multi_gpu; mkdir -p "$out"
# T SECONDS CMD...: CMD under a hard limit; prints its exit status and the elapsed time.
T() {
  local limit=$1 start=$SECONDS rc=0 note=""
  shift
  timeout -k 3 "$limit" "$@" || rc=$?
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then note=": TIMED OUT"; fi
  echo "[exit $rc after $((SECONDS - start)) s$note]"
}

echo "== $(nvidia-smi -L | tr '\n' ';')"
/tmp/trainer --version | grep -E "^(trainer|NCCL|MPI|CUDA)"

for part in "${parts[@]}"; do
  case $part in
    tests)
      echo "== trainer_gpu_tests [nccl]"; T 120 /tmp/trainer_gpu_tests "[nccl]" >"$out/nccl.txt" 2>&1; tail -4 "$out/nccl.txt"
      grep -B2 -A12 FAILED "$out/nccl.txt" | head -40
      echo "== trainer_gpu_tests [pipeline]"; T 120 /tmp/trainer_gpu_tests "[pipeline]" >"$out/pipe.txt" 2>&1; tail -4 "$out/pipe.txt"
      grep -B2 -A12 FAILED "$out/pipe.txt" | head -40
      grep -h SKIPPED "$out/nccl.txt" "$out/pipe.txt" | sort | uniq -c
      echo "== ctest gpu_data_parallel (tests/scripts/mpi_gpu_test.sh)"
      T 150 bash tests/scripts/mpi_gpu_test.sh /tmp/trainer 2>&1 | tail -8
      ;;
    curves)
      for run in gpu:0 gpu:0,1 mpirun; do
        echo "== fashion_mnist_cnn, 5 epochs, $run"
        if [ "$run" = mpirun ]; then
          T 150 mpirun -np 2 -x NCCL_NVLS_ENABLE /tmp/trainer fit configs/fashion_mnist_cnn.yaml "${fm[@]}" --device gpu \
            --epochs 5 --no-out --log-format json >"$out/curve_$run.jsonl" 2>"$out/curve_$run.err"
        else
          T 150 /tmp/trainer fit configs/fashion_mnist_cnn.yaml "${fm[@]}" --device "$run" --epochs 5 --no-out \
            --log-format json >"$out/curve_$run.jsonl" 2>"$out/curve_$run.err"
        fi
        grep -h "data parallel" "$out/curve_$run.err" | head -1 | cut -c1-200
      done
      python3 - "$out" <<'PY'
import json, sys
runs = ["gpu:0", "gpu:0,1", "mpirun"]
rec = {}
for r in runs:
    try:
        rec[r] = [json.loads(l) for l in open("%s/curve_%s.jsonl" % (sys.argv[1], r)) if '"event":"epoch"' in l]
    except OSError:
        rec[r] = []
print("| epoch | " + " | ".join("%s loss / val_accuracy" % r for r in runs) + " |")
print("|---|" + "---|" * len(runs))
for e in range(max(len(v) for v in rec.values()) if rec else 0):
    cells = []
    for r in runs:
        v = rec[r][e] if e < len(rec[r]) else None
        cells.append("%.4f / %.4f" % (v["loss"], v.get("val_accuracy", float("nan"))) if v else "-")
    print("| %d | %s |" % (e + 1, " | ".join(cells)))
PY
      ;;
    scaling | scaling-vgg | scaling-cifar)
      echo "== data-parallel scaling beside PyTorch DDP (trainer also under mpirun -np 2)"
      if [ "$part" != scaling-cifar ]; then
        T 290 python3 scripts/dp_table.py --trainer /tmp/trainer --peer .bundle/peer_torch.py --gpus 2 \
          --workloads vgg11_bn_cifar --maths bf16 --batch 512,1024 --mpirun --epochs 3 --samples 51200 --torch-steps 100 2>&1 | tail -5
      fi
      if [ "$part" != scaling-vgg ]; then
        T 290 python3 scripts/dp_table.py --trainer /tmp/trainer --peer .bundle/peer_torch.py --gpus 2 \
          --workloads cifar_cnn --maths fp32 --batch 512,1024 --mpirun --epochs 3 --samples 102400 --torch-steps 200 2>&1 | tail -5
      fi
      ;;
    pipeline)
      c=(configs/resnet18_cifar.yaml --set "data.train={format: random, samples: 12800, seed: 1}" --set data.validation=null
         --epochs 2 --batch-size 256 --no-out)
      for v in "gpu:0|" "gpu:0,1|model.stages=[layer3.0.conv1]|1" "gpu:0,1|model.stages=[layer3.0.conv1]|4" \
               "gpu:0,1|model.stages=[layer3.0.conv1]|8" "gpu:0,1|model.stages=[layer4.0.conv1]|4"; do
        IFS='|' read -r dev stages mb <<<"$v"
        extra=()
        [ -n "$stages" ] && extra=(--set "$stages" --set "pipeline.micro_batches=$mb")
        echo "== resnet18_cifar b256 on $dev ${stages:-(one stage)} ${mb:+micro_batches $mb}"
        T 90 /tmp/trainer fit "${c[@]}" --device "$dev" "${extra[@]}" 2>&1 | grep -E "stage [0-9]|memory reserved|epoch 2/|done|error" | cut -c1-230
      done
      ;;
    sweep)
      echo "== sweep: 4 learning rates over gpu:0,gpu:1"
      export TRAINER=/tmp/trainer
      T 240 bash scripts/sweep.sh configs/fashion_mnist_cnn.yaml optimizer.lr=0.003,0.001,0.0003,0.0001 \
        --devices gpu:0,gpu:1 --out "$out/sweep" -- --epochs 2 "${fm[@]}" 2>&1 | tail -9
      ;;
    *) echo "unknown part '$part': tests curves scaling (scaling-vgg, scaling-cifar) pipeline sweep" >&2; exit 2 ;;
  esac
done
