#!/bin/sh
# Builds the plugin-reload test under ThreadSanitizer in its own tree and runs it:
# every in-tree plugin (cpu, vulkan, sample) loaded, listed, run and unloaded
# 100 times from 4 threads through libnxrt (host/tests/reload_test.cpp).
# Exits nonzero on any TSan report (halt_on_error=1) or test failure.
#
# usage: tools/tsan_reload.sh [SOURCE_DIR [BUILD_DIR]]   (default: the checkout, SOURCE_DIR/build-tsan)
# env:   NXRT_TSAN_JOBS (build parallelism, default 1), NXRT_RELOAD_ITERATIONS (default 100)
#
# Flags as in the README's TSan command for the host tests, plus the shared-library
# linker flags (libnxrt.so is a shared library here) and Vulkan ON. Lavapipe and the
# Vulkan loader are uninstrumented system libraries: tools/tsan_reload.supp names
# exactly those (never nxrt code).
set -eu
src=${1:-$(cd "$(dirname "$0")/.." && pwd)}
build=${2:-$src/build-tsan}
jobs=${NXRT_TSAN_JOBS:-1}
t0=$(date +%s)
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNXRT_WITH_VULKAN=ON \
  -DCMAKE_C_FLAGS=-fsanitize=thread -DCMAKE_CXX_FLAGS=-fsanitize=thread \
  -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread \
  -DCMAKE_MODULE_LINKER_FLAGS=-fsanitize=thread >/dev/null
targets="nxrt nxrt_ep_cpu nxrt_ep_sample nxrt_reload_test"
if ninja -C "$build" -t targets all 2>/dev/null | grep -q '^nxrt_ep_vulkan:'; then
  targets="$targets nxrt_ep_vulkan"
else
  echo "tsan_reload: the vulkan plugin is not configured (Vulkan or glslc missing): cpu and sample only"
fi
# shellcheck disable=SC2086
cmake --build "$build" -j"$jobs" --target $targets
t1=$(date +%s)
supp="$src/tools/tsan_reload.supp"
opts="halt_on_error=1 second_deadlock_stack=1 history_size=4"
[ -f "$supp" ] && opts="$opts suppressions=$supp"
status=0
TSAN_OPTIONS="$opts ${TSAN_OPTIONS:-}" "$build/tests/nxrt_reload_test" || status=$?
t2=$(date +%s)
echo "tsan_reload: build $((t1 - t0)) s, run $((t2 - t1)) s, exit $status"
exit "$status"
