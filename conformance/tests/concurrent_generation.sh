#!/usr/bin/env bash
# Three nxrt-conformance runs start at once on an empty --tests folder (as ctest -j starts the
# ops and models tests of several plugins): exactly one generates the node tests while the
# others wait for it, every run passes, and no half-written folder is left behind.
# usage: concurrent_generation.sh RUNNER PLUGIN WORKDIR
set -u
runner=$1 plugin=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
pids=()
for i in 1 2 3; do
  "$runner" --plugin "$plugin" --suite ops --tests "$work/node-tests" --jobs 1 --timeout 120 \
    --ops-filter '^test_(add|relu|maxpool_2d_uint8)$' --report-json "$work/report$i.json" > "$work/out$i" 2> "$work/err$i" &
  pids+=($!)
done
fail=0
for i in 1 2 3; do
  if ! wait "${pids[$((i - 1))]}"; then
    echo "run $i failed:"; cat "$work/err$i"; fail=1
  fi
done
generated=$(cat "$work"/err* | grep -c "generating .*node-tests with gen_onnx_node_tests.py")
if [ "$generated" != 1 ]; then
  echo "expected one run to generate the node tests, $generated did"; fail=1
fi
if ls -d "$work"/node-tests.partial-* 2> /dev/null; then
  echo "a partial folder was left behind"; fail=1
fi
[ -f "$work/node-tests/STAMP.json" ] || { echo "no STAMP.json in $work/node-tests"; fail=1; }
for i in 1 2 3; do
  grep -q '"passed": *3' "$work/report$i.json" 2> /dev/null || grep -q '3 passed' "$work/err$i" ||
    { echo "run $i did not pass its 3 node tests:"; tail -5 "$work/err$i"; fail=1; }
done
[ $fail = 0 ] && echo "3 concurrent runs, 1 generation, all passed"
exit $fail
