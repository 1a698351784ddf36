#!/usr/bin/env bash
# Sets up, builds and runs every test. Usage: bash tools/test.sh [ctest args...]
# The fast set alone: bash tools/test.sh -LE slow
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
# The ONNX Runtime anchor, when ../shared is present: model tests compare with it
# (otherwise with the numpy reference, and they say so).
if [ -f ../shared/ort/setup.sh ]; then
  bash ../shared/ort/setup.sh >/dev/null 2>&1 || echo "test: ONNX Runtime anchor setup failed; model tests use the numpy reference"
fi
cd build
ctest --output-on-failure -j 2 "$@"
