#!/usr/bin/env bash
# The GPU issue's acceptance run, on the lent GPU machine, from a bundle made by
#   ../shared/device/bundle.sh --data build-gpu/trainer build-gpu/tests/trainer_gpu_tests
# and started there as: bash scripts/gpu_acceptance.sh [OUTDIR]
# Prints: devices, GPU tests, Fashion-MNIST on gpu:0 vs cpu, the --mem-limit failure, the
# --mem-growth footprint (nvidia-smi), and side-by-side timings with PyTorch (peer_torch.py).
set -uo pipefail
out="${1:-/tmp/acceptance}"; mkdir -p "$out"
tar -xJf .bundle/trainer.tar.xz -C /tmp
printf '#!/bin/sh\nexec /tmp/bundle/run trainer "$@"\n' > /tmp/trainer && chmod +x /tmp/trainer
data=.bundle/data/fashion-mnist
fm=(--set data.train.images=$data/train-images-idx3-ubyte.gz --set data.train.labels=$data/train-labels-idx1-ubyte.gz
    --set data.validation.images=$data/t10k-images-idx3-ubyte.gz --set data.validation.labels=$data/t10k-labels-idx1-ubyte.gz)

echo "== devices"; /tmp/trainer devices
echo "== gpu tests"; /tmp/bundle/run trainer_gpu_tests 2>&1 | tail -3
echo "== fashion_mnist_cnn on gpu:0 (10 epochs)"
/tmp/trainer fit configs/fashion_mnist_cnn.yaml "${fm[@]}" --device gpu:0 2>&1 | tee "$out/fit_gpu.log" | grep -E "epoch|done|info|warn"
echo "== fashion_mnist_cnn on gpu:0 without graphs? (see warn lines above)"
echo "== fashion_mnist_cnn on cpu, 16 threads (2 epochs)"
OMP_NUM_THREADS=16 /tmp/trainer fit configs/fashion_mnist_cnn.yaml "${fm[@]}" --device cpu --epochs 2 2>&1 | grep -E "epoch|done"
echo "== fashion_mnist_cnn on cpu, 2 threads (2 epochs)"
OMP_NUM_THREADS=2 /tmp/trainer fit configs/fashion_mnist_cnn.yaml "${fm[@]}" --device cpu --epochs 2 2>&1 | grep -E "epoch|done"
echo "== --mem-limit 64 with batch 4096 (needs more): must fail before training, exit 5"
/tmp/trainer fit configs/fashion_mnist_cnn.yaml "${fm[@]}" --device gpu:0 --mem-limit 64 --batch-size 4096 --epochs 1; echo "exit code $?"
echo "== --mem-limit 1024 --mem-growth: process GPU memory sampled by nvidia-smi"
idle=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)
( while true; do nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits >> "$out/smi.csv" 2>/dev/null
                nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1 >> "$out/gpu_used.csv"; sleep 0.05; done ) &
smi=$!
/tmp/trainer fit configs/fashion_mnist_cnn.yaml "${fm[@]}" --device gpu:0 --mem-limit 1024 --mem-growth --epochs 3 2>&1 | grep -E "epoch 3|done|memory"
kill $smi
echo "max process GPU memory (MiB, nvidia-smi per-process, context included): $(awk -F', ' '{if ($2>m) m=$2} END {print m}' "$out/smi.csv" 2>/dev/null)"
echo "GPU memory used: idle ${idle} MiB, max during the run $(sort -n "$out/gpu_used.csv" | tail -1) MiB"
echo "== trainer bench (synthetic data, steps/s)"
scripts/bench.sh --trainer /tmp/trainer --device gpu:0 --epochs 4 mnist_cnn mlp8_disc mlp12_disc 2>&1
OMP_NUM_THREADS=2 scripts/bench.sh --trainer /tmp/trainer --device cpu --epochs 3 mnist_cnn 2>&1 | tail -1
OMP_NUM_THREADS=16 scripts/bench.sh --trainer /tmp/trainer --device cpu --epochs 3 mnist_cnn 2>&1 | tail -1
echo "== PyTorch on the same machine"
PY=python3; [ -x /opt/torch/.venv/bin/python ] && PY=/opt/torch/.venv/bin/python
cp .bundle/peer_torch.py /tmp/
$PY /tmp/peer_torch.py mnist_cnn,mlp8_disc,mlp12_disc gpu-eager 2>&1 | tail -3
CPU_THREADS=2 $PY /tmp/peer_torch.py mnist_cnn cpu 2>&1 | tail -1
CPU_THREADS=16 $PY /tmp/peer_torch.py mnist_cnn cpu 2>&1 | tail -1
