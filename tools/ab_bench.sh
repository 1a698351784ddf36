#!/bin/bash
# Before/after timing of two builds, alternated so both see the same machine minutes.
#
#   bash tools/ab_bench.sh BEFORE_DIR AFTER_DIR THREADS ROUNDS MODEL.onnx...
#
# BEFORE_DIR / AFTER_DIR hold bin/nxrt and lib/ (a build folder, or a copy of one's bin/ and
# lib/ taken before the change). Each build runs with LD_LIBRARY_PATH=its own lib/: a copied
# nxrt would otherwise load libnxrt.so from the build tree it was linked in (its RUNPATH) while
# loading plugins from its own lib/, so a host change would be compared with itself.
# Prints, per model, each round's `nxrt bench ... --iters 60` median for both builds.
set -euo pipefail
if [ $# -lt 5 ]; then
  sed -n '2,10p' "$0" >&2
  exit 2
fi
before=$1 after=$2 threads=$3 rounds=$4
shift 4
for d in "$before" "$after"; do
  [ -x "$d/bin/nxrt" ] || { echo "ab_bench: no executable $d/bin/nxrt" >&2; exit 2; }
done
median() {
  LD_LIBRARY_PATH="$1/lib" "$1/bin/nxrt" bench "$2" --ep cpu --threads "$threads" --iters 60 2>&1 |
    grep -o 'median [0-9.]*' | cut -d' ' -f2 || echo "failed"
}
for m in "$@"; do
  a=() b=()
  for _ in $(seq "$rounds"); do
    a+=("$(median "$before" "$m")")
    b+=("$(median "$after" "$m")")
  done
  echo "$(basename "$m") ($threads thread(s), ms): before ${a[*]} | after ${b[*]}"
done
