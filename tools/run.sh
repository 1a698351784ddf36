#!/usr/bin/env bash
# Sets up, builds, and runs a real model (ResNet-18-shaped CNN) on the best available
# EP (a GPU/NPU plugin if one has a device, else the CPU plugin), then benchmarks it.
# Usage: bash tools/run.sh [MODEL_NAME: cnn|mlp|transformer|tiny_ops|dwconv]
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
model=${1:-cnn}
/usr/bin/python3 tools/gen_bench_models.py build/bench-models --only "$model" >/dev/null
build/bin/nxrt plugins | grep -E '^[a-z]|devices:|no device:|name:' || true
echo
build/bin/nxrt run "build/bench-models/$model.onnx" --ep auto --output-dir "build/run-$model"
build/bin/nxrt bench "build/bench-models/$model.onnx" --ep auto --warmup 3 --iters 10
