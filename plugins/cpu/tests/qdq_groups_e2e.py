#!/usr/bin/python3
"""The CPU plugin's QDQ groups end to end (ops_fusion_qdq.cpp), with which kernels ran (from
`nxrt bench --profile`):
  * DequantizeLinear(x, W, B) -> Conv -> [Relu] -> QuantizeLinear as one 8-bit kernel: equal to
    the exact integer formula (int32 accumulator, scale in double, round half to even) computed
    here in numpy, and within one quantization step of the same nodes run one by one;
  * the same Conv without QuantizeLinear (float output, float bias) against numpy float64;
  * DequantizeLinear(a, W) -> MatMul -> Add(bias) [-> QuantizeLinear] (uint8 and int8 A, per
    column weights);
  * DequantizeLinear(a, b) -> Add -> Relu -> QuantizeLinear: bit-identical to node by node;
  * DequantizeLinear(x, W, B) -> Conv -> Relu -> MaxPool -> QuantizeLinear (ResNet's stem) as
    one kernel (the pool on 8-bit values): bit-identical to the Conv group's float output,
    MaxPool and QuantizeLinear run apart (MaxPool's output also a graph output);
    The same for an RGB stem (7x7 stride 2, 3 channels: channels-last with VNNI, the pool
    reading its output channels-last);
  * DequantizeLinear -> MaxPool -> QuantizeLinear (same or other scale, zero point, type) as an
    8-bit pool [+ a requantization table]: bit-identical to node by node;
  * a DequantizeLinear shared by the Conv and another reader: the optimizer's copy per reader
    lets the Conv group fuse, with the outputs of dedicated copies;
  * patterns that must not fuse (per-channel scale on the wrong axis) still give the nodes'
    results.

Usage: qdq_groups_e2e.py --nxrt PATH/nxrt
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

RNG = np.random.default_rng(5)


def make(nodes, inputs, outputs, inits):
    g = helper.make_graph(nodes, "qdq", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m = onnx.shape_inference.infer_shapes(m)
    onnx.checker.check_model(m, full_check=True)
    return m


def requant(acc, mult, zp, dtype, lo=None):
    """saturate(round_half_even(acc * mult) + zp), in float64 as the plugin does."""
    info = np.iinfo(dtype)
    q = np.clip(np.rint(acc.astype(np.float64) * mult) + zp, info.min, info.max)
    if lo is not None:
        q = np.maximum(q, lo)
    return q.astype(dtype)


def conv_int(x, xz, w, wz, pads):
    """Exact int64 convolution of (x - xz) and (w - wz[oc]), stride 1."""
    xs = np.pad(x.astype(np.int64) - xz, ((0, 0), (0, 0), (pads, pads), (pads, pads)))
    ws = w.astype(np.int64) - wz.reshape(-1, 1, 1, 1)
    n, c, h, wd = xs.shape
    oc, _, kh, kw = ws.shape
    oh, ow = h - kh + 1, wd - kw + 1
    out = np.zeros((n, oc, oh, ow), np.int64)
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nchw,oc->nohw", xs[:, :, i:i + oh, j:j + ow], ws[:, :, i, j])
    return out


def conv_case(with_q, relu, x_type):
    """x [1,8,9,9] 8-bit -> DQ -> Conv 3x3 pad 1 (W int8 per channel, B int32) -> [Relu] -> [Q uint8]."""
    xdt = np.uint8 if x_type == TensorProto.UINT8 else np.int8
    info = np.iinfo(xdt)
    x = RNG.integers(info.min, info.max + 1, (1, 8, 9, 9)).astype(xdt)
    x.flat[:4] = [info.min, info.max, info.min, info.max]
    w = RNG.integers(-127, 128, (6, 8, 3, 3)).astype(np.int8)
    xs, xz = np.float32(0.05), xdt(3)
    ws = RNG.uniform(0.002, 0.01, 6).astype(np.float32)
    bs = (xs * ws).astype(np.float32)
    b = RNG.integers(-3000, 3000, 6).astype(np.int32)
    ys, yz = np.float32(0.2), np.uint8(7)
    inits = {"xs": xs, "xz": np.array(xz), "w": w, "ws": ws, "wz": np.zeros(6, np.int8), "b": b, "bs": bs,
             "ys": ys, "yz": np.array(yz)}
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0),
             helper.make_node("DequantizeLinear", ["b", "bs"], ["bd"], axis=0),
             helper.make_node("Conv", ["xd", "wd", "bd"], ["c"], pads=[1, 1, 1, 1])]
    last = "c"
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["r"]))
        last = "r"
    if with_q:
        nodes.append(helper.make_node("QuantizeLinear", [last, "ys", "yz"], ["y"]))
        out_t = TensorProto.UINT8
    else:
        nodes[-1].output[0] = "y"
        out_t = TensorProto.FLOAT
    m = make(nodes, [helper.make_tensor_value_info("x", x_type, [1, 8, 9, 9])],
             [helper.make_tensor_value_info("y", out_t, [1, 6, 9, 9])], inits)
    acc = conv_int(x, int(xz), w, np.zeros(6, np.int64), 1) + b.reshape(1, -1, 1, 1)
    if with_q:
        mult = (xs.astype(np.float64) * ws.astype(np.float64) / np.float64(ys)).reshape(1, -1, 1, 1)
        want = requant(acc, mult, int(yz), np.uint8, lo=int(yz) if relu else None)
    else:
        want = acc * (xs.astype(np.float64) * ws.astype(np.float64)).reshape(1, -1, 1, 1)
        if relu:
            want = np.maximum(want, 0)
    return m, [x], want


def pool_case(pads, ceil):
    """conv_case(float out, relu) -> MaxPool 3x3 stride 2 -> QuantizeLinear uint8; and the same
    model with MaxPool's output also a graph output (the Conv group stays, the pool cannot join)."""
    m, feeds, _ = conv_case(False, True, TensorProto.UINT8)
    g = m.graph
    g.node[-1].output[0] = "r"
    g.node.extend([helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=pads,
                                    ceil_mode=ceil),
                   helper.make_node("QuantizeLinear", ["p", "ps", "pz"], ["y"])])
    g.initializer.extend([numpy_helper.from_array(np.float32(0.25), "ps"),
                          numpy_helper.from_array(np.array(np.uint8(4)), "pz")])
    del g.output[:]
    del g.value_info[:]
    g.output.append(helper.make_tensor_value_info("y", TensorProto.UINT8, None))
    m = onnx.shape_inference.infer_shapes(m)
    split = onnx.ModelProto()
    split.CopyFrom(m)
    split.graph.output.append(next(v for v in split.graph.value_info if v.name == "p"))
    return m, split, feeds


def stem_pool_case():
    """ResNet's stem in small: x uint8 [1,3,30,34] -> DQ -> Conv 7x7 stride 2 pad 3 (16 channels,
    per-channel int8 W, int32 B) -> Relu -> MaxPool 3x3 stride 2 pad 1 -> QuantizeLinear uint8
    (with VNNI the channels-last conv, whose output the pool reads channels-last); and the same
    with MaxPool's output also a graph output (the conv group apart, its output in planes)."""
    x = RNG.integers(0, 256, (1, 3, 30, 34)).astype(np.uint8)
    w = RNG.integers(-127, 128, (16, 3, 7, 7)).astype(np.int8)
    xs, ws = np.float32(0.02), RNG.uniform(0.002, 0.01, 16).astype(np.float32)
    b = RNG.integers(-3000, 3000, 16).astype(np.int32)
    inits = {"xs": xs, "xz": np.array(np.uint8(100)), "w": w, "ws": ws, "wz": np.zeros(16, np.int8), "b": b,
             "bs": (xs * ws).astype(np.float32), "ps": np.float32(0.1), "pz": np.array(np.uint8(2))}
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0),
             helper.make_node("DequantizeLinear", ["b", "bs"], ["bd"], axis=0),
             helper.make_node("Conv", ["xd", "wd", "bd"], ["c"], kernel_shape=[7, 7], strides=[2, 2], pads=[3, 3, 3, 3]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["p", "ps", "pz"], ["y"])]
    m = make(nodes, [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 3, 30, 34])],
             [helper.make_tensor_value_info("y", TensorProto.UINT8, None)], inits)
    split = onnx.ModelProto()
    split.CopyFrom(m)
    split.graph.output.append(next(v for v in split.graph.value_info if v.name == "p"))
    return m, split, [x]


def unfused(m):
    """The same model with every node's output also a graph output: nothing can fuse."""
    m2 = onnx.ModelProto()
    m2.CopyFrom(m)
    have = {o.name for o in m2.graph.output}
    vi = {v.name: v for v in m2.graph.value_info}
    for n in m2.graph.node:
        for o in n.output:
            if o not in have and o in vi:
                m2.graph.output.append(vi[o])
    return m2


def matmul_case(with_q, a_type):
    adt = np.uint8 if a_type == TensorProto.UINT8 else np.int8
    info = np.iinfo(adt)
    a = RNG.integers(info.min, info.max + 1, (2, 5, 16)).astype(adt)
    w = RNG.integers(-127, 128, (16, 12)).astype(np.int8)
    az = adt(-4 if adt == np.int8 else 128)
    as_, ws = np.float32(0.03), RNG.uniform(0.001, 0.02, 12).astype(np.float32)
    bias = RNG.standard_normal(12).astype(np.float32)
    ys, yz = np.float32(0.05), np.int8(-2)
    inits = {"as": as_, "az": np.array(az), "w": w, "ws": ws, "wz": np.zeros(12, np.int8), "bias": bias,
             "ys": ys, "yz": np.array(yz)}
    nodes = [helper.make_node("DequantizeLinear", ["a", "as", "az"], ["ad"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=1),
             helper.make_node("MatMul", ["ad", "wd"], ["mm"]),
             helper.make_node("Add", ["mm", "bias"], ["y" if not with_q else "s"])]
    if with_q:
        nodes.append(helper.make_node("QuantizeLinear", ["s", "ys", "yz"], ["y"]))
    m = make(nodes, [helper.make_tensor_value_info("a", a_type, [2, 5, 16])],
             [helper.make_tensor_value_info("y", TensorProto.INT8 if with_q else TensorProto.FLOAT, [2, 5, 12])], inits)
    acc = (a.astype(np.int64) - int(az)) @ w.astype(np.int64)
    f = acc * (as_.astype(np.float64) * ws.astype(np.float64)) + bias
    want = np.clip(np.rint(f / np.float64(ys)) + int(yz), -128, 127).astype(np.int8) if with_q else f
    return m, [a], want


def add_case():
    a = RNG.integers(0, 256, (2, 3, 700)).astype(np.uint8)
    b = RNG.integers(0, 256, (2, 3, 700)).astype(np.uint8)
    inits = {"sa": np.float32(0.07), "za": np.array(np.uint8(120)), "sb": np.float32(0.03),
             "zb": np.array(np.uint8(9)), "ys": np.float32(0.09), "yz": np.array(np.uint8(0))}
    nodes = [helper.make_node("DequantizeLinear", ["a", "sa", "za"], ["ad"]),
             helper.make_node("DequantizeLinear", ["b", "sb", "zb"], ["bd"]),
             helper.make_node("Add", ["ad", "bd"], ["s"]), helper.make_node("Relu", ["s"], ["r"]),
             helper.make_node("QuantizeLinear", ["r", "ys", "yz"], ["y"])]
    m = make(nodes, [helper.make_tensor_value_info("a", TensorProto.UINT8, [2, 3, 700]),
                     helper.make_tensor_value_info("b", TensorProto.UINT8, [2, 3, 700])],
             [helper.make_tensor_value_info("y", TensorProto.UINT8, [2, 3, 700])], inits)
    return m, [a, b]


def maxpool_case(x_type, y_type, same_params):
    """x 8-bit [1,5,11,10] -> DequantizeLinear -> MaxPool 3x3 stride 2 pad 1 -> QuantizeLinear."""
    xdt = np.uint8 if x_type == TensorProto.UINT8 else np.int8
    ydt = np.uint8 if y_type == TensorProto.UINT8 else np.int8
    info = np.iinfo(xdt)
    x = RNG.integers(info.min, info.max + 1, (1, 5, 11, 10)).astype(xdt)
    xs, xz = np.float32(0.043), xdt(7)
    ys, yz = (xs, ydt(7)) if same_params else (np.float32(0.071), ydt(-3 if ydt == np.int8 else 12))
    inits = {"xs": xs, "xz": np.array(xz), "ys": np.float32(ys), "yz": np.array(yz)}
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xd"]),
             helper.make_node("MaxPool", ["xd"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["p", "ys", "yz"], ["y"])]
    m = make(nodes, [helper.make_tensor_value_info("x", x_type, [1, 5, 11, 10])],
             [helper.make_tensor_value_info("y", y_type, [1, 5, 6, 5])], inits)
    return m, [x]


def shared_dq_case():
    """conv_case (u8, Relu, Q) whose input DequantizeLinear also feeds Relu -> QuantizeLinear
    (a second output); and the same model with a DequantizeLinear of its own for that reader."""
    m, feeds, _ = conv_case(True, True, TensorProto.UINT8)
    g = m.graph
    g.node.extend([helper.make_node("Relu", ["xd"], ["xr"]),
                   helper.make_node("QuantizeLinear", ["xr", "ys", "yz"], ["y2"])])
    g.output.append(helper.make_tensor_value_info("y2", TensorProto.UINT8, [1, 8, 9, 9]))
    dedicated = onnx.ModelProto()
    dedicated.CopyFrom(m)
    dg = dedicated.graph
    dg.node.insert(1, helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xd2"]))
    for n in dg.node:
        if n.op_type == "Relu" and n.input[0] == "xd":
            n.input[0] = "xd2"
    onnx.checker.check_model(m)
    onnx.checker.check_model(dedicated)
    return (m, feeds), dedicated


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nxrt", required=True)
    nxrt = ap.parse_args().nxrt
    results = []

    def check(what, ok, detail):
        print(f"{'ok  ' if ok else 'FAIL'} {what}: {detail}")
        results.append(ok)

    with tempfile.TemporaryDirectory() as tmp:
        def go(tag, m, feeds):
            outs, p = run(nxrt, m, feeds, tmp, tag)
            if outs is None:
                check(tag, False, f"nxrt failed: {p.stderr.strip()}")
                return None, None
            return outs[0], kernels_ran(nxrt, os.path.join(tmp, tag, "model.onnx"), os.path.join(tmp, tag))

        for with_q, relu, xt, name in [(True, True, TensorProto.UINT8, "conv u8 relu q"),
                                       (True, False, TensorProto.INT8, "conv s8 q"),
                                       (False, True, TensorProto.UINT8, "conv u8 relu float out")]:
            m, feeds, want = conv_case(with_q, relu, xt)
            got, ks = go(name.replace(" ", "_"), m, feeds)
            if got is None:
                continue
            fused = any("Conv" in k and "DequantizeLinear" in k for k in ks or [])
            if with_q:
                exact = np.array_equal(got, want)
                plain, _ = go(name.replace(" ", "_") + "_plain", unfused(m), feeds)
                step = int(np.abs(plain.astype(np.int32) - got.astype(np.int32)).max()) if plain is not None else -1
                check(name, fused and exact and 0 <= step <= 1,
                      f"fused {fused} {ks}, equal to the exact integer formula: {exact}, max steps from node by node: {step}")
            else:
                err = float(np.abs(got - want).max())
                check(name, fused and err <= 1e-4 * max(1.0, float(np.abs(want).max())), f"fused {fused} {ks}, max |err| {err:.3g}")

        for with_q, at, name in [(False, TensorProto.UINT8, "matmul u8 bias float out"),
                                 (True, TensorProto.INT8, "matmul s8 bias q")]:
            m, feeds, want = matmul_case(with_q, at)
            got, ks = go(name.replace(" ", "_"), m, feeds)
            if got is None:
                continue
            fused = any("MatMul" in k and "DequantizeLinear" in k for k in ks or [])
            if with_q:
                step = int(np.abs(got.astype(np.int32) - want.astype(np.int32)).max())
                check(name, fused and step <= 1, f"fused {fused} {ks}, max steps from float64: {step}")
            else:
                err = float(np.abs(got - want).max())
                check(name, fused and err <= 1e-4 * max(1.0, float(np.abs(want).max())), f"fused {fused} {ks}, max |err| {err:.3g}")

        m, feeds = add_case()
        got, ks = go("add", m, feeds)
        plain, ks2 = go("add_plain", unfused(m), feeds)
        if got is not None and plain is not None:
            fused = any("Add" in k and "DequantizeLinear" in k for k in ks or [])
            check("add relu q", fused and np.array_equal(got, plain) and not any("DequantizeLinear+" in k for k in ks2 or []),
                  f"fused {fused} {ks}, bit-identical to node by node: {np.array_equal(got, plain)}")

        for pads, ceil in [([1, 1, 1, 1], 0), ([0, 0, 2, 2], 1)]:
            m, split, feeds = pool_case(pads, ceil)
            got, ks = go(f"pool_{ceil}", m, feeds)
            outs, p = run(nxrt, split, feeds, tmp, f"pool_split_{ceil}")
            ks2 = kernels_ran(nxrt, os.path.join(tmp, f"pool_split_{ceil}", "model.onnx"), os.path.join(tmp, f"pool_split_{ceil}"))
            if got is not None and outs is not None:
                fused = any("MaxPool" in k and "Conv" in k for k in ks or [])
                apart = any("Conv" in k and "DequantizeLinear" in k and "MaxPool" not in k for k in ks2 or [])
                same = np.array_equal(got, outs[0])
                check(f"conv relu maxpool q (pads {pads}, ceil {ceil})", fused and apart and same and got.size > 0,
                      f"fused {fused} {ks}, apart {apart} {ks2}, bit-identical: {same}, {len(np.unique(got))} distinct values")

        m, split, feeds = stem_pool_case()
        got, ks = go("stem_pool", m, feeds)
        outs, p = run(nxrt, split, feeds, tmp, "stem_pool_split")
        ks2 = kernels_ran(nxrt, os.path.join(tmp, "stem_pool_split", "model.onnx"), os.path.join(tmp, "stem_pool_split"))
        if got is not None and outs is not None:
            fused = any("MaxPool" in k and "Conv" in k for k in ks or [])
            same = np.array_equal(got, outs[0])
            check("stem conv 7x7/2 relu maxpool q", fused and same and got.shape == (1, 16, 8, 9),
                  f"fused {fused} {ks}, apart {ks2}, bit-identical: {same}, shape {got.shape}, "
                  f"{len(np.unique(got))} distinct values")

        for xt, yt, same, name in [(TensorProto.UINT8, TensorProto.UINT8, True, "u8 same params"),
                                   (TensorProto.UINT8, TensorProto.INT8, False, "u8 -> s8 requantized"),
                                   (TensorProto.INT8, TensorProto.INT8, False, "s8 requantized")]:
            m, feeds = maxpool_case(xt, yt, same)
            tag = "maxpool_" + name.replace(" ", "_").replace(">", "")
            got, ks = go(tag, m, feeds)
            plain, ks2 = go(tag + "_plain", unfused(m), feeds)
            if got is not None and plain is not None:
                fused = ks == ["DequantizeLinear+MaxPool+QuantizeLinear"]
                same_out = np.array_equal(got, plain)
                check(f"dq maxpool q ({name})", fused and same_out and len(np.unique(got)) > 20,
                      f"kernels {ks} / {ks2}, bit-identical to node by node: {same_out}")

        # One DequantizeLinear read by the Conv and by a Relu -> QuantizeLinear (as quantizers
        # write a tensor with two readers): the optimizer gives each reader its own copy, so
        # the Conv group still fuses; both outputs equal the model with dedicated copies.
        shared, dedicated = shared_dq_case()
        feeds = shared[1]
        outs_s, p1 = run(nxrt, shared[0], feeds, tmp, "shared_dq")
        outs_d, p2 = run(nxrt, dedicated, feeds, tmp, "dedicated_dq")
        if outs_s is None or outs_d is None:
            check("shared DequantizeLinear", False, f"nxrt failed: {(p1.stderr + p2.stderr).strip()}")
        else:
            ks = kernels_ran(nxrt, os.path.join(tmp, "shared_dq", "model.onnx"), os.path.join(tmp, "shared_dq"))
            fused = any("Conv" in k and "DequantizeLinear" in k for k in ks or [])
            same = all(np.array_equal(a, b) for a, b in zip(outs_s, outs_d)) and len(outs_s) == 2
            check("shared DequantizeLinear: split per reader, the Conv group fuses", fused and same,
                  f"fused {fused} {ks}, both outputs equal to dedicated copies: {same}")

        # Per-channel weight scale along axis 1 of a Conv: not the output channel, no group.
        m, feeds, _ = conv_case(True, True, TensorProto.UINT8)
        for n in m.graph.node:
            if n.input[0] == "w":
                n.attribute[0].i = 1
        w = numpy_helper.to_array(next(t for t in m.graph.initializer if t.name == "w"))
        for t in m.graph.initializer:
            if t.name in ("ws", "wz"):
                arr = numpy_helper.to_array(t)[:2].repeat(4)  # 8 values: axis 1 has 8 channels
                t.CopyFrom(numpy_helper.from_array(arr.astype(arr.dtype), t.name))
        got, ks = go("wrong_axis", m, feeds)
        if got is not None:
            fused = any("DequantizeLinear+" in k for k in ks or [])
            wd = (w.astype(np.float64) * numpy_helper.to_array(next(t for t in m.graph.initializer if t.name == "ws")).reshape(1, 8, 1, 1))
            check("per-channel scale on the input axis: not fused", not fused and got.shape == (1, 6, 9, 9) and wd.shape == w.shape,
                  f"kernels {ks}")

    print(f"{sum(results)} passed, {len(results) - sum(results)} failed")
    return 0 if results and all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
