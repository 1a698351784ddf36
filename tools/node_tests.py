#!/usr/bin/python3
"""Runs ONNX backend test cases through `nxrt run` on one EP and checks the outputs.

Usage: node_tests.py --nxrt BIN --ep EP --tests DIR [--kind node,simple] [--filter REGEX]
                     [--min-pass N] [--json OUT] [--jobs N] [--atol A]
                     [--env KEY=VALUE]... [--forbid-stderr TEXT]

A case whose nodes the EP does not all claim is `unsupported` (skipped); a claimed case
must match the expected outputs (same dtype and shape, rtol 1e-3, atol 1e-7, NaN == NaN).
bfloat16 inputs and outputs, which ONNX 1.12 stores as UINT16 files of the raw bits, are
relabelled as bfloat16 / compared bit for bit. The random-op cases named in
compare.RANDOM_CASES (Bernoulli, training Dropout), whose expected outputs numpy drew, are
checked by shape, dtype and distribution instead (compare.RANDOM_RULES) and reported as
`passed by distribution`, each on its own line.
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
import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import numpy_helper  # noqa: E402

UNSUPPORTED_MARKERS = ("are not supported by the requested EPs", "which nxrt does not support")


# Cases whose ONNX 1.12 data contradicts its own model, so no EP can pass them: reported as
# skipped with the reason (like a backend's list of broken upstream tests), never run.
BAD_DATA = {
    name: "ONNX 1.12 data: input 'like' is [1] but the model declares [3,4]"
    for name in ("test_castlike_BFLOAT16_to_FLOAT", "test_castlike_BFLOAT16_to_FLOAT_expanded",
                 "test_castlike_FLOAT_to_BFLOAT16", "test_castlike_FLOAT_to_BFLOAT16_expanded")
}

BFLOAT16 = 16
UINT16 = 4


def model_io(case):
    """What the runner needs of the case's model, read once: the indices of its bfloat16 inputs
    and outputs (ONNX 1.12 stores their test tensors as UINT16 TensorProtos holding the raw
    bfloat16 bits), and per graph output the TypeProto field its type sets ("tensor_type",
    "sequence_type", ...)."""
    m = onnx.load(os.path.join(case, "model.onnx"), load_external_data=False)
    init = {i.name for i in m.graph.initializer}
    ins = [v for v in m.graph.input if v.name not in init]
    pick = lambda vs: {k for k, v in enumerate(vs) if v.type.tensor_type.elem_type == BFLOAT16}
    kinds = [o.type.WhichOneof("value") or "tensor_type" for o in m.graph.output]
    return pick(ins), pick(m.graph.output), kinds


def relabel_bf16_inputs(data, bf16_inputs, tmp):
    """A copy of the input dir whose UINT16 files for bfloat16 inputs say BFLOAT16 (same bits)."""
    for path in sorted(glob.glob(os.path.join(data, "input_*.pb"))):
        t = onnx.load_tensor(path)
        k = int(re.search(r"input_(\d+)\.pb$", path).group(1))
        if k in bf16_inputs and t.data_type == UINT16:
            raw = numpy_helper.to_array(t).astype("<u2").tobytes()
            t = onnx.helper.make_tensor(t.name, BFLOAT16, list(t.dims), raw, raw=True)
        with open(os.path.join(tmp, os.path.basename(path)), "wb") as f:
            f.write(t.SerializeToString())
    return tmp


def load_output(path, kind, want_uint16_bits):
    """An output file (compare.load's value for its kind); a bfloat16 tensor as its raw uint16
    bits when the expected file stores bits (ONNX 1.12), so the two compare exactly."""
    if want_uint16_bits:
        t = onnx.load_tensor(path)
        if t.data_type == BFLOAT16:
            return np.frombuffer(t.raw_data, dtype="<u2").reshape(list(t.dims)).astype(np.uint16)
    return compare.load(path, kind)


def run_case(nxrt, ep, case, rtol, atol, extra, env, forbid):
    name = os.path.basename(case)
    if name in BAD_DATA:
        return name, "unsupported", BAD_DATA[name]
    results = []
    bf16_inputs, bf16_outputs, kinds = model_io(case)
    for data in sorted(glob.glob(os.path.join(case, "test_data_set_*"))):
        with tempfile.TemporaryDirectory() as out, tempfile.TemporaryDirectory() as relabeled:
            if bf16_inputs:
                data_in = relabel_bf16_inputs(data, bf16_inputs, relabeled)
            else:
                data_in = data
            cmd = [nxrt, "run", os.path.join(case, "model.onnx"), "--ep", ep, "--input-dir", data_in, "--output-dir", out] + extra
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
            rule = compare.RANDOM_CASES.get(name)
            if rule:
                why = random_case_mismatch(rule, data, out, rtol, atol)
                if why:
                    return name, "fail", f"by distribution ({compare.RANDOM_RULES[rule]}): {why}"
                results.append("pass")
                continue
            for want_path in sorted(glob.glob(os.path.join(data, "output_*.pb"))):
                k = int(os.path.basename(want_path)[len("output_"):-len(".pb")])
                kind = kinds[k] if k < len(kinds) else "tensor_type"
                got_path = os.path.join(out, os.path.basename(want_path))
                if not os.path.exists(got_path):
                    return name, "fail", f"{os.path.basename(want_path)} was not written"
                want = compare.load(want_path, kind)
                bits = k in bf16_outputs and kind == "tensor_type" and want.dtype == np.uint16
                why = compare.mismatch(load_output(got_path, kind, bits), want, rtol, atol)
                if why:
                    return name, "fail", f"{os.path.basename(want_path)}: {why}"
            results.append("pass")
    if name in compare.RANDOM_CASES and results:
        return name, "pass", f"passed by distribution: {compare.RANDOM_RULES[compare.RANDOM_CASES[name]]}"
    return name, "pass" if results else "fail", "" if results else "no test_data_set"


def random_case_mismatch(rule, data, out, rtol, atol):
    """Why the outputs in `out` do not fit the random-op rule for the data set `data` (None: they do)."""
    def pb_index(path):
        return int(os.path.basename(path).split("_")[1].split(".")[0])
    inputs = [compare.load(p) for p in sorted(glob.glob(os.path.join(data, "input_*.pb")), key=pb_index)]
    want_paths = sorted(glob.glob(os.path.join(data, "output_*.pb")), key=pb_index)
    got = []
    for w in want_paths:
        g = os.path.join(out, os.path.basename(w))
        if not os.path.exists(g):
            return f"{os.path.basename(w)} was not written"
        got.append(compare.load(g))
    return compare.random_mismatch(rule, inputs, got, [compare.load(w) for w in want_paths], rtol, atol)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nxrt", required=True)
    ap.add_argument("--ep", required=True)
    ap.add_argument("--tests", required=True)
    ap.add_argument("--kind", default="node,simple", help="comma-separated folders of DIR: node (922 cases), simple (23 models)")
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
    kinds = [k for k in args.kind.split(",") if k]
    cases = sorted(d for k in kinds for d in glob.glob(os.path.join(args.tests, k, "*")) if os.path.isdir(d))
    if args.filter:
        cases = [c for c in cases if re.search(args.filter, os.path.basename(c))]
    if not cases:
        print(f"node_tests: no cases under {args.tests}/{{{args.kind}}}", file=sys.stderr)
        return 1
    extra = ["--threads", args.threads] + (["--opt", args.opt] if args.opt is not None else [])
    env = dict(os.environ)
    env.update(kv.split("=", 1) for kv in args.env)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda c: run_case(args.nxrt, args.ep, c, args.rtol, args.atol, extra, env, args.forbid_stderr), cases))
    counts = {"pass": 0, "fail": 0, "unsupported": 0}
    by_distribution = 0
    for name, verdict, why in results:
        counts[verdict] += 1
        if verdict == "fail":
            print(f"FAIL {name}: {why}")
        elif verdict == "unsupported":  # every case not passed is listed, with its reason
            print(f"SKIP {name}: {why}")
        elif verdict == "pass" and name in compare.RANDOM_CASES:
            by_distribution += 1
            print(f"PASS {name}: {why}")
    passed = sorted(n for n, v, _ in results if v == "pass")
    print(f"{args.ep}: {len(cases)} cases: {counts['pass']} passed ({by_distribution} of them by distribution, "
          f"random ops), {counts['fail']} failed, {counts['unsupported']} unsupported (not claimed)")
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
