#!/usr/bin/python3
"""Benchmarks nxrt against ONNX Runtime 1.30 in one run, alternating engines, and prints
median latencies and the ratio nxrt/ORT (below 1: nxrt is faster).

Usage: bench_vs_ort.py --nxrt BIN [--ep cpu] [--threads 1] [--models mlp,cnn,...]
                       [--warmup 5] [--iters 20] [--rounds 2] [--cache DIR]
Needs the anchor toolkit (../shared/ort, set up by its setup.sh); without it, prints nxrt
alone and says so. On a 2-vCPU machine noise reaches 20-60%: take the best of rounds.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from model_tests import MODELS, SHARED_ORT, ort_available  # noqa: E402


def run_json(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    if p.returncode != 0:
        raise SystemExit(f"bench_vs_ort: {' '.join(cmd[:3])} failed: {p.stderr.strip()}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nxrt", required=True)
    ap.add_argument("--ep", default="cpu")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--warmup", default="5")
    ap.add_argument("--iters", default="20")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cache", default=os.path.join(HERE, "..", "build", "bench-models"))
    args = ap.parse_args()
    names = [n for n in args.models.split(",") if n]
    subprocess.run([sys.executable, os.path.join(HERE, "gen_bench_models.py"), args.cache, "--only"] + names,
                   check=True, capture_output=True)
    have_ort = ort_available()
    if not have_ort:
        print("bench_vs_ort: the ONNX Runtime anchor (../shared/ort) is absent: nxrt numbers only, no ratio")
    rows = []
    for name in names:
        model = os.path.join(args.cache, name + ".onnx")
        best = {"nxrt": None, "ort": None}
        for _ in range(args.rounds):
            if have_ort:
                o = run_json(["node", os.path.join(SHARED_ORT, "bench.js"), "--model", model, "--threads", args.threads,
                              "--warmup", args.warmup, "--iters", args.iters])
                if best["ort"] is None or o["median_ms"] < best["ort"]["median_ms"]:
                    best["ort"] = o
            n = run_json([args.nxrt, "bench", model, "--ep", args.ep, "--threads", args.threads, "--warmup", args.warmup,
                          "--iters", args.iters, "--json"])
            if best["nxrt"] is None or n["median_ms"] < best["nxrt"]["median_ms"]:
                best["nxrt"] = n
        rows.append((name, best["nxrt"], best["ort"]))
    print(f"| model | nxrt {args.ep} median ms | ORT median ms | ratio nxrt/ORT | nxrt peak RSS MB | ORT peak RSS MB |")
    print("|---|---|---|---|---|---|")
    for name, n, o in rows:
        if o:
            print(f"| {name} | {n['median_ms']:.3f} | {o['median_ms']:.3f} | {n['median_ms'] / o['median_ms']:.2f} | "
                  f"{n['peak_rss_mb']:.0f} | {o['peak_rss_mb']:.0f} |")
        else:
            print(f"| {name} | {n['median_ms']:.3f} | - | - | {n['peak_rss_mb']:.0f} | - |")
    print(f"threads {args.threads}, warmup {args.warmup}, iters {args.iters}, best median of {args.rounds} rounds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
