#!/usr/bin/python3
"""The CPU plugin's fused groups end to end, with which groups ran fused (from `nxrt bench
--profile`), including chains that must not fuse:
  * MatMul -> Add(bias) [-> Add(residual)] in one GEMM store, against numpy (float64): bias
    not over the last axis, a broadcast residual, an intermediate used twice;
  * the exact-Gelu chain Div -> Erf -> Add -> Mul -> Mul in one pass (an extra output of the
    Erf keeps it unfused, for comparison): within 1e-5 of numpy's float64 Gelu, relatively too,
    down to the far negative tail.

Usage: fused_groups_e2e.py --nxrt PATH/nxrt
"""
import argparse
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nxrt_run import kernels_ran, run  # noqa: E402


def model(bias_shape, residual_shape, second_use=False):
    """y = (x @ W + B) + R, with x [2,5,7], W [7,6]; R a graph input. second_use: the biased
    value is also a graph output (then the residual Add must not swallow it)."""
    rng = np.random.default_rng(7)
    W = rng.standard_normal((7, 6)).astype(np.float32)
    B = rng.standard_normal(bias_shape).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "W"], ["mm"], name="mm"),
             helper.make_node("Add", ["mm", "B"], ["biased"], name="bias_add"),
             helper.make_node("Add", ["biased", "r"], ["y"], name="res_add")]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if second_use:
        outputs.append(helper.make_tensor_value_info("biased", TensorProto.FLOAT, None))
    g = helper.make_graph(nodes, "mmfuse",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5, 7]),
                           helper.make_tensor_value_info("r", TensorProto.FLOAT, list(residual_shape))],
                          outputs, [numpy_helper.from_array(W, "W"), numpy_helper.from_array(B, "B")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m = onnx.shape_inference.infer_shapes(m)
    onnx.checker.check_model(m)
    return m, W, B


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nxrt", required=True)
    nxrt = ap.parse_args().nxrt
    failures = 0
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 5, 7)).astype(np.float32)
    cases = [  # bias shape, residual shape, second use, the kernels expected
        ("bias [6], residual", (6,), (2, 5, 6), False, ["MatMul+Add+Add"]),
        ("bias [1,1,6], residual", (1, 1, 6), (2, 5, 6), False, ["MatMul+Add+Add"]),
        ("bias [5,1] (not over the last axis)", (5, 1), (2, 5, 6), False, ["Add", "MatMul"]),
        ("residual broadcast [6]", (6,), (6,), False, ["Add", "MatMul+Add"]),
        ("biased value also a graph output", (6,), (2, 5, 6), True, ["Add", "MatMul+Add"]),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for k, (what, bs, rs, second, want_groups) in enumerate(cases):
            m, W, B = model(bs, rs, second)
            r = rng.standard_normal(rs).astype(np.float32)
            outs, p = run(nxrt, m, [x, r], tmp, f"case{k}")
            if outs is None:
                print(f"FAIL {what}: nxrt failed: {p.stderr.strip()}")
                failures += 1
                continue
            want = (x.astype(np.float64) @ W + B) + r
            err = float(np.abs(outs[0] - want).max())
            groups = kernels_ran(nxrt, os.path.join(tmp, f"case{k}", "model.onnx"), os.path.join(tmp, f"case{k}"))
            ok = err <= 1e-5 and groups == sorted(want_groups)
            print(f"{'ok  ' if ok else 'FAIL'} {what}: max |err| {err:.2g}, kernels {groups} (want {sorted(want_groups)})")
            failures += 0 if ok else 1
        failures += gelu_cases(nxrt, tmp)
    total = len(cases) + 2
    print(f"{total - failures} passed, {failures} failed")
    return 1 if failures else 0


def gelu_model(keep_erf):
    nodes = [helper.make_node("Div", ["x", "sqrt2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["a"]), helper.make_node("Mul", ["x", "a"], ["m"]),
             helper.make_node("Mul", ["m", "half"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 1000])]
    if keep_erf:
        outputs.append(helper.make_tensor_value_info("e", TensorProto.FLOAT, [3, 1000]))
    consts = [numpy_helper.from_array(np.array(v, np.float32), n)
              for n, v in (("sqrt2", 1.4142135), ("one", 1.0), ("half", 0.5))]
    g = helper.make_graph(nodes, "gelu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 1000])],
                          outputs, consts)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    return m


def gelu_cases(nxrt, tmp):
    """Returns the number of failures (of 2 checks)."""
    import math
    x = np.linspace(-8, 8, 3000, dtype=np.float32).reshape(3, 1000)
    x[0, 0] = np.nan
    fused, p1 = run(nxrt, gelu_model(False), [x], tmp, "gelu_fused")
    plain, p2 = run(nxrt, gelu_model(True), [x], tmp, "gelu_plain")
    if fused is None or plain is None:
        print(f"FAIL gelu: nxrt failed: {(p1.stderr + p2.stderr).strip()}")
        return 2
    failures = 0
    g1 = kernels_ran(nxrt, os.path.join(tmp, "gelu_fused", "model.onnx"), os.path.join(tmp, "gelu_fused"))
    g2 = kernels_ran(nxrt, os.path.join(tmp, "gelu_plain", "model.onnx"), os.path.join(tmp, "gelu_plain"))
    ok = g1 == ["Div+Erf+Add+Mul+Mul"] and "Div+Erf+Add+Mul+Mul" not in (g2 or [])
    print(f"{'ok  ' if ok else 'FAIL'} gelu chain fused: kernels {g1} / {g2}")
    failures += 0 if ok else 1
    xd = x.astype(np.float64)
    want = 0.5 * xd * np.vectorize(math.erfc)(-xd / math.sqrt(2))
    err = np.abs(fused[0] - want)
    rel = float(np.nanmax(err / np.maximum(np.abs(want), 1e-300)))
    rel_plain = float(np.nanmax(np.abs(plain[0] - want) / np.maximum(np.abs(want), 1e-300)))
    # The fused pass computes 1 + erf(u) as erfc(-u): relative accuracy even in the far
    # negative tail, where node by node (1 + erf) cancels to 0.
    ok = float(np.nanmax(err)) <= 1e-5 and rel <= 1e-5 and np.isnan(fused[0][0, 0]) and np.isnan(plain[0][0, 0])
    print(f"{'ok  ' if ok else 'FAIL'} gelu chain vs float64: max |err| {float(np.nanmax(err)):.2g}, max relative "
          f"{rel:.2g} (node by node {rel_plain:.2g}), NaN kept: {bool(np.isnan(fused[0][0, 0]))}")
    failures += 0 if ok else 1
    return failures


if __name__ == "__main__":
    sys.exit(main())
