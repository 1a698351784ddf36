#!/usr/bin/python3
"""The cpu plugin's kernel descriptions (ABI 2.5 kernel_describe) through `nxrt inspect --json`:
each conv layer names the algorithm conv2d will run for its shape, a fused group is described
on its first node, MatMul names its GEMM micro-kernel, and the micro-kernel follows
NXRT_CPU_ISA. The names checked are the ones conv_describe (conv.cpp) and gemm_kernel_name
(gemm.cpp) give, so a change in the per-layer choice or a description that drifts from it fails.

Usage: kernel_descriptions_e2e.py --nxrt BIN   (NXRT_PLUGIN_PATH must hold the cpu plugin)
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


def conv(name, x, cin, cout, k, hw, group=1, stride=1, dilation=1, pad=None, relu=False, batch=1):
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((cout, cin // group, k, k)).astype(np.float32), "w")
    p = dilation * (k // 2) if pad is None else pad
    nodes = [helper.make_node("Conv", ["x", "w"], ["c" if relu else "y"], name="conv", group=group,
                              strides=[stride, stride], dilations=[dilation, dilation], pads=[p] * 4)]
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["y"], name="relu"))
    o = (hw + 2 * p - dilation * (k - 1) - 1) // stride + 1
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, cin, hw, hw])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, cout, o, o])], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def qdq_conv(c, hw):
    """DequantizeLinear(x uint8) -> Conv 3x3 pad 1 (weights int8 per channel, symmetric) -> QuantizeLinear."""
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.integers(-127, 128, (c, c, 3, 3)).astype(np.int8), "wq"),
             numpy_helper.from_array(np.full(c, 0.01, np.float32), "ws"),
             numpy_helper.from_array(np.zeros(c, np.int8), "wz"),
             numpy_helper.from_array(np.array(0.02, np.float32), "xs"),
             numpy_helper.from_array(np.array(128, np.uint8), "xz"),
             numpy_helper.from_array(np.array(0.05, np.float32), "ys"),
             numpy_helper.from_array(np.array(128, np.uint8), "yz")]
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xf"], name="dqx"),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wf"], name="dqw", axis=0),
             helper.make_node("Conv", ["xf", "wf"], ["yf"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["yf", "ys", "yz"], ["y"], name="q")]
    g = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, c, hw, hw])],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, [1, c, hw, hw])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def matmul():
    b = numpy_helper.from_array(np.ones((256, 256), np.float32), "b")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "b"], ["y"], name="mm")], "mm",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 256])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 256])], [b])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nxrt", required=True)
    nxrt = ap.parse_args().nxrt
    failures = 0

    def check(name, ok, detail):
        nonlocal failures
        print(f"{'ok  ' if ok else 'FAIL'} {name}" + ("" if ok else f": {detail}"))
        failures += 0 if ok else 1

    def inspect(m, tmp, tag, env=None, threads=None):
        path = os.path.join(tmp, tag + ".onnx")
        onnx.save(m, path)
        p = subprocess.run([nxrt, "inspect", path, "--ep", "cpu", "--json"] + (["--threads", str(threads)] if threads else []),
                           capture_output=True, text=True, timeout=120, env=env)
        try:
            return {n["name"]: n["kernel"] for n in json.loads(p.stdout)["nodes"]}, p
        except (ValueError, KeyError):
            return {}, p

    with tempfile.TemporaryDirectory() as tmp:
        k, p = inspect(conv("w3", "x", 64, 64, 3, 56, relu=True), tmp, "winograd")
        check("a 3x3 stride-1 conv with 64 channels on 56x56 (+Relu) is one group, described as Winograd",
              k.get("conv", "").startswith("Conv+Relu: winograd F(4x4,3x3) + gemm ") and k.get("relu") == "in the group of 'conv'",
              p.stdout + p.stderr)
        # A small layer (64 channels, 20x20: 25 tiles, 14.7 M multiply-adds): Winograd on one
        # thread; on two, with AVX-512, the direct product (conv_winograd_loses_threaded).
        small = conv("w3s", "x", 64, 64, 3, 20, relu=True)
        k, p = inspect(small, tmp, "small1", threads=1)
        check("a small 3x3 conv on 1 thread is Winograd", k.get("conv", "").startswith("Conv+Relu: winograd F(4x4,3x3)"),
              p.stdout + p.stderr)
        avx512 = "avx512f" in open("/proc/cpuinfo").read() and os.environ.get("NXRT_CPU_ISA", "") in ("", "avx512")
        k, p = inspect(small, tmp, "small2", threads=2)
        want = "Conv+Relu: direct: pixels read in place" if avx512 else "Conv+Relu: winograd F(4x4,3x3)"
        check(f"a small 3x3 conv on 2 threads runs {'direct' if avx512 else 'Winograd'} (AVX-512: {avx512})",
              k.get("conv", "").startswith(want), p.stdout + p.stderr)
        k, p = inspect(conv("dw", "x", 32, 32, 3, 56, group=32), tmp, "depthwise")
        check("a 3x3 depthwise conv names a depthwise kernel", k.get("conv", "").startswith("depthwise "), p.stdout + p.stderr)
        k, p = inspect(conv("pw", "x", 32, 64, 1, 28), tmp, "pointwise")
        check("a 1x1 stride-1 conv is a GEMM reading X in place", k.get("conv", "").startswith("1x1 gemm reading X in place "),
              p.stdout + p.stderr)
        k, p = inspect(conv("s2", "x", 64, 128, 3, 56, stride=2), tmp, "strided")
        # AVX2 and AVX-512 read the pixels in place (the direct product); the generic kernels
        # copy them into panels first.
        check("a strided 3x3 conv is direct on AVX2 / AVX-512, else im2col + gemm",
              k.get("conv", "").startswith(("direct: pixels read in place", "im2col + gemm")),
              p.stdout + p.stderr)
        k, p = inspect(conv("aspp", "x", 64, 64, 3, 8, dilation=12), tmp, "centre")
        check("a dilation-12 conv on 8x8 runs its centre tap only",
              k.get("conv", "").startswith("dilated, centre tap only: 1x1 "), p.stdout + p.stderr)
        m = conv("dyn", "x", 64, 64, 3, 56)
        for v in (m.graph.input[0], m.graph.output[0]):
            v.type.tensor_type.shape.dim[0].dim_param = "N"
        k, p = inspect(m, tmp, "dynamic")
        check("with X's shape unknown the choice is left to the run", k.get("conv") == "algorithm chosen per run (X's shape is not static)",
              p.stdout + p.stderr)
        # 8-bit: 64 channels on 56x56 and 14x14 run the exact Winograd where VNNI (and VBMI)
        # runs; 16 channels on 56x56 read B in place (conv_int8.cpp direct_pays); 7x7 maps (4 of
        # a panel's 16 lanes would hold Winograd tiles) run channels-last with VNNI
        # (conv_int8_nhwc.hpp), else the packed panels.
        cpuinfo = open("/proc/cpuinfo").read()
        isa = os.environ.get("NXRT_CPU_ISA", "") in ("", "avx512")
        vnni = "avx512_vnni" in cpuinfo and isa
        wino = vnni and "avx512vbmi" in cpuinfo
        for c, hw, path in ((64, 56, "exact Winograd" if wino else "B read in place" if vnni else None),
                            (16, 56, "B read in place" if vnni else None), (64, 14, "exact Winograd" if wino else None),
                            (64, 7, "channels-last" if vnni else None)):
            k, p = inspect(qdq_conv(c, hw), tmp, f"qdq{c}_{hw}")
            conv8 = [v for v in k.values() if "8-bit conv, " in v]
            paths = [q for q in ("exact Winograd", "B read in place", "channels-last") if conv8 and q in conv8[0]]
            check(f"a QDQ 3x3 conv of {c} channels on {hw}x{hw} is one 8-bit group, {path or 'packed panels'} "
                  f"(VNNI: {vnni}, VBMI: {wino})", len(conv8) == 1 and paths == ([path] if path else []),
                  p.stdout + p.stderr)
        k, p = inspect(matmul(), tmp, "matmul")
        check("a MatMul with constant B names its GEMM and the prepacked B",
              k.get("mm", "").startswith("gemm ") and k.get("mm", "").endswith(", B prepacked"), p.stdout + p.stderr)
        env = dict(os.environ, NXRT_CPU_ISA="generic")
        k, p = inspect(matmul(), tmp, "matmul_generic", env)
        check("NXRT_CPU_ISA=generic shows the generic micro-kernel", k.get("mm") == "gemm generic, B prepacked", p.stdout + p.stderr)
        p = subprocess.run([nxrt, "inspect", os.path.join(tmp, "winograd.onnx"), "--ep", "cpu"], capture_output=True,
                           text=True, timeout=120)
        lines = p.stdout.splitlines()
        check("the table has a kernel column", lines and lines[0].split()[:4] == ["node", "op", "ep", "kernel"]
              and any(ln.startswith("conv ") and "Conv+Relu: winograd" in ln for ln in lines), p.stdout + p.stderr)
    print(f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
