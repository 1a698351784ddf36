#!/usr/bin/python3
"""QLinearConv, ConvInteger, QLinearMatMul and MatMulInteger with constant weights and
quantization parameters (the kernels prepared at creation: QConv / QMatMul, packed 8-bit
GEMM) end to end through `nxrt run`, bit-identical to the same model with those values fed as
graph inputs (the exact integer path, which the ONNX node tests check). Shapes with groups,
strides, pads, dilations, 1-D convs, batched and 1-D matmul operands, uint8/int8 mixes,
per-channel and per-tensor parameters; 3x3 stride-1 convs with symmetric weights on 30x30
maps take the exact 8-bit Winograd where VNNI runs (conv_int8_winograd.hpp).

Usage: qlinear_e2e.py --nxrt PATH/nxrt
"""
import argparse
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nxrt_run import run  # noqa: E402

rng = np.random.default_rng(3)


def q8(dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, size=shape).astype(dtype)


def ttype(dtype):
    return onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[np.dtype(dtype)]


def model(op, x, params, attrs, consts):
    """`op` on graph input x and the named `params` (a list of (name, array or None)); the
    names in `consts` become initializers, the others graph inputs (fed in order)."""
    names = [n if a is not None else "" for n, a in params]
    node = helper.make_node(op, ["x"] + names, ["y"], **attrs)
    inputs = [helper.make_tensor_value_info("x", ttype(x.dtype), list(x.shape))]
    inits, feeds = [], [x]
    for n, a in params:
        if a is None:
            continue
        if n in consts:
            inits.append(numpy_helper.from_array(a, n))
        else:
            inputs.append(helper.make_tensor_value_info(n, ttype(a.dtype), list(a.shape)))
            feeds.append(a)
    y_zp = dict(params).get("y_zero_point")
    y_type = ttype(y_zp.dtype) if y_zp is not None else onnx.TensorProto.INT32
    g = helper.make_graph([node], "q", inputs, [helper.make_tensor_value_info("y", y_type, None)], inits)
    m = onnx.shape_inference.infer_shapes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]))
    onnx.checker.check_model(m)
    return m, feeds


def qlinear_conv(xt, wt, xshape, wshape, attrs, per_channel=True, bias=True, w_sym=False):
    oc = wshape[0]
    x = q8(xt, xshape)
    w = q8(wt, wshape)
    f = np.float32
    params = [("x_scale", np.array(0.02, f)), ("x_zero_point", q8(xt, ())),
              ("w", w), ("w_scale", (rng.random(oc if per_channel else ()) * 0.01 + 0.001).astype(f)),
              ("w_zero_point", np.zeros((oc,) if per_channel else (), wt) if w_sym else q8(wt, (oc,) if per_channel else ())),
              ("y_scale", np.array(0.05, f)), ("y_zero_point", q8(xt, ())),
              ("B", rng.integers(-5000, 5000, size=oc).astype(np.int32) if bias else None)]
    return "QLinearConv", x, params, attrs


def conv_integer(xt, wt, xshape, wshape, attrs, zps=True, w_sym=False):
    x = q8(xt, xshape)
    w_zp = np.zeros((wshape[0],), wt) if w_sym else q8(wt, (wshape[0],))
    params = [("w", q8(wt, wshape)), ("x_zero_point", q8(xt, ()) if zps else None),
              ("w_zero_point", w_zp if zps else None)]
    return "ConvInteger", x, params, attrs


def qlinear_matmul(at, bt, ashape, bshape, per_col=True):
    n = bshape[-1]
    f = np.float32
    params = [("a_scale", np.array(0.03, f)), ("a_zero_point", q8(at, ())), ("b", q8(bt, bshape)),
              ("b_scale", (rng.random(n if per_col else ()) * 0.01 + 0.001).astype(f)),
              ("b_zero_point", q8(bt, (n,) if per_col else ())), ("y_scale", np.array(0.2, f)),
              ("y_zero_point", q8(at, ()))]
    return "QLinearMatMul", q8(at, ashape), params, {}


def matmul_integer(at, bt, ashape, bshape):
    params = [("b", q8(bt, bshape)), ("a_zero_point", q8(at, ())), ("b_zero_point", q8(bt, (bshape[-1],)))]
    return "MatMulInteger", q8(at, ashape), params, {}


u8, s8 = np.uint8, np.int8
CASES = [
    qlinear_conv(u8, s8, (1, 8, 10, 9), (16, 8, 3, 3), {"pads": [1, 1, 1, 1]}),
    qlinear_conv(s8, s8, (2, 6, 9, 11), (10, 3, 3, 2), {"group": 2, "strides": [2, 1], "dilations": [1, 2],
                                                        "pads": [2, 0, 1, 3]}),
    qlinear_conv(u8, u8, (1, 12, 7, 7), (12, 1, 3, 3), {"group": 12, "pads": [1, 1, 1, 1]}, per_channel=False),
    qlinear_conv(u8, s8, (1, 32, 6, 5), (20, 32, 1, 1), {}, bias=False),
    qlinear_conv(s8, u8, (1, 4, 40), (6, 4, 5), {"strides": [2], "auto_pad": "SAME_UPPER"}),
    conv_integer(u8, u8, (1, 5, 8, 8), (7, 5, 3, 3), {"pads": [1, 0, 0, 1]}),
    conv_integer(s8, u8, (2, 4, 6, 6), (4, 4, 1, 1), {}, zps=False),
    qlinear_conv(u8, s8, (1, 48, 30, 30), (32, 48, 3, 3), {"pads": [1, 1, 1, 1]}, w_sym=True),
    qlinear_conv(s8, s8, (2, 40, 28, 31), (24, 40, 3, 3), {"pads": [0, 1, 2, 1]}, w_sym=True),
    conv_integer(u8, s8, (1, 64, 30, 30), (16, 64, 3, 3), {"pads": [1, 1, 1, 1]}, w_sym=True),
    qlinear_matmul(u8, s8, (2, 5, 70), (70, 37)),
    qlinear_matmul(s8, u8, (70,), (70, 20), per_col=False),
    matmul_integer(u8, s8, (3, 9, 33), (33, 17)),
    matmul_integer(s8, s8, (1, 600), (600, 8)),
]
CONSTS = {"x_scale", "x_zero_point", "w", "w_scale", "w_zero_point", "y_scale", "y_zero_point", "B", "a_scale",
          "a_zero_point", "b", "b_scale", "b_zero_point"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nxrt", required=True)
    args = ap.parse_args()
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, (op, x, params, attrs) in enumerate(CASES):
            outs = []
            for tag, consts in (("const", CONSTS), ("inputs", set())):
                m, feeds = model(op, x, params, attrs, consts)
                res, p = run(args.nxrt, m, feeds, tmp, f"{i}_{tag}")
                if res is None:
                    print(f"case {i} {op} ({tag}): nxrt failed:\n{p.stderr}")
                    failed += 1
                    break
                outs.append(res[0])
            if len(outs) != 2:
                continue
            same = outs[0].dtype == outs[1].dtype and outs[0].shape == outs[1].shape and \
                outs[0].tobytes() == outs[1].tobytes()
            print(f"case {i} {op} {x.dtype}: {'ok' if same else 'DIFFERENT'} {outs[0].shape}")
            failed += not same
    print(f"{len(CASES) - failed} of {len(CASES)} cases bit-identical")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
