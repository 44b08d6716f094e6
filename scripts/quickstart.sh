#!/usr/bin/env bash
# README quick start: install what is missing, build, and train the PyTorch MNIST-example CNN on
# real Fashion-MNIST on the CPU (10 epochs).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec build/trainer fit configs/fashion_mnist_cnn.yaml "$@"
