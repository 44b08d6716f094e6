#!/usr/bin/env bash
# Installs what is missing (Debian 12 packages) and builds trainer into build/.
#   scripts/setup.sh            # Release build; CUDA backend when nvcc + cuDNN are present
#   BUILD_DIR=... TRAINER_CUDA=OFF scripts/setup.sh
#   CUDA_ARCHS=90-real scripts/setup.sh   # only the GPU architectures named (faster build)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake ninja-build pkg-config zlib1g-dev libpng-dev libjpeg62-turbo-dev libdnnl-dev ocl-icd-opencl-dev libyaml-cpp-dev libcli11-dev
          libspdlog-dev catch2 nlohmann-json3-dev dataset-fashion-mnist help2man libopenmpi-dev openmpi-bin
          python3-sklearn python3-pandas  # sklearn: the CSV data sets configs/*.yaml read in place
          python3-jsonschema python3-yaml)  # ctest config_schema: configs against docs/trainer.schema.json
scripts/install_missing.sh setup "${packages[@]}"

build_dir="${BUILD_DIR:-build}"
cuda_flag=()
[ -n "${TRAINER_CUDA:-}" ] && cuda_flag=(-DTRAINER_CUDA="$TRAINER_CUDA")
# GPU architectures to compile (CMake syntax, e.g. "90-real" or "native"); default: every GPU
# generation CUDA 13 supports (see CMakeLists.txt).
[ -n "${CUDA_ARCHS:-}" ] && cuda_flag+=(-DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHS")
# nvcc is found on PATH or at the toolkit's usual place.
if [ -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null; then
  cuda_flag+=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
fi
# ccache, where installed, makes a rebuild (another clone, CI) reuse what was compiled before; the
# paths below this tree are hashed relative to it, so every clone shares one cache.
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(pwd)}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "${cuda_flag[@]}" "${launcher[@]}" >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
echo "setup: built $build_dir/trainer"
