#!/usr/bin/python3
"""Runs the five bench models through `nxrt run` and compares with ONNX Runtime.

Usage: model_tests.py --nxrt BIN --ep EP --cache DIR [--models mlp,cnn,...]
                      [--reference auto|ort|numpy|ep:NAME] [--rtol R] [--atol A]

Reference outputs come from ONNX Runtime 1.30 (../shared/ort/bench.js --dump) when the
anchor toolkit is present (auto/ort), from tools/reference.py (numpy, float64) when it is
not (auto/numpy), or from another nxrt EP (ep:cpu). The script says which it used.
Inputs follow bench.js: lcgFloat32 with seed 1234 + input index.
Last line: `N passed, N failed`.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare  # noqa: E402
import reference  # noqa: E402

MODELS = ["mlp", "cnn", "transformer", "tiny_ops", "dwconv"]
# Per-model absolute tolerance where float32 accumulation order alone exceeds the default.
# dwconv (17 MobileNetV2 blocks, outputs up to ~15): ONNX Runtime and nxrt each differ from
# the float64 reference by up to ~5e-4 (measured with this script's accuracy report), so
# two correct float32 engines differ by up to ~8e-4 near zero.
ATOL_OVERRIDES = {"dwconv": 2e-3}
SHARED_ORT = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "ort"))


def lcg_fast(n, seed):
    # Vectorised lcgFloat32: s_k = a^k s_0 + c (a^k - 1)/(a - 1) mod 2^32, computed by doubling.
    a, c = 1664525, 1013904223
    s = np.empty(n, np.uint64)
    state = seed & 0xFFFFFFFF
    block = min(n, 4096)
    for i in range(block):
        state = (state * a + c) & 0xFFFFFFFF
        s[i] = state
    done = block
    ak, ck = 1, 0
    for _ in range(block):  # (ak, ck): the map applied `block` times
        ak, ck = (ak * a) & 0xFFFFFFFF, (ck * a + c) & 0xFFFFFFFF
    while done < n:
        take = min(block, n - done)
        s[done:done + take] = (s[done - block:done - block + take] * ak + ck) & 0xFFFFFFFF
        done += take
    return ((s >> 8).astype(np.float64) / 16777216 * 2 - 1).astype(np.float32)


def ort_available():
    ort_dir = os.environ.get("NXRT_ORT_DIR", os.path.expanduser("~/.cache/nxrt-anchor/ort"))
    return (os.path.exists(os.path.join(SHARED_ORT, "bench.js")) and shutil.which("node")
            and os.path.isdir(os.path.join(ort_dir, "node_modules", "onnxruntime-node")))


def make_case(model_path, case_dir, ref, nxrt):
    """Writes case_dir/test_data_set_0/{input,output}_K.pb with the chosen reference."""
    data = os.path.join(case_dir, "test_data_set_0")
    if ref == "ort":
        subprocess.run(["node", os.path.join(SHARED_ORT, "bench.js"), "--model", model_path, "--threads", "1",
                        "--warmup", "0", "--iters", "1", "--dump", case_dir], check=True, capture_output=True)
        return
    os.makedirs(data, exist_ok=True)
    m = onnx.load(model_path, load_external_data=False)
    inits = {t.name for t in m.graph.initializer}
    inputs = {}
    for k, vi in enumerate(i for i in m.graph.input if i.name not in inits):
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        arr = lcg_fast(int(np.prod(shape)), 1234 + k).reshape(shape)
        inputs[vi.name] = arr
        onnx.save_tensor(numpy_helper.from_array(arr, vi.name), os.path.join(data, f"input_{k}.pb"))
    if ref == "numpy":
        outs = reference.evaluate(model_path, inputs)
        for k, o in enumerate(m.graph.output):
            onnx.save_tensor(numpy_helper.from_array(outs[o.name], o.name), os.path.join(data, f"output_{k}.pb"))
    else:  # ep:NAME
        subprocess.run([nxrt, "run", model_path, "--ep", ref[3:], "--input-dir", data, "--output-dir", data],
                       check=True, capture_output=True)


def accuracy_vs_float64(name, model, data, out):
    """With ORT as the reference, also measure both engines against the float64 oracle:
    nxrt may not be more than twice as far from it as ONNX Runtime is."""
    m = onnx.load(model, load_external_data=False)
    inits = {t.name for t in m.graph.initializer}
    names = [i.name for i in m.graph.input if i.name not in inits]
    inputs = {n: compare.load(os.path.join(data, f"input_{k}.pb")) for k, n in enumerate(names)}
    truth = reference.evaluate(model, inputs)
    for k, o in enumerate(m.graph.output):
        want = truth[o.name].astype(np.float64)
        ours = np.abs(compare.load(os.path.join(out, f"output_{k}.pb")).astype(np.float64) - want).max()
        ort = np.abs(compare.load(os.path.join(data, f"output_{k}.pb")).astype(np.float64) - want).max()
        print(f"     {name}: max |error| vs float64: nxrt {ours:.3g}, onnxruntime {ort:.3g}")
        if ours > 2 * ort + 1e-6:
            return f"output {k} is {ours:.3g} from the float64 reference, more than twice ONNX Runtime's {ort:.3g}"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nxrt", required=True)
    ap.add_argument("--ep", required=True)
    ap.add_argument("--cache", required=True)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--reference", default="auto")
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--atol", type=float, default=1e-5)
    ap.add_argument("--threads", default="0")
    ap.add_argument("--opt", help="graph optimization level (nxrt run --opt), default: nxrt's")
    ap.add_argument("--via-optimize", action="store_true",
                    help="run the model `nxrt optimize` wrote (at --opt) instead of the original, with --opt 0")
    args = ap.parse_args()
    ref = args.reference
    if ref == "auto":
        ref = "ort" if ort_available() else "numpy"
        if ref == "numpy":
            print("model_tests: ONNX Runtime anchor (../shared/ort, set up by its setup.sh) is absent: "
                  "comparing with the numpy reference instead")
    if ref == "ort" and not ort_available():
        print("model_tests: --reference ort but the ONNX Runtime anchor is not set up", file=sys.stderr)
        return 1
    print(f"model_tests: reference = {'ONNX Runtime 1.30' if ref == 'ort' else ref}")
    models_dir = os.path.join(args.cache, "bench-models")
    names = [n for n in args.models.split(",") if n]
    subprocess.run([sys.executable, os.path.join(HERE, "gen_bench_models.py"), models_dir, "--only"] + names,
                   check=True, capture_output=True)
    passed = failed = 0
    cleanup = []
    for name in names:
        model = os.path.join(models_dir, name + ".onnx")
        case = os.path.join(args.cache, f"ref-{ref.replace(':', '-')}", name)
        if not os.path.exists(os.path.join(case, "test_data_set_0", "output_0.pb")):
            # Made aside and renamed into place: ctest runs several of these scripts at once.
            os.makedirs(os.path.dirname(case), exist_ok=True)
            tmp_case = tempfile.mkdtemp(prefix=name + ".", dir=os.path.dirname(case))
            make_case(model, tmp_case, ref, args.nxrt)
            shutil.rmtree(case, ignore_errors=True)
            try:
                os.rename(tmp_case, case)
            except OSError:  # another run put its (identical) case there first
                shutil.rmtree(tmp_case, ignore_errors=True)
        data = os.path.join(case, "test_data_set_0")
        # Per run: the variants (EP, --opt, --threads) run in parallel under ctest.
        out_root = os.path.join(args.cache, "out", args.ep.replace(",", "_"))
        os.makedirs(out_root, exist_ok=True)
        out = tempfile.mkdtemp(prefix=name + ".", dir=out_root)
        cleanup.append(out)
        opt = ["--opt", args.opt] if args.opt is not None else []
        if args.via_optimize:
            written = os.path.join(out, f"{name}.opt{args.opt or ''}.onnx")
            os.makedirs(os.path.dirname(written), exist_ok=True)
            p = subprocess.run([args.nxrt, "optimize", model, "-o", written] + opt, capture_output=True, text=True, timeout=600)
            if p.returncode != 0:
                print(f"FAIL {name}: nxrt optimize exited {p.returncode}: {p.stderr.strip()}")
                failed += 1
                continue
            run_model, opt = written, ["--opt", "0"]
        else:
            run_model = model
        p = subprocess.run([args.nxrt, "run", run_model, "--ep", args.ep, "--threads", args.threads, "--input-dir", data,
                            "--output-dir", out] + opt, capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            print(f"FAIL {name}: nxrt exited {p.returncode}: {p.stderr.strip()}")
            failed += 1
            continue
        atol = max(args.atol, ATOL_OVERRIDES.get(name, 0.0))
        why = None
        k = 0
        while os.path.exists(os.path.join(data, f"output_{k}.pb")):
            why = why or compare.mismatch(compare.load(os.path.join(out, f"output_{k}.pb")),
                                          compare.load(os.path.join(data, f"output_{k}.pb")), args.rtol, atol)
            k += 1
        if k == 0:
            why = "no reference outputs"
        if not why and ref == "ort":
            why = accuracy_vs_float64(name, model, data, out)
        if why:
            print(f"FAIL {name}: {why}")
            failed += 1
        else:
            print(f"ok   {name} ({args.ep} vs {ref}, rtol {args.rtol}, atol {atol})")
            passed += 1
    print(f"{passed} passed, {failed} failed")
    for d in cleanup:
        shutil.rmtree(d, ignore_errors=True)
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
