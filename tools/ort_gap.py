#!/usr/bin/python3
"""Checks that nxrt passes every ONNX backend case ONNX Runtime passes (issue 10's bar).

Usage: ort_gap.py --nxrt-json NXRT.json --tests DIR [--shared DIR] [--ort-dir DIR]

NXRT.json is what `tools/node_tests.py --json` wrote for one EP over DIR. ONNX Runtime 1.30
(the anchor in ../shared, onnxruntime-node) is run over the same DIR with
`../shared/ort/node_tests.js`. Prints both counts, the cases ORT passes and nxrt does not
(each a failure), and how many nxrt passes that ORT does not. Exit 0 when there is no gap,
1 when there is, 77 (a ctest SKIP) when ../shared or its ORT install is absent.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nxrt-json", required=True)
    ap.add_argument("--tests", required=True)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--shared", default=os.path.join(here, "..", "..", "shared"))
    ap.add_argument("--ort-dir", default=os.environ.get("NXRT_ORT_DIR", os.path.expanduser("~/.cache/nxrt-anchor/ort")))
    a = ap.parse_args()
    script = os.path.join(a.shared, "ort", "node_tests.js")
    if not os.path.exists(script) or not shutil.which("node") or not os.path.isdir(os.path.join(a.ort_dir, "node_modules")):
        print(f"SKIP: the ONNX Runtime anchor is absent ({script} with an npm install in {a.ort_dir}); "
              "nothing to compare with")
        return SKIP
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "ort.json")
        p = subprocess.run(["node", script, a.tests, "--json", out, "--ort-dir", a.ort_dir], capture_output=True, text=True)
        if not os.path.exists(out):
            print(f"ONNX Runtime's runner failed (exit {p.returncode}):\n{p.stdout}{p.stderr}")
            return 1
        ort = json.load(open(out))
    nx = json.load(open(a.nxrt_json))
    verdict = {r["case"]: r["verdict"] for r in nx["results"]}
    ort_pass = {c["name"] for c in ort["cases"] if c["status"] == "pass"}
    nx_pass = {k for k, v in verdict.items() if v.startswith("pass")}
    gap = sorted(ort_pass - nx_pass)
    print(f"ONNX Runtime {ort.get('version', '?')}: {len(ort_pass)} of {len(ort['cases'])} cases pass")
    print(f"nxrt --ep {nx.get('ep', '?')}: {len(nx_pass)} of {len(verdict)} cases pass")
    for k in gap:
        print(f"GAP {k}: ONNX Runtime passes it, nxrt: {verdict.get(k, 'not run')}")
    print(f"{len(gap)} cases ONNX Runtime passes and nxrt does not; nxrt passes {len(nx_pass - ort_pass)} that ONNX Runtime does not")
    return 1 if gap else 0


if __name__ == "__main__":
    sys.exit(main())
