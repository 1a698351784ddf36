#!/usr/bin/python3
"""Runs ONNX backend test cases through `nxrt run` on one EP and checks the outputs.

Usage: node_tests.py --nxrt BIN --ep EP --tests DIR [--kind node] [--filter REGEX]
                     [--min-pass N] [--json OUT] [--jobs N] [--atol A]
                     [--env KEY=VALUE]... [--forbid-stderr TEXT]

A case whose nodes the EP does not all claim is `unsupported` (skipped); a claimed case
must match the expected outputs (same dtype and shape, rtol 1e-3, atol 1e-7, NaN == NaN).
Exit 1 when any claimed case fails or fewer than --min-pass cases pass (so a plugin
that stops claiming ops cannot pass vacuously). Last line: `N passed, N failed, N skipped`.
"""
import argparse
import concurrent.futures
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402

UNSUPPORTED_MARKERS = ("are not supported by the requested EPs", "which nxrt does not support")


def run_case(nxrt, ep, case, rtol, atol, extra, env, forbid):
    name = os.path.basename(case)
    results = []
    for data in sorted(glob.glob(os.path.join(case, "test_data_set_*"))):
        with tempfile.TemporaryDirectory() as out:
            cmd = [nxrt, "run", os.path.join(case, "model.onnx"), "--ep", ep, "--input-dir", data, "--output-dir", out] + extra
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
            except subprocess.TimeoutExpired:
                return name, "fail", "timed out after 120 s"
            if p.returncode != 0:
                err = p.stderr.strip().splitlines()[0] if p.stderr.strip() else f"exit {p.returncode}"
                if p.returncode < 0 or p.returncode > 2:
                    return name, "fail", f"crashed or bad exit code {p.returncode}: {err}"
                if any(m in err for m in UNSUPPORTED_MARKERS):
                    return name, "unsupported", err
                return name, "fail", err
            if forbid and forbid in p.stderr:
                return name, "fail", f"stderr has '{forbid}': {p.stderr.strip()[-300:]}"
            for want_path in sorted(glob.glob(os.path.join(data, "output_*.pb"))):
                got_path = os.path.join(out, os.path.basename(want_path))
                if not os.path.exists(got_path):
                    return name, "fail", f"{os.path.basename(want_path)} was not written"
                why = compare.mismatch(compare.load(got_path), compare.load(want_path), rtol, atol)
                if why:
                    return name, "fail", f"{os.path.basename(want_path)}: {why}"
            results.append("pass")
    return name, "pass" if results else "fail", "" if results else "no test_data_set"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nxrt", required=True)
    ap.add_argument("--ep", required=True)
    ap.add_argument("--tests", required=True)
    ap.add_argument("--kind", default="node")
    ap.add_argument("--filter", default="")
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--atol", type=float, default=1e-7)
    ap.add_argument("--min-pass", type=int, default=1)
    ap.add_argument("--json")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--threads", default="1", help="intra-op threads per run")
    ap.add_argument("--env", action="append", default=[], help="KEY=VALUE set for every run")
    ap.add_argument("--forbid-stderr", default="", help="a run whose stderr contains this text fails")
    ap.add_argument("--opt", help="graph optimization level for every run (nxrt run --opt), default: nxrt's")
    args = ap.parse_args()
    cases = sorted(d for d in glob.glob(os.path.join(args.tests, args.kind, "*")) if os.path.isdir(d))
    if args.filter:
        cases = [c for c in cases if re.search(args.filter, os.path.basename(c))]
    if not cases:
        print(f"node_tests: no cases under {args.tests}/{args.kind}", file=sys.stderr)
        return 1
    extra = ["--threads", args.threads] + (["--opt", args.opt] if args.opt is not None else [])
    env = dict(os.environ)
    env.update(kv.split("=", 1) for kv in args.env)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda c: run_case(args.nxrt, args.ep, c, args.rtol, args.atol, extra, env, args.forbid_stderr), cases))
    counts = {"pass": 0, "fail": 0, "unsupported": 0}
    for name, verdict, why in results:
        counts[verdict] += 1
        if verdict == "fail":
            print(f"FAIL {name}: {why}")
    passed = sorted(n for n, v, _ in results if v == "pass")
    print(f"{args.ep}: {len(cases)} cases: {counts['pass']} passed, {counts['fail']} failed, "
          f"{counts['unsupported']} unsupported (not claimed)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"ep": args.ep, "results": [{"case": n, "verdict": v, "message": w} for n, v, w in results]}, f, indent=1)
    ok = counts["fail"] == 0 and counts["pass"] >= args.min_pass
    if counts["pass"] < args.min_pass:
        print(f"only {counts['pass']} cases passed, fewer than --min-pass {args.min_pass}")
    print(f"{counts['pass']} passed, {counts['fail']} failed, {counts['unsupported']} skipped")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
