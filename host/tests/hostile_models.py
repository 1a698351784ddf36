#!/usr/bin/python3
"""Hostile models (tools/gen_hostile_models.py) through `nxrt run --ep cpu`, each under a
4 GiB address-space limit and a time limit. Every one must be refused: exit 1 or 2, one
line 'nxrt: error: ...' containing the case's expected substring (the error names the
problem), no signal, no sanitizer report, no hang.

Usage: hostile_models.py --nxrt BIN [--keep DIR] [--only NAME[,NAME...]]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fuzz_models import MEMORY_LIMIT, refusal_problem, run_nxrt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
GENERATOR = os.path.join(HERE, "..", "..", "tools", "gen_hostile_models.py")
TIME_LIMIT = 30  # seconds per model; they take well under one


def check(nxrt, case):
    start = time.monotonic()
    try:
        p = run_nxrt(nxrt, case["model"], TIME_LIMIT)
    except subprocess.TimeoutExpired:
        return f"still running after {TIME_LIMIT} s", None
    took = time.monotonic() - start
    problem = refusal_problem(p)
    err = p.stderr.strip()
    if problem:
        return problem, err
    if p.returncode == 0:
        return "ran (exit 0): the hostile model was accepted", err
    if case["expect"].lower() not in err.lower():
        return f"the error does not say '{case['expect']}'", err
    return None, f"{took:.2f} s: {err}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nxrt", required=True)
    ap.add_argument("--keep", help="generate into this folder and keep it")
    ap.add_argument("--only", help="comma-separated case names")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = args.keep or os.path.join(tmp, "hostile")
        subprocess.run([sys.executable, GENERATOR, out], check=True)
        with open(os.path.join(out, "manifest.json")) as f:
            cases = json.load(f)
        if args.only:
            names = set(args.only.split(","))
            cases = [c for c in cases if c["name"] in names]
        failures = 0
        for case in cases:
            problem, detail = check(args.nxrt, case)
            if problem:
                failures += 1
                print(f"FAIL {case['name']} ({case['what']}): {problem}\n     stderr: {(detail or '')[:400]!r}")
            else:
                print(f"ok   {case['name']}: {detail[:200]}")
    print(f"{len(cases)} hostile models under a {MEMORY_LIMIT >> 30} GiB limit: "
          f"{len(cases) - failures} refused as expected, {failures} failed")
    return 1 if failures or not cases else 0


if __name__ == "__main__":
    sys.exit(main())
