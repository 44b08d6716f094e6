#!/usr/bin/env bash
# README test command (and CI's): install what is missing, build, run every test with ctest.
# GPU tests run when a GPU is usable and are reported as skipped otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/check_layers.sh  # includes only from the own layer or below (docs/design.md, Layout)
scripts/setup.sh
# scripts/plot.py (ctest plot_script); numpy for the weight comparisons of ctest mpi_data_parallel
scripts/install_missing.sh test python3-matplotlib python3-numpy
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "$(nproc)"
