#!/usr/bin/env bash
# ctest "torch_export": scripts/torch_peer.py loads a trained residual network (a run directory of
# configs/resnet_fashion_mnist.yaml, trained briefly on a subset) into the same network in PyTorch,
# saves its state_dict and checks that PyTorch and `trainer predict` agree on 300 samples.
# Needs PyTorch; without it the test exits 77 and ctest reports it as skipped (not passed).
#   tests/scripts/torch_export_test.sh TRAINER_BINARY
set -euo pipefail
trainer=$(realpath "$1")
repo=$(cd "$(dirname "$0")/../.." && pwd)
if ! python3 -c 'import torch, numpy' 2>/dev/null; then
  echo "SKIPPED: PyTorch is not installed (python3 -c 'import torch' fails); this checks scripts/torch_peer.py"
  exit 77
fi
if [ ! -e /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz ]; then
  echo "FAILED: Fashion-MNIST is missing: install dataset-fashion-mnist (scripts/setup.sh does)"
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$trainer" fit "$repo/configs/resnet_fashion_mnist.yaml" --device cpu --out "$work/run" -q --epochs 1 \
  --set data.train.limit=1000 --set data.validation.limit=300 --set data.batch_size=50
python3 "$repo/scripts/torch_peer.py" --trainer "$trainer" export "$work/run" --samples 300 --out "$work/sd.pt"
test -s "$work/sd.pt"
