#!/usr/bin/python3
"""Summarises an nxrt profile (`nxrt run|bench --profile TRACE.json`, a Chrome trace).

Usage: profile_summary.py TRACE.json [--top N]
Prints the runs' median, then per op type (fused groups as 'Conv+Relu', copies as 'copy')
and EP: calls per run, total ms per run, and share of the run. Kernel times are host wall
clock: for an EP with streams they are enqueue times, and the device time shows up in the
run's final synchronization ('run' minus the steps).
"""
import argparse
import collections
import json
import statistics


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--top", type=int, default=15)
    a = ap.parse_args()
    with open(a.trace) as f:
        events = json.load(f)["traceEvents"]
    runs = [e for e in events if e["cat"] == "run"]
    if not runs:
        raise SystemExit(f"{a.trace}: no complete run in the profile")
    n = len(runs)
    run_ms = [e["dur"] / 1000 for e in runs]
    per = collections.defaultdict(lambda: [0, 0.0])
    for e in events:
        if e["cat"] in ("kernel", "copy"):
            k = (e["args"]["ops"], e["args"]["ep"])
            per[k][0] += 1
            per[k][1] += e["dur"] / 1000
    total = sum(run_ms) / n
    steps = sum(v[1] for v in per.values()) / n
    print(f"{n} runs, median {statistics.median(run_ms):.3f} ms; steps {steps:.3f} ms, "
          f"other (sync, host) {total - steps:.3f} ms per run")
    print(f"{'ops':40s} {'ep':10s} {'calls/run':>9s} {'ms/run':>9s} {'share':>6s}")
    for (ops, ep), (calls, ms) in sorted(per.items(), key=lambda kv: -kv[1][1])[:a.top]:
        print(f"{ops[:40]:40s} {ep:10s} {calls / n:9.1f} {ms / n:9.3f} {100 * ms / n / total:5.1f}%")


if __name__ == "__main__":
    main()
