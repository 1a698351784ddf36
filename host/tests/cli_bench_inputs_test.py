#!/usr/bin/python3
"""`nxrt bench` inputs for models with dynamic dims (issue 16), and tools/bench_vs_ort.py --model-dir.

On a Conv model with input x [N,3,H,W] and an Add model with inputs a, b [N,4]: --shape gives
the generated input its dims (checked in --json "inputs" and the text "inputs:" line); without
it each dynamic dim is 1; --input-dir and --input read TensorProto files, the rest generated;
the generated data is the lcg of ONNX Runtime's bench.js (checked through `nxrt run --shape`).
Mistakes (wrong rank, a fixed dim changed, unknown name, missing file or folder, malformed or
repeated --shape, a file disagreeing with --shape) exit 2 with an error naming the input, never
a crash. Last, bench_vs_ort.py --model-dir on both models, with --shape and --threads 1,2,
prints one table row per model (with ORT columns where the anchor is set up, else nxrt alone),
then conv's multiply-adds at the fed shape as a rate (add has none).

Usage: cli_bench_inputs_test.py --nxrt BIN   (NXRT_PLUGIN_PATH must hold the cpu plugin)
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH_VS_ORT = os.path.join(HERE, "..", "..", "tools", "bench_vs_ort.py")


def conv_model(path):
    """Relu(Conv(x, W)), x [N,3,H,W] (N, H, W dynamic), W 4x3x3x3, pads 1."""
    w = numpy_helper.from_array(np.full((4, 3, 3, 3), 0.1, np.float32), "W")
    g = helper.make_graph([helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])],
                          "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, "H", "W"])], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def add_model(path):
    """a + b, both [N,4]."""
    g = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "add",
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", 4]) for n in ("a", "b")],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def write_pb(path, name, array):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(array, name).SerializeToString())


def lcg(n, seed):
    """lcgFloat32 of ONNX Runtime's bench.js (common.js)."""
    out, s = np.empty(n, np.float32), seed
    for i in range(n):
        s = (s * 1664525 + 1013904223) & 0xFFFFFFFF
        out[i] = np.float32((s >> 8) / 16777216.0 * 2.0 - 1.0)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nxrt", required=True)
    nxrt = ap.parse_args().nxrt
    failures = 0

    def check(name, ok, detail):
        nonlocal failures
        print(f"{'ok  ' if ok else 'FAIL'} {name}" + ("" if ok else f": {detail}"))
        failures += 0 if ok else 1

    def nx(*args, timeout=120):
        return subprocess.run([nxrt, *args], capture_output=True, text=True, timeout=timeout)

    def bench_json(*args):
        p = nx("bench", *args, "--warmup", "0", "--iters", "2", "--json")
        try:
            return p, json.loads(p.stdout)
        except ValueError:
            return p, None

    with tempfile.TemporaryDirectory() as tmp:
        models = os.path.join(tmp, "models")
        os.makedirs(models)
        conv, add = os.path.join(models, "conv.onnx"), os.path.join(models, "add.onnx")
        conv_model(conv)
        add_model(add)

        p, j = bench_json(conv, "--shape", "x=2x3x16x8")
        check("bench --shape --json: inputs reports the shape fed", p.returncode == 0 and j is not None and j["inputs"] ==
              [{"name": "x", "shape": [2, 3, 16, 8], "dtype": "float32", "source": "generated"}], p.stdout + p.stderr)
        p, j = bench_json(conv)
        check("without --shape each dynamic dim is 1", p.returncode == 0 and j is not None and j["inputs"][0]["shape"] == [1, 3, 1, 1],
              p.stdout + p.stderr)
        p = nx("bench", conv, "--warmup", "0", "--iters", "2", "--shape", "x=1x3x5x7")
        check("bench text output has an inputs: line", p.returncode == 0 and "inputs: x float32 [1,3,5,7] (generated)" in p.stdout,
              p.stdout + p.stderr)

        data = os.path.join(tmp, "data")
        os.makedirs(data)
        write_pb(os.path.join(data, "input_0.pb"), "x", np.ones((3, 3, 4, 4), np.float32))
        p, j = bench_json(conv, "--input-dir", data)
        check("bench --input-dir reads input_0.pb", p.returncode == 0 and j is not None and j["inputs"][0]["shape"] == [3, 3, 4, 4]
              and j["inputs"][0]["source"].endswith("input_0.pb"), p.stdout + p.stderr)
        p, j = bench_json(conv, "--input-dir", data, "--shape", "x=3x3x4x4")
        check("a --shape that agrees with the file is accepted", p.returncode == 0, p.stdout + p.stderr)
        b_file = os.path.join(data, "b.pb")
        write_pb(b_file, "whatever", np.ones((5, 4), np.float32))
        p, j = bench_json(add, "--input", f"b={b_file}", "--shape", "a=5x4")
        check("bench --input NAME=FILE and a generated --shape input together", p.returncode == 0 and j is not None and
              [(i["name"], i["shape"], i["source"] == "generated") for i in j["inputs"]] == [("a", [5, 4], True), ("b", [5, 4], False)],
              p.stdout + p.stderr)

        # The generated data: input k is lcgFloat32(seed 1234 + k), as bench.js makes it.
        out = os.path.join(tmp, "out")
        p = nx("run", add, "--shape", "a=2x4", "--shape", "b=2x4", "--output-dir", out)
        ok = p.returncode == 0
        if ok:
            y = numpy_helper.to_array(onnx.load_tensor(os.path.join(out, "output_0.pb")))
            ok = y.shape == (2, 4) and np.array_equal(y.ravel(), lcg(8, 1234) + lcg(8, 1235))
        check("run --shape: generated inputs are bench.js's lcg data (a + b checked)", ok, p.stdout + p.stderr)

        errors = [
            ("wrong rank", [conv, "--shape", "x=2x3x16"], "input 'x' has rank 4"),
            ("a fixed dim changed", [conv, "--shape", "x=2x4x16x16"], "dim 1 of input 'x' is fixed at 3"),
            ("unknown name", [conv, "--shape", "z=1x3x8x8"], "no input named 'z' (its inputs: x)"),
            ("unknown --input name", [add, "--input", f"c={b_file}"], "no input named 'c' (its inputs: a, b)"),
            ("missing file", [conv, "--input", "x=" + os.path.join(tmp, "nope.pb")], "nope.pb"),
            ("missing folder", [conv, "--input-dir", os.path.join(tmp, "nope")], "does not exist"),
            ("a dim that is not a number", [conv, "--shape", "x=2xax3x3"], "dim 1 ('a') is not a non-negative integer"),
            ("no dims", [conv, "--shape", "x="], "no dims"),
            ("no name", [conv, "--shape", "=1x3"], "no NAME="),
            ("a negative dim", [conv, "--shape", "x=1x-3x2x2"], "dim 1 ('-3')"),
            ("an overflowing shape", [conv, "--shape", "x=99999999999x3x99999999999x99999999999"], "more than 2^50 elements"),
            ("--shape twice", [conv, "--shape", "x=1x3x2x2", "--shape", "x=1x3x4x4"], "--shape given twice for 'x'"),
            ("a file disagreeing with --shape", [conv, "--input-dir", data, "--shape", "x=1x3x4x4"], "--shape says 1x3x4x4 but"),
        ]
        for what, args, needle in errors:
            p = nx("bench", *args, "--warmup", "0", "--iters", "1")
            check(f"error: {what}: exit 2 naming it", p.returncode == 2 and "nxrt: error:" in p.stderr and needle in p.stderr,
                  f"exit {p.returncode}: {p.stderr.strip()[:400]}")

        # bench_vs_ort.py on the folder: one row per model, the fed shapes, both thread counts.
        p = subprocess.run([sys.executable, BENCH_VS_ORT, "--nxrt", nxrt, "--model-dir", models, "--shape", "x=1x3x32x32",
                            "--threads", "1,2", "--warmup", "0", "--iters", "2", "--rounds", "1"],
                           capture_output=True, text=True, timeout=300)
        lines = p.stdout.splitlines()
        # The latency table, then (after a blank line) the rates: conv's 4 x 32 x 32 outputs of 27 taps.
        blank = lines.index("") if "" in lines else len(lines)
        rows = {ln.split("|")[1].strip(): ln for ln in lines[:blank] if ln.startswith("| ") and not ln.startswith("| model")}
        rates = {ln.split("|")[1].strip(): ln.split("|")[2].strip() for ln in lines[blank:] if ln.startswith("| ")}
        check("bench_vs_ort.py: conv's multiply-adds in the rates table", rates.get("conv") == f"{4 * 32 * 32 * 27 / 1e9:.4g}"
              and "add" not in rates, p.stdout)
        ok = (p.returncode == 0 and set(rows) == {"add", "conv"} and "failed" not in p.stdout and "(2 thr)" in lines[
              next(i for i, ln in enumerate(lines) if ln.startswith("| model"))] and
              "inputs of conv: x float32 1x3x32x32" in p.stdout and "inputs of add: a float32 1x4, b float32 1x4" in p.stdout)
        check("bench_vs_ort.py --model-dir --shape --threads 1,2: a row per model, the fed shapes", ok, p.stdout + p.stderr)
        # The placement line, where the probe sits beside nxrt and ran: two figures, the last line.
        placement = [ln for ln in lines if ln.startswith("vCPU placement")]
        probe = os.path.join(os.path.dirname(nxrt), "nxrt_cpu_coherence")
        if placement or os.access(probe, os.X_OK):
            check("bench_vs_ort.py --threads 1,2: the vCPU placement line last, before and after",
                  not placement or (lines[-1] == placement[0] and " before, " in placement[0]), p.stdout)
        print(p.stdout)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
