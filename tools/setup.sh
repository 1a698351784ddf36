#!/usr/bin/env bash
# Installs what nxrt needs on Debian 12 (only what is missing), then configures and
# builds into build/. Usage: bash tools/setup.sh [extra cmake args...]
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(cmake ninja-build ccache g++ pkg-config libonnx-dev libprotobuf-dev protobuf-compiler
      libboost-dev libboost-filesystem-dev libfmt-dev doctest-dev
      gcc-multilib libvulkan-dev glslc mesa-vulkan-drivers vulkan-validationlayers python3-onnx python3-numpy
      pybind11-dev python3-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# One CUDA architecture by default keeps builds short on small machines.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j "$(nproc)"
