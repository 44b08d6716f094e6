#!/usr/bin/env bash
# README test command (and CI's): install what is missing, build, run every test with ctest.
# GPU tests run when a GPU is usable and are reported as skipped otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/check_layers.sh  # includes only from the own layer or below (docs/design.md, Layout)
scripts/setup.sh
# scripts/plot.py (ctest plot_script); numpy for the weight comparisons of ctest mpi_data_parallel;
# onnx and yaml for ctest onnx_export (scripts/onnx_check.sh, which runs /usr/bin/python3)
scripts/install_missing.sh test python3-matplotlib python3-numpy python3-onnx python3-yaml
# ONNX Runtime for ctest onnx_export: npm's onnxruntime-node, test-only, into the build folder (its
# CPU build is in the package; ONNXRUNTIME_NODE_INSTALL=skip declines the CUDA download). Without
# npm or the registry the test is reported as skipped.
peer="${BUILD_DIR:-build}/onnx-peer"
if command -v npm >/dev/null && [ ! -d "$peer/node_modules/onnxruntime-node" ]; then
  ONNXRUNTIME_NODE_INSTALL=skip npm install --prefix "$peer" --no-audit --no-fund onnxruntime-node >/dev/null ||
    echo "test: npm could not install onnxruntime-node into $peer; ctest onnx_export will be skipped"
fi
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "$(nproc)"
