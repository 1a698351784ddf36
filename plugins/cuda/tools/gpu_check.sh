#!/usr/bin/env bash
# The CUDA plugin on a real GPU, in under 8 minutes on one H200: builds what it needs, then
# runs plugins/cuda/tools/gpu_check.py (devices, host math, the compiled-model cache's import
# side: the device's description compiled offline with the driver hidden, then run on the GPU
# with verdict "optimal", outputs bit-identical to a cold session, warm vs cold load time, and
# sm_80 / sm_120 descriptions giving "usable but slower" / "must recompile"; bench models fp32
# and fp16 vs the CPU plugin, CUDA graphs on/off and I/O binding, conformance
# abi/interop/stress/cache/ops/models, graph timings, GEMM throughput vs cuBLAS) and writes a
# short report.
# Usage: plugins/cuda/tools/gpu_check.sh [OUT_DIR]   (default: $OUT, else ./gpu_check_report)
# Env: NXRT_GPU_BUILD (build dir, default build-gpu), NXRT_GPU_SKIP_BUILD=1 (use the binaries
# already in NXRT_GPU_BUILD, e.g. build/bin, build/lib and build/tests carried from a machine
# with the same system libraries), NXRT_GPU_BUDGET (seconds for the checks after the build,
# default: what the build left of 470 s, at least 200), NXRT_CUDA_ARCHITECTURES (default 90).
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${1:-${OUT:-gpu_check_report}}
build=${NXRT_GPU_BUILD:-build-gpu}
mkdir -p "$out"
t0=$(date +%s)
{
  echo "# nxrt CUDA plugin: GPU check"
  echo
  echo "- date: $(date -u +%FT%TZ); commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo ' (modified)')"
  echo "- gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo 'nvidia-smi not found')"
  echo "- nvcc: $(nvcc --version 2>/dev/null | tail -1 || /usr/local/cuda/bin/nvcc --version 2>/dev/null | tail -1)"
} > "$out/report.md"

if [ "${NXRT_GPU_SKIP_BUILD:-0}" = 1 ]; then
  echo "gpu_check: using the binaries in $build as they are" >&2
  echo "- build: skipped (NXRT_GPU_SKIP_BUILD=1, binaries of $build)" >> "$out/report.md"
elif echo "gpu_check: configuring and building into $build" >&2 && ! cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNXRT_WITH_VULKAN=OFF \
     -DNXRT_CUDA_ARCHITECTURES="${NXRT_CUDA_ARCHITECTURES:-90}" > "$out/build.log" 2>&1 ||
   ! cmake --build "$build" -j "$(nproc)" --target nxrt_cli nxrt_ep_cpu nxrt_ep_cuda nxrt-conformance test_cuda_host \
     cuda_gpu_session_check nxrt_cuda_gemm_bench >> "$out/build.log" 2>&1; then
  echo "- build: FAILED (see build.log)" >> "$out/report.md"
  tail -30 "$out/build.log" >&2
  exit 1
else
  echo "- build: $(( $(date +%s) - t0 )) s" >> "$out/report.md"
  grep -m1 "nxrt: CUDA plugin" "$out/build.log" | sed 's/^-- /- /' >> "$out/report.md"
fi
# The whole script stays under 8 minutes: the checks get what the build left of 470 s (at least 200).
left=$(( 470 - ($(date +%s) - t0) ))
[ "$left" -lt 200 ] && left=200
/usr/bin/python3 plugins/cuda/tools/gpu_check.py --build "$build" --out "$out" --budget "${NXRT_GPU_BUDGET:-$left}"
rc=$?
echo "gpu_check: $(( $(date +%s) - t0 )) s in all, exit $rc; report: $out/report.md" >&2
cat "$out/report.md"
exit $rc
