#!/usr/bin/python3
"""The CPU plugin's fused groups end to end, with which groups ran fused (from `nxrt bench
--profile`), including chains that must not fuse:
  * MatMul -> Add(bias) [-> Add(residual)] in one GEMM store, against numpy (float64): bias
    not over the last axis, a broadcast residual, an intermediate used twice;
  * Gemm -> Relu | Clip with the activation in the GEMM's store, against numpy (float64): C
    over the columns, the rows or the whole output (beta != 1), transA / transB, Clip bounds as
    inputs, NaN through the store; left unfused: the Gemm's output also a graph output, a Clip
    whose bound is a graph input;
  * the exact-Gelu chain Div -> Erf -> Add -> Mul -> Mul in one pass (an extra output of the
    Erf keeps it unfused, for comparison): within 1e-5 of numpy's float64 Gelu, relatively too,
    down to the far negative tail;
  * MobileNetV2's inverted-residual block (1x1 Conv, Clip, depthwise 3x3 Conv, Clip, 1x1 Conv,
    Add) as one group run in row bands, stride 1 and 2, with and without expand / project /
    residual, with Relu, Clip or HardSwish (and Conv+HardSwish alone), on 1 and 2 threads,
    against numpy (float64); blocks that must stay node by node:
    an intermediate also a graph output, 7x7 maps (the 1x1 convs run transposed), and a CPU
    without the direct depthwise kernel (NXRT_CPU_ISA=generic);
  * MatMuls through Transpose views (attention heads: Reshape -> Transpose into both
    operands, Transpose -> Reshape after), a 2-D transposed B, a broadcast 2-D B, on 1 and 2
    threads, against numpy (float64); left node by node: a transposed value that is also a
    graph output, a Transpose whose matrices have no unit-stride axis; the scores' Mul by a
    power of two joins the group, by another scalar it does not;
  * Conv [-> Relu | Clip] -> MaxPool (the pool over the conv's row blocks): a 7x7 stride-2 stem
    with a 3x3/2 pool, 2x2/2 in ceil mode, 3x3/1 after a Clip, a 1x1 conv (claimed, run as conv
    then pool), on 1 and 2 threads, against numpy (float64); left unfused: a MaxPool with its
    Indices output, an activation also a graph output, a grouped conv;
  * squeeze-excite's Mul(x, s) -> 1x1 Conv [-> Add] [-> Relu] with s folded into the conv's
    weights or, on few pixels (the transposed product), into x^T as it is packed
    (GlobalAveragePool -> 1x1 Conv -> Relu -> 1x1 Conv -> HardSigmoid makes s), s on either
    side of the Mul, per image on a batch of 2, a constant s, on 1 and 2 threads, against numpy
    (float64); left unfused: W larger than an image of x (not transposed), the Mul's output
    also a graph output, a strided 1x1 conv;
  * MatMul alone with batch dims on both sides that broadcast (1s on either, B of lower or
    higher rank), B an input or a prepacked initializer, on 1 and 2 threads, against numpy.

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
        gemm_failures, gemm_total = gemm_cases(nxrt, tmp)
        failures += gemm_failures
        block_failures, block_total = block_cases(nxrt, tmp)
        failures += block_failures
        view_failures, view_total = view_cases(nxrt, tmp)
        failures += view_failures
        batched_failures, batched_total = batched_cases(nxrt, tmp)
        failures += batched_failures
        pool_failures, pool_total = conv_pool_cases(nxrt, tmp)
        failures += pool_failures
        se_failures, se_total = channel_scale_cases(nxrt, tmp)
        failures += se_failures
    total = len(cases) + 2 + gemm_total + block_total + view_total + batched_total + pool_total + se_total
    print(f"{total - failures} passed, {failures} failed")
    return 1 if failures else 0


def gemm_model(c_shape, trans_a, trans_b, alpha, beta, act, second_use=False, bound_input=False):
    """y = act(alpha * op(A) op(B) + beta * C), A [6, 9] (op: [6, 9]), B constant [9, 50] (op)."""
    rng = np.random.default_rng(5)
    B = rng.standard_normal((50, 9) if trans_b else (9, 50)).astype(np.float32)
    inits = [numpy_helper.from_array(B, "B")]
    ins = ["a", "B"]
    C = None
    if c_shape is not None:
        C = rng.standard_normal(c_shape).astype(np.float32)
        inits.append(numpy_helper.from_array(C, "C"))
        ins.append("C")
    nodes = [helper.make_node("Gemm", ins, ["g"], name="gemm", alpha=alpha, beta=beta, transA=int(trans_a),
                              transB=int(trans_b))]
    inputs = [helper.make_tensor_value_info("a", TensorProto.FLOAT, [9, 6] if trans_a else [6, 9])]
    if act == "Relu":
        nodes.append(helper.make_node("Relu", ["g"], ["y"], name="act"))
    else:
        inits.append(numpy_helper.from_array(np.array(-0.5, np.float32), "lo"))
        if bound_input:
            inputs.append(helper.make_tensor_value_info("hi", TensorProto.FLOAT, []))
        else:
            inits.append(numpy_helper.from_array(np.array(1.5, np.float32), "hi"))
        nodes.append(helper.make_node("Clip", ["g", "lo", "hi"], ["y"], name="act"))
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, 50])]
    if second_use:
        outputs.append(helper.make_tensor_value_info("g", TensorProto.FLOAT, [6, 50]))
    g = helper.make_graph(nodes, "gemmfuse", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)

    def reference(a):
        ad = a.astype(np.float64)
        y = alpha * ((ad.T if trans_a else ad) @ (B.T if trans_b else B).astype(np.float64))
        if C is not None:
            y = y + beta * C
        return np.maximum(y, 0) if act == "Relu" else np.clip(y, -0.5, 1.5)
    return m, reference


def gemm_cases(nxrt, tmp):
    """Returns (failures, cases)."""
    rng = np.random.default_rng(17)
    cases = [  # what, model args, the kernels expected
        ("Gemm+Relu, C [50]", dict(c_shape=(50,), trans_a=False, trans_b=False, alpha=1.0, beta=1.0, act="Relu"),
         ["Gemm+Relu"]),
        ("Gemm+Clip, C [6,1], transB", dict(c_shape=(6, 1), trans_a=False, trans_b=True, alpha=1.0, beta=1.0,
                                            act="Clip"), ["Gemm+Clip"]),
        ("Gemm+Relu, C [6,50] beta 0.5, alpha 2, transA", dict(c_shape=(6, 50), trans_a=True, trans_b=False,
                                                              alpha=2.0, beta=0.5, act="Relu"), ["Gemm+Relu"]),
        ("Gemm+Clip, no C", dict(c_shape=None, trans_a=False, trans_b=False, alpha=1.0, beta=1.0, act="Clip"),
         ["Gemm+Clip"]),
        ("Gemm output also a graph output", dict(c_shape=(50,), trans_a=False, trans_b=False, alpha=1.0, beta=1.0,
                                                 act="Relu", second_use=True), ["Gemm", "Relu"]),
        ("Clip bound a graph input", dict(c_shape=(50,), trans_a=False, trans_b=False, alpha=1.0, beta=1.0,
                                          act="Clip", bound_input=True), ["Clip", "Gemm"]),
    ]
    failures = 0
    for k, (what, args, want) in enumerate(cases):
        m, reference = gemm_model(**args)
        a = rng.standard_normal((9, 6) if args["trans_a"] else (6, 9)).astype(np.float32)
        a.flat[3] = np.nan  # one row (or column) of NaN through the store
        feeds = [a] + ([np.array(1.5, np.float32)] if args.get("bound_input") else [])
        tag = f"gemm{k}"
        outs, p = run(nxrt, m, feeds, tmp, tag)
        if outs is None:
            print(f"FAIL {what}: nxrt failed: {p.stderr.strip()}")
            failures += 1
            continue
        groups = kernels_ran(nxrt, os.path.join(tmp, tag, "model.onnx"), os.path.join(tmp, tag))
        want_y = reference(a)
        nan_same = bool(np.array_equal(np.isnan(outs[0]), np.isnan(want_y)))
        err = float(np.nanmax(np.abs(outs[0] - want_y)))
        ok = err <= 1e-5 and nan_same and groups == sorted(want)
        print(f"{'ok  ' if ok else 'FAIL'} {what}: max |err| {err:.2g}, NaN where expected: {nan_same}, "
              f"kernels {groups} (want {sorted(want)})")
        failures += 0 if ok else 1
    return failures, len(cases)


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


def np_conv1x1(x, w, b):
    return np.einsum("oc,nchw->nohw", w[:, :, 0, 0], x) + b[None, :, None, None]


def np_dw3x3(x, w, b, stride, pads):
    """pads: top, left, bottom, right."""
    n, c, h, wd = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (h + pads[0] + pads[2] - 3) // stride + 1
    ow = (wd + pads[1] + pads[3] - 3) // stride + 1
    out = np.zeros((n, c, oh, ow)) + b[None, :, None, None]
    for ky in range(3):
        for kx in range(3):
            out += w[None, :, 0, ky, kx, None, None] * xp[:, :, ky:ky + stride * (oh - 1) + 1:stride,
                                                             kx:kx + stride * (ow - 1) + 1:stride]
    return out


def block_model(shape, hidden, out_c, stride, expand=True, project=True, residual=False, act="Clip",
                expose_hidden=False, pads=(1, 1, 1, 1)):
    """x -> [1x1 expand -> act] -> dw 3x3 -> act -> [1x1 project] [-> + x]; returns the model
    and a float64 numpy function of x."""
    rng = np.random.default_rng(5)
    n, c, h, w = shape
    if not expand:
        hidden = c
    init, nodes = [], []

    def const(name, arr):
        init.append(numpy_helper.from_array(arr.astype(np.float32), name))
        return arr.astype(np.float32).astype(np.float64)

    def activation(src, dst):
        if act == "Clip":
            nodes.append(helper.make_node("Clip", [src, "lo", "hi"], [dst]))
        else:
            nodes.append(helper.make_node(act, [src], [dst]))

    const("lo", np.array(0.0)), const("hi", np.array(6.0))
    we = const("we", rng.standard_normal((hidden, c, 1, 1)) * 0.5)
    be = const("be", rng.standard_normal(hidden) * 0.1)
    wd = const("wd", rng.standard_normal((hidden, 1, 3, 3)) * 0.5)
    bd = const("bd", rng.standard_normal(hidden) * 0.1)
    wp = const("wp", rng.standard_normal((out_c, hidden, 1, 1)) * 0.3)
    bp = const("bp", rng.standard_normal(out_c) * 0.1)
    src = "x"
    if expand:
        nodes.append(helper.make_node("Conv", ["x", "we", "be"], ["e"], kernel_shape=[1, 1]))
        activation("e", "e_act")
        src = "e_act"
    nodes.append(helper.make_node("Conv", [src, "wd", "bd"], ["d"], kernel_shape=[3, 3], group=hidden,
                                  strides=[stride, stride], pads=list(pads)))
    activation("d", "d_act")
    last = "d_act"
    if project:
        nodes.append(helper.make_node("Conv", ["d_act", "wp", "bp"], ["p"], kernel_shape=[1, 1]))
        last = "p"
    if residual:
        nodes.append(helper.make_node("Add", [last, "x"], ["y"]))
    else:
        nodes[-1].output[0] = "y"
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if expose_hidden:
        outputs.append(helper.make_tensor_value_info("e_act", TensorProto.FLOAT, None))
    g = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          outputs, init)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m = onnx.shape_inference.infer_shapes(m)
    onnx.checker.check_model(m)
    def act_fn(v):
        if act == "HardSwish":
            return v * np.clip(v / 6 + 0.5, 0, 1)
        return np.clip(v, *((0.0, 6.0) if act == "Clip" else (0.0, np.inf)))

    def reference(x):
        v = x.astype(np.float64)
        if expand:
            v = act_fn(np_conv1x1(v, we, be))
        v = act_fn(np_dw3x3(v, wd, bd, stride, pads))
        if project:
            v = np_conv1x1(v, wp, bp)
        if residual:
            v = v + x
        return v

    return m, reference


def host_has_avx512():
    """Whether the CPU plugin's AVX-512 kernels can run here (Linux: /proc/cpuinfo's flags)."""
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and " avx512f" in line for line in f)
    except OSError:
        return False


def block_cases(nxrt, tmp):
    """Returns (failures, checks)."""
    rng = np.random.default_rng(13)
    block = "Conv+Clip+Conv+Clip+Conv+Add"
    cases = [  # what, model arguments, threads, the kernels expected, environment
        ("block stride 1 with residual", dict(shape=(1, 8, 20, 23), hidden=48, out_c=8, stride=1, residual=True),
         1, [block], {}),
        ("block stride 1 with residual, 2 threads",
         dict(shape=(1, 8, 20, 23), hidden=48, out_c=8, stride=1, residual=True), 2, [block], {}),
        ("block stride 2, Relu, no residual", dict(shape=(2, 6, 21, 34), hidden=36, out_c=10, stride=2, act="Relu"),
         2, ["Conv+Relu+Conv+Relu+Conv"], {}),
        ("block stride 2, TF pads 0/1", dict(shape=(1, 6, 30, 30), hidden=24, out_c=12, stride=2, pads=(0, 0, 1, 1)),
         1, ["Conv+Clip+Conv+Clip+Conv"], {}),
        ("block with HardSwish (MobileNetV3), stride 2, 2 threads",
         dict(shape=(1, 8, 22, 22), hidden=48, out_c=16, stride=2, act="HardSwish"), 2,
         ["Conv+HardSwish+Conv+HardSwish+Conv"], {}),
        ("block with HardSwish and residual", dict(shape=(1, 8, 20, 23), hidden=48, out_c=8, stride=1,
                                                    act="HardSwish", residual=True), 1,
         ["Conv+HardSwish+Conv+HardSwish+Conv+Add"], {}),
        ("HardSwish on a 7x7 map, planar (72 output channels, not whole 16s): the expand (a transposed "
         "product) apart, depthwise + project fused",
         dict(shape=(1, 72, 7, 7), hidden=384, out_c=72, stride=1, act="HardSwish"), 2,
         ["Conv+HardSwish", "Conv+HardSwish+Conv"], {"NXRT_CPU_ISA": "avx2"}),
        ("expand + depthwise only", dict(shape=(1, 4, 25, 40), hidden=24, out_c=0, stride=1, project=False), 2,
         ["Conv+Clip+Conv+Clip"], {}),
        ("depthwise + project only", dict(shape=(1, 16, 40, 40), hidden=16, out_c=8, stride=1, expand=False), 1,
         ["Conv+Clip+Conv"], {}),
        ("expanded value also a graph output: the expand stays apart",
         dict(shape=(1, 8, 20, 23), hidden=48, out_c=8, stride=1, residual=True, expose_hidden=True), 1,
         ["Conv+Clip", "Conv+Clip+Conv+Add"], {}),
        ("stride 2 into a 7x7 map, planar (under 96 expanded channels): expand + depthwise fuse, the project "
         "(transposed) apart",
         dict(shape=(1, 16, 14, 14), hidden=64, out_c=32, stride=2), 1, ["Conv+Clip+Conv+Clip", "Conv"],
         {"NXRT_CPU_ISA": "avx2"}),
        ("7x7 map, planar (72 output channels): the expand (a transposed product) apart, not one block",
         dict(shape=(1, 72, 7, 7), hidden=384, out_c=72, stride=1, residual=True), 1,
         ["Conv+Clip", "Conv+Clip+Conv+Add"],
         {"NXRT_CPU_ISA": "avx2"}),
        # Channels-last on AVX2 too (8 channels a vector): 7x7 maps run as one block.
        ("channels-last on AVX2, 7x7 map: one block",
         dict(shape=(1, 64, 7, 7), hidden=384, out_c=64, stride=1, residual=True), 1, [block],
         {"NXRT_CPU_ISA": "avx2"}),
        ("channels-last on AVX2, stride 2 into a 7x7 map: one block",
         dict(shape=(1, 24, 14, 14), hidden=144, out_c=32, stride=2), 2, ["Conv+Clip+Conv+Clip+Conv"],
         {"NXRT_CPU_ISA": "avx2"}),
        ("channels-last on AVX2, HardSwish on 7x7 maps: one block",
         dict(shape=(1, 64, 7, 7), hidden=384, out_c=64, stride=1, act="HardSwish"), 2,
         ["Conv+HardSwish+Conv+HardSwish+Conv"], {"NXRT_CPU_ISA": "avx2"}),
        ("channels-last on AVX2, stride 1 with residual, 2 threads",
         dict(shape=(1, 32, 28, 27), hidden=192, out_c=32, stride=1, residual=True), 2, [block],
         {"NXRT_CPU_ISA": "avx2"}),
        ("no direct depthwise kernel (generic ISA): not one block",
         dict(shape=(1, 8, 20, 23), hidden=48, out_c=8, stride=1, residual=True), 1, ["Conv+Add", "Conv+Clip"],
         {"NXRT_CPU_ISA": "generic"}),
    ]
    if host_has_avx512():
        # Channels-last (>= 96 expanded channels; AVX-512 here, AVX2 above): the 1x1 convs are
        # transposed products inside the block, so 7x7 maps run as one block too.
        avx512 = {"NXRT_CPU_ISA": "avx512"}
        cases += [
            ("channels-last block, stride 1 with residual, 2 threads",
             dict(shape=(1, 32, 28, 27), hidden=192, out_c=32, stride=1, residual=True), 2, [block], avx512),
            ("channels-last block, stride 2, TF pads 0/1, 112 channels",
             dict(shape=(1, 16, 30, 30), hidden=112, out_c=24, stride=2, pads=(0, 0, 1, 1)), 1,
             ["Conv+Clip+Conv+Clip+Conv"], avx512),
            ("channels-last 7x7 map: one block",
             dict(shape=(1, 64, 7, 7), hidden=384, out_c=64, stride=1, residual=True), 1, [block], avx512),
            ("channels-last stride 2 into a 7x7 map: one block",
             dict(shape=(1, 24, 14, 14), hidden=144, out_c=32, stride=2), 2, ["Conv+Clip+Conv+Clip+Conv"], avx512),
            ("channels-last HardSwish on 7x7 maps: one block",
             dict(shape=(1, 64, 7, 7), hidden=384, out_c=64, stride=1, act="HardSwish"), 2,
             ["Conv+HardSwish+Conv+HardSwish+Conv"], avx512),
        ]
    else:
        print("skip: the channels-last block cases (no AVX-512 on this CPU)")
    failures = 0
    for k, (what, args, threads, want, env) in enumerate(cases):
        m, reference = block_model(**args)
        x = rng.standard_normal(args["shape"]).astype(np.float32)
        saved = {key: os.environ.get(key) for key in env}
        os.environ.update(env)
        try:
            tag = f"block{k}"
            outs, p = run(nxrt, m, [x], tmp, tag, threads)
            groups = kernels_ran(nxrt, os.path.join(tmp, tag, "model.onnx"), os.path.join(tmp, tag)) if outs else None
        finally:
            for key, v in saved.items():
                if v is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = v
        if outs is None:
            print(f"FAIL {what}: nxrt failed: {p.stderr.strip()}")
            failures += 1
            continue
        want_y = reference(x)
        err = float(np.abs(outs[0] - want_y).max() / max(1.0, float(np.abs(want_y).max())))
        ok = err <= 1e-5 and groups == sorted(want)
        print(f"{'ok  ' if ok else 'FAIL'} {what}: max relative |err| {err:.2g}, kernels {groups} "
              f"(want {sorted(want)})")
        failures += 0 if ok else 1
    return failures, len(cases)


def se_model(shape, out_c, scale_first=False, residual=False, relu=False, const_scale=False, expose_mul=False,
             stride=1):
    """x -> squeeze-excite (GAP, 1x1 C -> C/4, Relu, 1x1 C/4 -> C, HardSigmoid) -> Mul(x, s) ->
    1x1 Conv (C -> out_c) [+ r] [-> Relu]; returns the model and a float64 numpy function of
    (x, r). const_scale: s is a constant [C, 1, 1] instead (no squeeze-excite branch)."""
    rng = np.random.default_rng(9)
    n, c, h, w = shape
    mid = max(1, c // 4)
    w1 = rng.standard_normal((mid, c, 1, 1)).astype(np.float32)
    b1 = rng.standard_normal(mid).astype(np.float32)
    w2 = rng.standard_normal((c, mid, 1, 1)).astype(np.float32)
    b2 = rng.standard_normal(c).astype(np.float32)
    wp = rng.standard_normal((out_c, c, 1, 1)).astype(np.float32)
    bp = rng.standard_normal(out_c).astype(np.float32)
    sc = rng.uniform(0.1, 1.0, (c, 1, 1)).astype(np.float32)
    inits = [numpy_helper.from_array(a, k) for a, k in ((w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"),
                                                        (wp, "wp"), (bp, "bp"))]
    nodes = []
    if const_scale:
        inits.append(numpy_helper.from_array(sc, "s"))
    else:
        nodes += [helper.make_node("GlobalAveragePool", ["x"], ["gap"], name="gap"),
                  helper.make_node("Conv", ["gap", "w1", "b1"], ["f1"], name="fc1"),
                  helper.make_node("Relu", ["f1"], ["r1"], name="fc1_relu"),
                  helper.make_node("Conv", ["r1", "w2", "b2"], ["f2"], name="fc2"),
                  helper.make_node("HardSigmoid", ["f2"], ["s"], name="gate", alpha=1 / 6, beta=0.5)]
    nodes.append(helper.make_node("Mul", ["s", "x"] if scale_first else ["x", "s"], ["xs"], name="scale"))
    nodes.append(helper.make_node("Conv", ["xs", "wp", "bp"], ["p"], name="project", strides=[stride, stride]))
    last = "p"
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))]
    oh, ow = (h - 1) // stride + 1, (w - 1) // stride + 1
    if residual:
        inputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, [n, out_c, oh, ow]))
        nodes.append(helper.make_node("Add", [last, "r"], ["pr"], name="res"))
        last = "pr"
    if relu:
        nodes.append(helper.make_node("Relu", [last], ["y"], name="act"))
        last = "y"
    outputs = [helper.make_tensor_value_info(last, TensorProto.FLOAT, None)]
    if expose_mul:
        outputs.append(helper.make_tensor_value_info("xs", TensorProto.FLOAT, None))
    g = helper.make_graph(nodes, "se", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m = onnx.shape_inference.infer_shapes(m)
    onnx.checker.check_model(m)

    def reference(x, r):
        x = x.astype(np.float64)
        if const_scale:
            s_ = sc.astype(np.float64)[None]
        else:
            f1 = np.maximum(np_conv1x1(x.mean(axis=(2, 3), keepdims=True), w1, b1), 0)
            s_ = np.clip(np_conv1x1(f1, w2, b2) / 6 + 0.5, 0, 1)
        y = np_conv1x1((x * s_)[:, :, ::stride, ::stride], wp.astype(np.float64), bp)
        if residual:
            y = y + r
        return np.maximum(y, 0) if relu else y
    return m, reference


def channel_scale_cases(nxrt, tmp):
    """Returns (failures, cases)."""
    rng = np.random.default_rng(23)
    se_branch = ["Conv", "Conv+Relu", "GlobalAveragePool", "HardSigmoid"]
    cases = [  # what, model arguments, threads, the kernels expected
        ("Mul -> 1x1 Conv", dict(shape=(1, 24, 16, 16), out_c=16), 1, se_branch + ["Mul+Conv"]),
        ("Mul(s, x) -> 1x1 Conv + residual -> Relu, 2 threads",
         dict(shape=(1, 40, 16, 16), out_c=24, scale_first=True, residual=True, relu=True), 2,
         se_branch + ["Mul+Conv+Add+Relu"]),
        ("per-image scale, batch 2", dict(shape=(2, 32, 16, 20), out_c=16, residual=True), 2,
         se_branch + ["Mul+Conv+Add"]),
        ("constant [C,1,1] scale", dict(shape=(1, 24, 16, 16), out_c=8, const_scale=True), 1, ["Mul+Conv"]),
        ("few pixels (transposed product: s applied to x^T as it is packed)",
         dict(shape=(1, 64, 3, 3), out_c=40, residual=True), 1, se_branch + ["Mul+Conv+Add"]),
        ("few pixels, per-image scale, batch 2, 2 threads", dict(shape=(2, 96, 2, 3), out_c=24), 2,
         se_branch + ["Mul+Conv"]),
        ("W larger than an image of x: the Mul stays", dict(shape=(1, 16, 14, 14), out_c=256), 1,
         se_branch + ["Conv", "Mul"]),
        ("the Mul's output also a graph output", dict(shape=(1, 24, 16, 16), out_c=16, expose_mul=True), 1,
         se_branch + ["Conv", "Mul"]),
        ("strided 1x1 conv", dict(shape=(1, 24, 16, 16), out_c=16, stride=2), 1, se_branch + ["Conv", "Mul"]),
    ]
    failures = 0
    for k, (what, args, threads, want) in enumerate(cases):
        m, reference = se_model(**args)
        x = rng.standard_normal(args["shape"]).astype(np.float32)
        feeds = [x]
        r = None
        if args.get("residual"):
            n, _, h, w = args["shape"]
            r = rng.standard_normal((n, args["out_c"], h, w)).astype(np.float32)
            feeds.append(r)
        tag = f"se{k}"
        outs, p = run(nxrt, m, feeds, tmp, tag, threads)
        if outs is None:
            print(f"FAIL {what}: nxrt failed: {p.stderr.strip()}")
            failures += 1
            continue
        groups = kernels_ran(nxrt, os.path.join(tmp, tag, "model.onnx"), os.path.join(tmp, tag))
        want_y = reference(x, r)
        err = float(np.abs(outs[0] - want_y).max() / max(1.0, float(np.abs(want_y).max())))
        ok = err <= 1e-5 and groups == sorted(set(want))
        print(f"{'ok  ' if ok else 'FAIL'} {what}: max relative |err| {err:.2g}, kernels {groups} "
              f"(want {sorted(set(want))})")
        failures += 0 if ok else 1
    return failures, len(cases)


def attention_model(extra_output=None):
    """Two heads of 3 over 5 positions, batch 2: s = q k^T, o = s v, with q, k, v the
    Reshape -> Transpose views of inputs [2, 5, 6] and o transposed and reshaped back."""
    shape4 = numpy_helper.from_array(np.array([2, 5, 2, 3], np.int64), "shape4")
    shape3 = numpy_helper.from_array(np.array([2, 5, 6], np.int64), "shape3")
    nodes = [helper.make_node("Reshape", ["xq", "shape4"], ["q4"]),
             helper.make_node("Transpose", ["q4"], ["q"], perm=[0, 2, 1, 3]),
             helper.make_node("Reshape", ["xk", "shape4"], ["k4"]),
             helper.make_node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
             helper.make_node("MatMul", ["q", "kt"], ["s"]),
             helper.make_node("Reshape", ["xv", "shape4"], ["v4"]),
             helper.make_node("Transpose", ["v4"], ["v"], perm=[0, 2, 1, 3]),
             helper.make_node("MatMul", ["s", "v"], ["o4"]),
             helper.make_node("Transpose", ["o4"], ["o"], perm=[0, 2, 1, 3]),
             helper.make_node("Reshape", ["o", "shape3"], ["y"])]
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 5, 6]) for n in ("xq", "xk", "xv")]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5, 6])]
    if extra_output:
        outs.append(helper.make_tensor_value_info(extra_output, TensorProto.FLOAT, None))
    m = helper.make_model(helper.make_graph(nodes, "attn", ins, outs, [shape4, shape3]),
                          opset_imports=[helper.make_opsetid("", 17)])
    m = onnx.shape_inference.infer_shapes(m)
    onnx.checker.check_model(m)
    return m


def single_view_model(x_shape, perm, b_shape, transpose_b_first=False):
    """y = Transpose(x, perm) @ b (or b @ Transpose(x, perm) when transpose_b_first)."""
    t = helper.make_node("Transpose", ["x"], ["xt"], perm=perm)
    mm = helper.make_node("MatMul", ["b", "xt"] if transpose_b_first else ["xt", "b"], ["y"])
    g = helper.make_graph([t, mm], "view", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape)),
                                            helper.make_tensor_value_info("b", TensorProto.FLOAT, list(b_shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = onnx.shape_inference.infer_shapes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    onnx.checker.check_model(m)
    return m


def scores_model(scale):
    """s = (q k^T) * scale over the Reshape -> Transpose views of inputs [2, 5, 6]."""
    shape4 = numpy_helper.from_array(np.array([2, 5, 2, 3], np.int64), "shape4")
    nodes = [helper.make_node("Reshape", ["xq", "shape4"], ["q4"]),
             helper.make_node("Transpose", ["q4"], ["q"], perm=[0, 2, 1, 3]),
             helper.make_node("Reshape", ["xk", "shape4"], ["k4"]),
             helper.make_node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
             helper.make_node("MatMul", ["q", "kt"], ["s"]),
             helper.make_node("Mul", ["scale", "s"], ["y"])]
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 5, 6]) for n in ("xq", "xk")]
    m = helper.make_model(helper.make_graph(nodes, "scores", ins,
                                            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2, 5, 5])],
                                            [shape4, numpy_helper.from_array(np.array(scale, np.float32), "scale")]),
                          opset_imports=[helper.make_opsetid("", 17)])
    m = onnx.shape_inference.infer_shapes(m)
    onnx.checker.check_model(m)
    return m


def view_cases(nxrt, tmp):
    """Returns (failures, cases)."""
    rng = np.random.default_rng(5)
    xq, xk, xv = (rng.standard_normal((2, 5, 6)).astype(np.float32) for _ in range(3))

    def attention_ref():
        heads = [t.astype(np.float64).reshape(2, 5, 2, 3).transpose(0, 2, 1, 3) for t in (xq, xk, xv)]
        s = heads[0] @ heads[1].transpose(0, 1, 3, 2)
        return (s @ heads[2]).transpose(0, 2, 1, 3).reshape(2, 5, 6)

    def scores_ref(scale):
        q, k = (t.astype(np.float64).reshape(2, 5, 2, 3).transpose(0, 2, 1, 3) for t in (xq, xk))
        return (q @ k.transpose(0, 1, 3, 2)) * np.float32(scale)

    x3 = rng.standard_normal((4, 3, 5)).astype(np.float32)
    b2 = rng.standard_normal((4, 7)).astype(np.float32)
    bt = rng.standard_normal((6, 3)).astype(np.float32)
    x2 = rng.standard_normal((5, 3)).astype(np.float32)
    xn = rng.standard_normal((2, 3, 4)).astype(np.float32)
    bn = rng.standard_normal((3, 5)).astype(np.float32)
    cases = [  # what, model, feeds, reference, kernels wanted, threads
        ("attention heads (Reshape -> Transpose views, Transpose -> Reshape out)", attention_model(),
         [xq, xk, xv], attention_ref, None, None),
        ("attention heads, 2 threads", attention_model(), [xq, xk, xv], attention_ref, None, 2),
        ("a transposed operand [4,3,5] -> [3,5,4] @ B [4,7] (B broadcast)", single_view_model((4, 3, 5), [1, 2, 0], (4, 7)),
         [x3, b2], lambda: x3.astype(np.float64).transpose(1, 2, 0) @ b2, ["Transpose+MatMul"], None),
        ("B = Transpose(x) [5,3] -> [3,5], A [6,3]", single_view_model((5, 3), [1, 0], (6, 3), True),
         [x2, bt], lambda: bt.astype(np.float64) @ x2.astype(np.float64).T, ["Transpose+MatMul"], None),
        ("no unit-stride axis: [2,3,4] -> [4,2,3] stays node by node", single_view_model((2, 3, 4), [2, 0, 1], (3, 5)),
         [xn, bn], lambda: xn.astype(np.float64).transpose(2, 0, 1) @ bn, ["MatMul", "Transpose"], None),
        ("scores * 0.125 (a power of two: packed into A)", scores_model(0.125), [xq, xk],
         lambda: scores_ref(0.125), ["Reshape+Transpose+Reshape+Transpose+MatMul+Mul"], None),
        ("scores * 0.1 (not a power of two: its own Mul)", scores_model(0.1), [xq, xk],
         lambda: scores_ref(0.1), ["Mul", "Reshape+Transpose+Reshape+Transpose+MatMul"], None),
        ("a transposed value also a graph output stays node by node", attention_model(extra_output="kt"),
         [xq, xk, xv], attention_ref, ["Reshape", "Transpose", "Reshape+Transpose+MatMul",
                                       "Reshape+Transpose+MatMul+Transpose+Reshape"], None),
    ]
    failures = 0
    for k, (what, m, feeds, ref, want, threads) in enumerate(cases):
        tag = f"view{k}"
        outs, p = run(nxrt, m, feeds, tmp, tag, threads=threads)
        if outs is None:
            print(f"FAIL {what}: nxrt failed: {p.stderr.strip()}")
            failures += 1
            continue
        want_y = ref()
        err = float(np.abs(outs[0] - want_y).max())
        groups = kernels_ran(nxrt, os.path.join(tmp, tag, "model.onnx"), os.path.join(tmp, tag))
        if want is None:  # attention: each MatMul with its views
            ok_groups = groups == sorted(["Reshape+Transpose+Reshape+Transpose+MatMul",
                                          "Reshape+Transpose+MatMul+Transpose+Reshape"])
        else:
            ok_groups = groups == sorted(want)
        ok = err <= 1e-5 and ok_groups
        print(f"{'ok  ' if ok else 'FAIL'} {what}: max |err| {err:.2g}, kernels {groups}")
        failures += 0 if ok else 1
    return failures, len(cases)


def batched_model(a_shape, b):
    """y = a @ b; b a numpy array (an initializer: prepacked per batch) or a shape (an input)."""
    inputs = [helper.make_tensor_value_info("a", TensorProto.FLOAT, list(a_shape))]
    inits = []
    if isinstance(b, np.ndarray):
        inits.append(numpy_helper.from_array(b, "b"))
    else:
        inputs.append(helper.make_tensor_value_info("b", TensorProto.FLOAT, list(b)))
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "batched", inputs,
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = onnx.shape_inference.infer_shapes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    onnx.checker.check_model(m)
    return m


def batched_cases(nxrt, tmp):
    """MatMul's batched product where B has batch dims of its own: each output batch reads its
    A and B batch by their strides, 1s broadcast, B an input or a prepacked initializer.
    Returns (failures, cases)."""
    rng = np.random.default_rng(9)
    shapes = [((3, 1, 2, 4), (5, 4, 6)), ((2, 3, 5), (1, 5, 4)), ((4, 7), (2, 3, 7, 5)),
              ((1, 2, 3, 4), (2, 1, 4, 3)), ((2, 1, 3, 4), (1, 2, 4, 3))]
    failures = cases = 0
    for k, (ash, bsh) in enumerate(shapes):
        a = rng.standard_normal(ash).astype(np.float32)
        b = rng.standard_normal(bsh).astype(np.float32)
        want = a.astype(np.float64) @ b.astype(np.float64)
        for const_b in (False, True):
            for threads in (1, 2):
                cases += 1
                what = f"A {list(ash)} @ B {list(bsh)} ({'initializer' if const_b else 'input'}, {threads} thread(s))"
                m = batched_model(ash, b if const_b else bsh)
                outs, p = run(nxrt, m, [a] if const_b else [a, b], tmp, f"batched{k}_{int(const_b)}_{threads}",
                              threads=threads)
                if outs is None:
                    print(f"FAIL {what}: nxrt failed: {p.stderr.strip()}")
                    failures += 1
                    continue
                ok = outs[0].shape == want.shape and float(np.abs(outs[0] - want).max()) <= 1e-5
                print(f"{'ok  ' if ok else 'FAIL'} {what}: shape {list(outs[0].shape)}")
                failures += 0 if ok else 1
    return failures, cases


def np_conv2d(x, w, b, stride, pad, group=1):
    """float64 conv, NCHW, square stride / symmetric pad."""
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, c, h, wd = x.shape
    oc, icg, kh, kw = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    y = np.zeros((n, oc, oh, ow))
    ocg = oc // group
    for g in range(group):
        xs = x[:, g * icg:(g + 1) * icg]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
                y[:, g * ocg:(g + 1) * ocg] += np.einsum("nchw,oc->nohw", patch, w[g * ocg:(g + 1) * ocg, :, i, j])
    return y + b.reshape(1, -1, 1, 1)


def np_max_pool(x, k, stride, pad, ceil=False):
    """float64 2-D max pool, padding never wins."""
    n, c, h, wd = x.shape
    def out(d):
        span = d + 2 * pad - k
        o = (-(-span // stride) if ceil else span // stride) + 1
        return o - 1 if ceil and (o - 1) * stride >= d + pad else o
    oh, ow = out(h), out(wd)
    xp = np.full((n, c, h + 2 * pad + stride, wd + 2 * pad + stride), -np.inf)
    xp[:, :, pad:pad + h, pad:pad + wd] = x
    y = np.full((n, c, oh, ow), -np.inf)
    for i in range(k):
        for j in range(k):
            y = np.maximum(y, xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride])
    return y


def conv_pool_model(x_shape, w, b, stride, pad, act, pool, group=1, indices=False, act_output=False):
    """Conv -> [act] -> MaxPool; pool = (k, stride, pad, ceil)."""
    k, ps, pp, ceil = pool
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=list(w.shape[2:]), strides=[stride] * 2,
                              pads=[pad] * 4, group=group)]
    v = "c"
    if act == "Relu":
        nodes.append(helper.make_node("Relu", ["c"], ["a"]))
        v = "a"
    elif act == "Clip":
        nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], ["a"]))
        v = "a"
    pool_out = ["y", "idx"] if indices else ["y"]
    nodes.append(helper.make_node("MaxPool", [v], pool_out, kernel_shape=[k, k], strides=[ps, ps], pads=[pp] * 4,
                                  ceil_mode=int(ceil)))
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if indices:
        outputs.append(helper.make_tensor_value_info("idx", TensorProto.INT64, None))
    if act_output:
        outputs.append(helper.make_tensor_value_info(v, TensorProto.FLOAT, None))
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b"),
             numpy_helper.from_array(np.array(0.0, np.float32), "lo"), numpy_helper.from_array(np.array(6.0, np.float32), "hi")]
    g = helper.make_graph(nodes, "convpool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
                          outputs, inits)
    m = onnx.shape_inference.infer_shapes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    onnx.checker.check_model(m)
    return m


def conv_pool_cases(nxrt, tmp):
    """Conv [-> act] -> MaxPool groups against numpy, and the chains that must stay apart.
    Returns (failures, cases)."""
    rng = np.random.default_rng(13)
    specs = [  # what, x shape, (oc, k), stride, pad, act, pool (k, stride, pad, ceil), group, indices, act output, kernels
        ("7x7/2 stem, Relu, pool 3x3/2", (1, 3, 40, 40), (16, 7), 2, 3, "Relu", (3, 2, 1, False), 1, False, False,
         ["Conv+Relu+MaxPool"]),
        ("5x5 conv, pool 2x2/2 ceil on 21x37", (2, 4, 21, 37), (8, 5), 1, 2, None, (2, 2, 0, True), 1, False, False,
         ["Conv+MaxPool"]),
        ("3x3 conv, Clip, pool 3x3/1", (1, 5, 24, 30), (12, 3), 1, 1, "Clip", (3, 1, 1, False), 1, False, False,
         ["Conv+Clip+MaxPool"]),
        ("1x1 conv, Relu, pool 3x3/2 (conv then pool)", (1, 8, 15, 15), (16, 1), 1, 0, "Relu", (3, 2, 1, False), 1,
         False, False, ["Conv+Relu+MaxPool"]),
        ("pool with Indices (unfused)", (1, 3, 20, 20), (8, 3), 1, 1, "Relu", (3, 2, 1, False), 1, True, False,
         ["Conv+Relu", "MaxPool"]),
        ("Relu also a graph output (unfused)", (1, 3, 20, 20), (8, 3), 1, 1, "Relu", (3, 2, 1, False), 1, False, True,
         ["Conv+Relu", "MaxPool"]),
        ("grouped conv (unfused)", (1, 4, 20, 20), (8, 3), 1, 1, "Relu", (3, 2, 1, False), 2, False, False,
         ["Conv+Relu", "MaxPool"]),
    ]
    failures = cases = 0
    for k, (what, xs, (oc, ks), stride, pad, act, pool, group, indices, act_out, want_groups) in enumerate(specs):
        x = rng.standard_normal(xs).astype(np.float32)
        w = (rng.standard_normal((oc, xs[1] // group, ks, ks)) * 0.3).astype(np.float32)
        b = rng.standard_normal(oc).astype(np.float32)
        c = np_conv2d(x, w, b, stride, pad, group)
        if act == "Relu":
            c = np.maximum(c, 0)
        elif act == "Clip":
            c = np.clip(c, 0, 6)
        want = np_max_pool(c, pool[0], pool[1], pool[2], pool[3])
        m = conv_pool_model(xs, w, b, stride, pad, act, pool, group, indices, act_out)
        for threads in (1, 2):
            cases += 1
            tag = f"convpool{k}_{threads}"
            outs, p = run(nxrt, m, [x], tmp, tag, threads=threads)
            if outs is None:
                print(f"FAIL {what}: nxrt failed: {p.stderr.strip()}")
                failures += 1
                continue
            err = float(np.abs(outs[0] - want).max()) if outs[0].shape == want.shape else float("inf")
            groups = kernels_ran(nxrt, os.path.join(tmp, tag, "model.onnx"), os.path.join(tmp, tag))
            ok = err <= 1e-4 and groups == sorted(want_groups)
            print(f"{'ok  ' if ok else 'FAIL'} {what} ({threads} thread(s)): max |err| {err:.2g}, kernels {groups}"
                  f" (want {sorted(want_groups)})")
            failures += 0 if ok else 1
    return failures, cases


if __name__ == "__main__":
    sys.exit(main())
