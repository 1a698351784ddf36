#!/usr/bin/python3
"""Runs the four "real models" (tools/gen_real_models.py), or with --set int8 the INT8 bench
models (tools/gen_int8_models.py), once through `nxrt run` and compares their outputs with ONNX
Runtime 1.30's on the same inputs.

Usage: real_model_tests.py --nxrt BIN --dir DIR [--set real|int8] [--ep cpu] [--models NAME,...]
                           [--threads N] [--rtol R] [--atol A] [--ort DIR]

DIR receives the models (regenerated only when the generator version changes) and, per model,
ORT's inputs and outputs (DIR/ref-ort/NAME/test_data_set_0, written by ../shared/ort/bench.js
--dump on every run, so they always match the model; --ort DIR: the anchor toolkit, default
../shared/ort beside the checkout). The numpy oracle (tools/reference.py)
lacks Resize, Pad, Slice, Sigmoid, HardSwish, HardSigmoid, so without the ONNX Runtime anchor
the test exits 77 (ctest SKIP). Tolerances are model_tests.py's (rtol 1e-3, atol 1e-5) except
where an output is so small that atol alone would accept anything (see ATOL_OVERRIDES).
INT8 models: two correct INT8 engines differ where a value lies on a rounding boundary of a
quantization step and the difference travels through later layers, so the rule is the one of
INT8 accuracy checks: max |nxrt - reference| <= --int8-tol (default 1%) of max |reference|
(ONNX Runtime is 0.3-0.5% from the float64 reference of tools/reference.py on both, measured);
a wrong scale, zero point or rounding mode is far outside it. Without the ONNX Runtime anchor
they are compared with tools/reference.py (which has every op they use), so they never SKIP.
Last line: `N passed, N failed`.
"""
import argparse
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare  # noqa: E402
import gen_int8_models  # noqa: E402
import gen_real_models  # noqa: E402
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import reference  # noqa: E402
from onnx import numpy_helper  # noqa: E402
from bench_vs_ort import ort_ready  # noqa: E402
from model_tests import SHARED_ORT  # noqa: E402

SKIP = 77
# ocr_crnn's output is a Softmax over 6625 characters: every value is below 3e-4, so the
# default atol 1e-5 would be a 5% tolerance. nxrt and ORT differ by ~1e-9 there (measured).
ATOL_OVERRIDES = {"ocr_crnn": 1e-8}


def make_reference(model, sidecar, case, ort):
    """ONNX Runtime's inputs and outputs for `model` in case/test_data_set_0; None or why not."""
    p = subprocess.run(["node", os.path.join(ort, "bench.js"), "--model", model, "--inputs-from", sidecar,
                        "--threads", "1", "--warmup", "0", "--iters", "1", "--dump", case],
                       capture_output=True, text=True, timeout=600)
    return None if p.returncode == 0 else f"ONNX Runtime (bench.js --dump) exited {p.returncode}: {p.stderr.strip()}"


def make_numpy_reference(model, case):
    """The same inputs as bench.js (lcg, seed 1234 + k) and tools/reference.py's outputs."""
    from model_tests import lcg_fast
    m = onnx.load(model, load_external_data=False)
    inits = {t.name for t in m.graph.initializer}
    data = os.path.join(case, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    feeds = {}
    for k, i in enumerate(x for x in m.graph.input if x.name not in inits):
        shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
        feeds[i.name] = lcg_fast(int(np.prod(shape)), 1234 + k).reshape(shape)
        onnx.save_tensor(numpy_helper.from_array(feeds[i.name], i.name), os.path.join(data, f"input_{k}.pb"))
    for k, (name, v) in enumerate(reference.evaluate(model, feeds).items()):
        onnx.save_tensor(numpy_helper.from_array(v, name), os.path.join(data, f"output_{k}.pb"))
    return None


def int8_error(got, want):
    """(max |got - want|, max |want|); None when dtype or shape differ."""
    if got.dtype != want.dtype or got.shape != want.shape:
        return None
    err = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) if got.size else 0.0
    return err, float(np.max(np.abs(want.astype(np.float64)))) if want.size else 0.0


def int8_mismatch(got, want, tol):
    """None when max |got - want| <= tol * max |want| (same dtype and shape), else why not."""
    e = int8_error(got, want)
    if e is None:
        return f"{got.dtype} {list(got.shape)} != expected {want.dtype} {list(want.shape)}"
    err, scale = e
    if not np.isfinite(err) or err > tol * scale:
        return f"max error {err:.4g} is {err / max(scale, 1e-30):.2%} of max |reference| {scale:.4g} (limit {tol:.2%})"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nxrt", required=True)
    ap.add_argument("--dir", required=True, help="where the models and ORT's reference outputs go")
    ap.add_argument("--ep", default="cpu")
    ap.add_argument("--set", default="real", choices=["real", "int8"], help="which generated models")
    ap.add_argument("--models", default=None, help="default: all of the set")
    ap.add_argument("--int8-tol", type=float, default=0.01, help="INT8: max error as a fraction of max |reference|")
    ap.add_argument("--threads", default="0")
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--atol", type=float, default=1e-5)
    ap.add_argument("--ort", default=SHARED_ORT, help="the anchor toolkit folder holding bench.js")
    args = ap.parse_args()
    gen = gen_int8_models if args.set == "int8" else gen_real_models
    names = [n for n in (args.models or ",".join(gen.MODELS)).split(",") if n]
    unknown = [n for n in names if n not in gen.MODELS]
    if unknown or not names:
        print(f"real_model_tests: unknown model(s) {unknown}; known: {', '.join(gen.MODELS)}", file=sys.stderr)
        return 2
    use_ort = ort_ready(args.ort)
    if not use_ort and args.set == "real":
        print("SKIP: the ONNX Runtime anchor (../shared/ort with its node_modules) is absent, and "
              "tools/reference.py does not cover these models' ops (Resize, Pad, Slice, Sigmoid, HardSwish)")
        return SKIP
    print("real_model_tests: reference = " + (f"ONNX Runtime 1.30 ({args.ort})" if use_ort else
          "tools/reference.py (float64 numpy; the ONNX Runtime anchor is absent)"))
    os.makedirs(args.dir, exist_ok=True)
    passed = failed = 0
    for name in names:
        gen.generate(name, args.dir, force=False)
        model = os.path.join(args.dir, name + ".onnx")
        case = os.path.join(args.dir, "ref-ort" if use_ort else "ref-numpy", name)
        shutil.rmtree(case, ignore_errors=True)
        why = make_reference(model, os.path.join(args.dir, name + ".json"), case, args.ort) if use_ort else \
            make_numpy_reference(model, case)
        if why:
            print(f"FAIL {name}: {why}")
            failed += 1
            continue
        data = os.path.join(case, "test_data_set_0")
        out = os.path.join(args.dir, "out", args.ep.replace(",", "_"), name)
        shutil.rmtree(out, ignore_errors=True)
        p = subprocess.run([args.nxrt, "run", model, "--ep", args.ep, "--threads", args.threads,
                            "--input-dir", data, "--output-dir", out], capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            print(f"FAIL {name}: nxrt exited {p.returncode}: {p.stderr.strip()}")
            failed += 1
            continue
        atol = ATOL_OVERRIDES.get(name, args.atol)
        why, k = None, 0
        while os.path.exists(os.path.join(data, f"output_{k}.pb")):
            got = os.path.join(out, f"output_{k}.pb")
            if not os.path.exists(got):
                why = why or f"nxrt wrote no output_{k}.pb"
            else:
                want = compare.load(os.path.join(data, f"output_{k}.pb"))
                why = why or (int8_mismatch(compare.load(got), want, args.int8_tol) if args.set == "int8" else
                              compare.mismatch(compare.load(got), want, args.rtol, atol))
            k += 1
        if k == 0:
            why = "ONNX Runtime wrote no reference outputs"
        if why:
            print(f"FAIL {name}: {why}")
            failed += 1
        else:
            rule = f"rtol {args.rtol}, atol {atol}"
            if args.set == "int8":
                err, scale = int8_error(compare.load(os.path.join(out, "output_0.pb")),
                                        compare.load(os.path.join(data, "output_0.pb")))
                rule = f"max error {err / max(scale, 1e-30):.2%} of max |ref|, limit {args.int8_tol:.0%}"
            print(f"ok   {name} ({args.ep} vs {'ONNX Runtime' if use_ort else 'numpy reference'}, {rule})")
            passed += 1
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
