#!/usr/bin/env bash
# Builds the Debian package build-deb/trainer_<version>_amd64.deb (cmake/package.cmake): a
# CPU-only Release build (a CUDA build links NVIDIA's libraries, which are no Debian packages),
# then cpack. Install it with:  sudo apt-get install ./build-deb/trainer_*_amd64.deb
#   scripts/package.sh                 # build-deb/
#   BUILD_DIR=build scripts/package.sh # reuse a CPU-only build directory (one with CUDA is
#                                      # reconfigured CPU-only and rebuilt)
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir="${BUILD_DIR:-build-deb}"
# dpkg-shlibdeps (dpkg-dev) computes the package's dependencies; help2man makes the man page.
scripts/install_missing.sh package dpkg-dev file help2man
TRAINER_CUDA=OFF BUILD_DIR="$build_dir" scripts/setup.sh
(cd "$build_dir" && cpack -G DEB >cpack.log 2>&1) || { tail -30 "$build_dir/cpack.log"; exit 1; }
deb=$(ls "$build_dir"/trainer_*_amd64.deb)
echo "package: $deb"
dpkg-deb --info "$deb" | sed -n '/Package:/,$p'
