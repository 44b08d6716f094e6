#!/usr/bin/env bash
# Every shipped config on gpu:0 and on the CPU (2 and 16 threads), on real Fashion-MNIST where
# it exists and on synthetic files in the real formats otherwise, plus PyTorch's peer timings.
# Run on the GPU machine from the repo root with a bundle made by
#   ../shared/device/bundle.sh --data build-gpu/trainer build-gpu/tests/trainer_gpu_tests
#   cp ../shared/bench/peer_torch.py .bundle/
set -uo pipefail
tar -xJf .bundle/trainer.tar.xz -C /tmp
printf '#!/bin/sh\nexec /tmp/bundle/run trainer "$@"\n' > /tmp/trainer && chmod +x /tmp/trainer
python3 scripts/make_synthetic_data.py --out /tmp/synth >/dev/null
fm=.bundle/data/fashion-mnist
s=/tmp/synth
run() {  # label, then trainer arguments
  local label="$1"; shift
  echo "== $label"
  /tmp/trainer fit "$@" --no-out 2>&1 | grep -E "epoch [0-9]+/|done:|error|warn" | sed -E 's/^\[[0-9: -]+\] //' | tail -4
}
mnist=(configs/mnist_cnn.yaml --set data.train.images=$fm/train-images-idx3-ubyte.gz --set data.train.labels=$fm/train-labels-idx1-ubyte.gz
       --set data.validation.images=$fm/t10k-images-idx3-ubyte.gz --set data.validation.labels=$fm/t10k-labels-idx1-ubyte.gz)
cifar=(configs/cifar10_cnn.yaml --set "data.train.files=[$s/cifar-10-batches-bin/data_batch_1.bin]"
       --set "data.validation.files=[$s/cifar-10-batches-bin/test_batch.bin]")
reuters=(configs/reuters_conv1d.yaml --set data.train.path=$s/reuters/train.txt --set data.validation.path=$s/reuters/test.txt)
for dev in gpu:0 cpu16 cpu2; do
  case $dev in gpu:0) d=gpu:0; export OMP_NUM_THREADS=16;; cpu16) d=cpu; export OMP_NUM_THREADS=16;; cpu2) d=cpu; export OMP_NUM_THREADS=2;; esac
  run "mnist_cnn (Fashion-MNIST files) on $dev" "${mnist[@]}" --device $d --epochs 2
  run "cifar10_cnn (synthetic CIFAR files) on $dev" "${cifar[@]}" --device $d --epochs 2
  run "reuters_conv1d (synthetic sequences) on $dev" "${reuters[@]}" --device $d --epochs 3
  run "mlp_disc depth 8, 100 epochs on $dev" configs/mlp_disc.yaml --device $d
done
unset OMP_NUM_THREADS
echo "== PyTorch peers"
cp .bundle/peer_torch.py /tmp/
python3 /tmp/peer_torch.py reuters_conv1d,cifar_cnn gpu-eager 2>&1 | tail -2
CPU_THREADS=2 python3 /tmp/peer_torch.py reuters_conv1d,cifar_cnn,mlp8_disc cpu 2>&1 | tail -3
CPU_THREADS=16 python3 /tmp/peer_torch.py reuters_conv1d,cifar_cnn,mlp8_disc cpu 2>&1 | tail -3
