#!/usr/bin/env bash
# ctest "onnx_export": scripts/onnx_check.sh on the configs that train in seconds here (the two
# layer-zoo configs, which hold every layer type; the scikit-learn CSVs: classification, binary and
# regression, with standardize; Fashion-MNIST's CNN and residual network), one epoch and 200 test
# inputs each: every exported model passes onnx.checker and agrees with `trainer predict` in ONNX
# Runtime. The full table (every config, 1,000 inputs) is `scripts/onnx_check.sh` by hand.
# Without python3-onnx, node or onnxruntime-node (scripts/test.sh installs them) the script exits
# 77 and ctest reports the test as skipped, not passed.
#   tests/scripts/onnx_check_test.sh TRAINER_BINARY
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
exec bash "$repo/scripts/onnx_check.sh" --trainer "$1" --samples 200 --epochs 1 \
  "$repo/tests/scripts/onnx_layers_image.yaml" "$repo/tests/scripts/onnx_layers_tokens.yaml" \
  "$repo/tests/scripts/onnx_layers_sequence.yaml" "$repo/tests/scripts/onnx_layers_recurrent.yaml" \
  "$repo/configs/iris_mlp.yaml" "$repo/configs/breast_cancer_binary.yaml" "$repo/configs/diabetes_regression.yaml" \
  "$repo/configs/fashion_mnist_cnn.yaml" "$repo/configs/resnet_fashion_mnist.yaml"
