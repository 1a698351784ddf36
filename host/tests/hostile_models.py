#!/usr/bin/python3
"""Hostile models (tools/gen_hostile_models.py) through `nxrt run --ep cpu`, each under a
4 GiB address-space limit and a time limit. Every one must be refused: exit 1 or 2, one
line 'nxrt: error: ...' containing the case's expected substring (the error names the
problem), no signal, no sanitizer report, no hang.

Usage: hostile_models.py --nxrt BIN [--keep DIR] [--only NAME[,NAME...]] [--no-address-limit]

--no-address-limit (tools/sanitize.sh): an AddressSanitizer build cannot start under the limit
(ASan reserves terabytes of shadow address space), so each run gets none, and the cases whose
refusal depends on the limit (NEEDS_ADDRESS_LIMIT: without it, they would allocate what the
machine has) are reported as SKIP with that reason, never as passed.
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
# Cases refused only because an allocation fails under the 4 GiB address-space limit.
NEEDS_ADDRESS_LIMIT = {"input_claims_terabytes", "runtime_shape_terabytes"}


def check(nxrt, case, address_limit):
    start = time.monotonic()
    try:
        p = run_nxrt(nxrt, case["model"], TIME_LIMIT, address_limit)
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
    ap.add_argument("--no-address-limit", action="store_true",
                    help="no 4 GiB address-space limit (AddressSanitizer builds); skips NEEDS_ADDRESS_LIMIT cases")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = args.keep or os.path.join(tmp, "hostile")
        subprocess.run([sys.executable, GENERATOR, out], check=True)
        with open(os.path.join(out, "manifest.json")) as f:
            cases = json.load(f)
        stale = NEEDS_ADDRESS_LIMIT - {c["name"] for c in cases}
        if stale:
            print(f"FAIL NEEDS_ADDRESS_LIMIT names cases the generator no longer makes: {sorted(stale)}")
            return 1
        if args.only:
            names = set(args.only.split(","))
            cases = [c for c in cases if c["name"] in names]
        failures = skipped = 0
        for case in cases:
            if args.no_address_limit and case["name"] in NEEDS_ADDRESS_LIMIT:
                skipped += 1
                print(f"SKIP {case['name']}: refused only under the 4 GiB address-space limit, which "
                      "--no-address-limit leaves out (AddressSanitizer reserves terabytes of shadow memory)")
                continue
            problem, detail = check(args.nxrt, case, not args.no_address_limit)
            if problem:
                failures += 1
                print(f"FAIL {case['name']} ({case['what']}): {problem}\n     stderr: {(detail or '')[:400]!r}")
            else:
                print(f"ok   {case['name']}: {detail[:200]}")
    limit = "no address-space limit" if args.no_address_limit else f"a {MEMORY_LIMIT >> 30} GiB limit"
    print(f"{len(cases)} hostile models under {limit}: "
          f"{len(cases) - failures - skipped} refused as expected, {failures} failed, {skipped} skipped")
    return 1 if failures or not cases else 0


if __name__ == "__main__":
    sys.exit(main())
