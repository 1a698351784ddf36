#!/usr/bin/python3
"""Before/after per kernel of two builds, made to see a few percent on a noisy shared machine.

Usage: ab_kernels.py BEFORE_DIR AFTER_DIR MODEL.onnx [--threads 1] [--rounds 30] [--iters 15]
                     [--all]
BEFORE_DIR / AFTER_DIR hold bin/nxrt and lib/ (build folders; each runs with its own lib/ first
on LD_LIBRARY_PATH, as tools/ab_bench.sh). Each round runs one `nxrt bench --profile` process
per build, in ABBA order (before, after; after, before; ...). Per kernel (a fused group or a
node, the trace's names) and process the fastest of its runs; per build the median of that
over the processes. Why: on a shared machine one process's timings sit ~10% above or below
another's for the whole process (placement, cache colouring), so the processes, not the runs,
are the samples; the same build against itself reads within ~1% at 30 rounds.
Prints the kernels whose medians differ by over 4% and 2 us (all with --all), the sums, and a
90% interval of the sums' ratio from resampling each build's processes (3+ rounds).
"""
import argparse
import collections
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile


def run(build, model, threads, iters, trace):
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(build, "lib"))
    cmd = [os.path.join(build, "bin", "nxrt"), "bench", model, "--ep", "cpu", "--threads", str(threads),
           "--iters", str(iters), "--warmup", "3", "--profile", trace]
    r = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"ab_kernels: {' '.join(cmd)} failed: {r.stderr.strip()}")
    fastest = {}  # in execution order (dicts keep insertion order)
    for e in json.load(open(trace))["traceEvents"]:
        if e.get("cat") == "kernel":
            fastest[e["name"]] = min(fastest.get(e["name"], e["dur"]), e["dur"])
    return fastest


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--iters", type=int, default=15)
    ap.add_argument("--all", action="store_true")
    a = ap.parse_args()
    for d in (a.before, a.after):
        if not os.access(os.path.join(d, "bin", "nxrt"), os.X_OK):
            sys.exit(f"ab_kernels: no executable {d}/bin/nxrt")
    per = {"before": collections.defaultdict(list), "after": collections.defaultdict(list)}
    order = {}  # every kernel either build ran, first seen first
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            for side in (("before", "after") if r % 2 == 0 else ("after", "before")):
                fastest = run(a.before if side == "before" else a.after, a.model, a.threads, a.iters,
                              os.path.join(tmp, side + ".json"))
                for n, v in fastest.items():
                    order.setdefault(n)
                    per[side][n].append(v)
    print(f"{os.path.basename(a.model)}, {a.threads} thread(s), {a.rounds} processes per build: per kernel the "
          "median over processes of each one's fastest run (us)")
    print(f"{'before':>9} {'after':>9} {'ratio':>6}  kernel")
    sb = sa = 0.0
    for n in order:
        if not per["before"][n] or not per["after"][n]:
            print(f"{'':>9} {'':>9} {'':>6}  {n} (in one build only)")
            continue
        b, f = statistics.median(per["before"][n]), statistics.median(per["after"][n])
        sb, sa = sb + b, sa + f
        if a.all or abs(f - b) > max(2.0, 0.04 * b):
            print(f"{b:9.1f} {f:9.1f} {f / b if b else 0:6.3f}  {n}")
    print(f"sum of the kernels: before {sb:.0f} us, after {sa:.0f} us, after / before {sa / sb if sb else 0:.3f}")
    lo_hi = sum_ratio_interval(per, [n for n in order if per["before"][n] and per["after"][n]])
    if lo_hi:
        print(f"90% interval of that ratio: {lo_hi[0]:.3f} - {lo_hi[1]:.3f} (processes resampled; an interval "
              "that holds 1.000 is no measured change)")


def sum_ratio_interval(per, names, resamples=2000):
    """The 5th and 95th percentiles of after / before of the summed per-kernel medians when each
    build's processes are drawn again with replacement (a bootstrap: the processes are the
    samples). None below 3 processes a build."""
    k = {side: max((len(per[side][n]) for n in names), default=0) for side in per}
    names = [n for n in names if all(len(per[side][n]) == k[side] for side in per)]  # in every process
    if not names or min(k.values()) < 3:
        return None
    rng = random.Random(1)
    ratios = []
    for _ in range(resamples):
        sums = {}
        for side in ("before", "after"):
            idx = [rng.randrange(k[side]) for _ in range(k[side])]
            sums[side] = sum(statistics.median(per[side][n][i] for i in idx) for n in names)
        ratios.append(sums["after"] / sums["before"])
    ratios.sort()
    return ratios[int(0.05 * len(ratios))], ratios[int(0.95 * len(ratios)) - 1]


if __name__ == "__main__":
    main()
