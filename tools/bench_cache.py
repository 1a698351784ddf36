#!/usr/bin/python3
"""Session load time with and without the compiled-model cache, in one run (issue 12).

For each model and EP: the cold load (no cache: ONNX parse, checker, shape inference,
optimizer, kernels compiled), the first load with an empty cache folder (a miss: the same plus
writing the entry) and the warm load (a hit: the graph from the entry, kernels imported), each
the median of --rounds alternating runs of `nxrt bench --json` (`load_ms`: model load and
session creation). Prints warm/cold (goal: at most 0.5) and checks the warm session's outputs
are the cold session's bytes (`nxrt run --output-dir`).

Usage: bench_cache.py --nxrt BIN [--models cnn,transformer] [--eps cpu,vulkan] [--rounds 5]
                      [--dir build/testdata/bench-models] [--json OUT]
Exit 1 when outputs differ or a warm load is over half the cold one (--no-goal: report only).
"""
import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def bench(nxrt, model, ep, cache=None):
    cmd = [nxrt, "bench", model, "--ep", ep, "--iters", "1", "--warmup", "0", "--json"]
    if cache:
        cmd += ["--cache", cache]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    if p.returncode != 0:
        raise SystemExit(f"bench_cache: {' '.join(cmd)} failed: {p.stderr.strip()}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def outputs(nxrt, model, ep, out, cache=None):
    cmd = [nxrt, "run", model, "--ep", ep, "--output-dir", out]
    if cache:
        cmd += ["--cache", cache]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    if p.returncode != 0:
        raise SystemExit(f"bench_cache: {' '.join(cmd)} failed: {p.stderr.strip()}")
    return {os.path.basename(f): open(f, "rb").read() for f in sorted(glob.glob(os.path.join(out, "*.pb")))}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nxrt", required=True)
    ap.add_argument("--models", default="cnn,transformer")
    ap.add_argument("--eps", default="cpu,vulkan")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", default=os.path.join(os.path.dirname(HERE), "build", "testdata", "bench-models"))
    ap.add_argument("--json")
    ap.add_argument("--no-goal", action="store_true")
    a = ap.parse_args()
    p = subprocess.run([a.nxrt, "plugins", "--json"], capture_output=True, text=True, timeout=120)
    have = {x["name"] for x in json.loads(p.stdout)["plugins"] if x["loaded"] and x["device_count"] > 0}
    rows, bad = [], 0
    print(f"{'model':<12} {'ep':<7} {'cold ms':>9} {'miss ms':>9} {'warm ms':>9} {'warm/cold':>9}  outputs  imported/compiled")
    for name in a.models.split(","):
        model = os.path.join(a.dir, name + ".onnx")
        if not os.path.exists(model):
            raise SystemExit(f"bench_cache: no model {model} (tools/gen_bench_models.py makes them)")
        for ep in a.eps.split(","):
            if ep not in have:
                print(f"{name:<12} {ep:<7} skipped: EP '{ep}' has no device here")
                continue
            with tempfile.TemporaryDirectory() as t:
                cache = os.path.join(t, "cache")
                miss = bench(a.nxrt, model, ep, cache)["load_ms"]
                cold, warm, last = [], [], None
                for _ in range(a.rounds):  # alternating, so drift hits both alike
                    cold.append(bench(a.nxrt, model, ep)["load_ms"])
                    last = bench(a.nxrt, model, ep, cache)
                    warm.append(last["load_ms"])
                c = last["load"]["cache"]
                same = outputs(a.nxrt, model, ep, os.path.join(t, "cold")) == outputs(a.nxrt, model, ep, os.path.join(t, "warm"), cache)
                counts = ",".join(f"{e['ep']} {e['imported']}/{e['compiled']}" for e in c["eps"]) or "-"
                ratio = statistics.median(warm) / statistics.median(cold)
                ok = same and c["mode"] == "hit" and (a.no_goal or ratio <= 0.5)
                bad += 0 if ok else 1
                print(f"{name:<12} {ep:<7} {statistics.median(cold):9.1f} {miss:9.1f} {statistics.median(warm):9.1f} "
                      f"{ratio:9.2f}  {'same' if same else 'DIFFER':<7}  {counts}{'' if ok else '  <- FAIL'}")
                rows.append({"model": name, "ep": ep, "cold_ms": cold, "miss_ms": miss, "warm_ms": warm, "ratio": ratio,
                             "outputs_identical": same, "cache": c, "stages_warm": last["load"]["stages"]})
    if a.json:
        json.dump(rows, open(a.json, "w"), indent=1)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
