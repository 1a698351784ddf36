#!/usr/bin/python3
"""End-to-end checks of the Vulkan plugin through the nxrt CLI.

Usage: e2e.py MODE --build BUILD_DIR
(Node tests and bench models run through tools/node_tests.py and tools/model_tests.py.)
  mixed     a model with an op Vulkan lacks, run with `--ep vulkan,cpu`: it must
            partition (with transfers) and match `--ep cpu`.
  nodriver  with no Vulkan driver or loader the plugin loads and reports no device
            with a reason.
  fp16      three float16 models run wholly on `--ep vulkan` (the placement line must
            name only vulkan, with every node of the model) and match numpy (float32
            arithmetic on the float16 values, rounded to float16 at each tensor):
            "mlp" (MatMul, Add, Relu, Reshape, Gemm, Tanh, Sigmoid, Mul, Softmax,
            LogSoftmax; rtol 2e-3, atol 1e-4) and "cnn" (Conv dense/grouped on the
            implicit-GEMM path and depthwise/grouped on the direct path, BatchNormalization,
            MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool, Concat, Transpose,
            LayerNormalization, ReduceMean, ReduceSum, Gather with int64 and int32
            indices, Slice, Expand; rtol 2e-3, atol 1e-3), and "mixed" (float32 in and
            out, float16 inside: Cast, MatMul, Relu, Cast, plus Shape -> Cast int32 ->
            Cast int64). Skipped where the device lacks 16-bit storage.
  profile   `nxrt bench --profile` over a model split vulkan / cpu / vulkan (Conv+Relu,
            Round on cpu, Conv+Sigmoid): the Chrome trace has, per profiled run, one
            "cat":"device" event per Vulkan kernel on the "vulkan device" track, named by
            the group's op types, with end >= start, a positive duration for the Convs,
            inside the run's span; `nxrt plugins --verbose` lists run-hooks and
            device-profiling when the device has timestamps.
  options   session options through `--ep-option`: vulkan.pipeline_cache=PATH creates a
            non-empty cache file that a second run loads (NXRT_VULKAN_STATS=1 says
            "loaded N bytes"), a foreign file is ignored and replaced; vulkan.device=99
            fails (exit 1 or 2) with a message naming vulkan.device; vulkan.device=abc
            and an unknown vulkan.* key are rejected by the host (exit 2).
  cache     issue 12's check: `nxrt compile --target` with no Vulkan driver visible
            (VK_DRIVER_FILES=/nonexistent) for lavapipe's description (from `nxrt plugins
            --json`, else tests/data/lavapipe_device.json) writes OUT.nxrt; on lavapipe
            `nxrt inspect OUT.nxrt` says "vulkan: optimal", every kernel imported and none
            compiled, and `nxrt run OUT.nxrt` gives the bytes the .onnx gives; the same model
            compiled for the description with subgroup size 32 is "must recompile" with a
            reason naming the subgroup size and both values, and still runs (compiled again);
            a model compiled on lavapipe itself and a --cache folder's second session import
            their kernel ("optimal", 0 compiled).
            Without a device only the compile is checked (exit 77 = SKIP).
Validation layers are enabled (NXRT_VULKAN_VALIDATION=1); any validation message fails
the run. A missing nxrt binary is a failure, not a skip.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

RTOL, ATOL = 1e-3, 1e-4
HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tools"))
import compare as tools_compare  # noqa: E402


def nxrt(build):
    p = os.path.join(build, "bin", "nxrt")
    return p if os.path.exists(p) else None


def run(cmd, env=None, timeout=600):
    e = dict(os.environ)
    if env:
        e.update(env)
    return subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=timeout)


def compare(got_dir, want_dir, what):
    """The ONNX backend rule (tools/compare.py) over every output_K.pb of two folders."""
    wants = sorted(glob.glob(os.path.join(want_dir, "output_*.pb")))
    if not wants:
        return f"{what}: no reference outputs"
    for w in wants:
        g = os.path.join(got_dir, os.path.basename(w))
        if not os.path.exists(g):
            return f"{what}: {os.path.basename(w)} missing"
        why = tools_compare.mismatch(tools_compare.load(g), tools_compare.load(w), RTOL, ATOL)
        if why:
            return f"{what}: {os.path.basename(w)}: {why}"
    return None


def vk_env(validation=True):
    return {"NXRT_VULKAN_VALIDATION": "1"} if validation else {}


def validation_clean(res):
    return "nxrt-vulkan validation:" not in res.stderr


def random_inputs(model_path, outdir, seed=0):
    m = onnx.load(model_path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    rng = np.random.default_rng(seed)
    k = 0
    for i in m.graph.input:
        if i.name in inits:
            continue
        shape = [d.dim_value if d.dim_value > 0 else 1 for d in i.type.tensor_type.shape.dim]
        a = rng.standard_normal(shape).astype(np.float32)
        t = numpy_helper.from_array(a, i.name)
        with open(os.path.join(outdir, f"input_{k}.pb"), "wb") as f:
            f.write(t.SerializeToString())
        k += 1


def run_compare(exe, model, eps, ref_ep="cpu", validation=False, expect_placement=None):
    with tempfile.TemporaryDirectory() as tmp:
        ind, o1, o2 = (os.path.join(tmp, x) for x in ("in", "ref", "vk"))
        for x in (ind, o1, o2):
            os.makedirs(x)
        random_inputs(model, ind)
        r = run([exe, "run", model, "--ep", ref_ep, "--input-dir", ind, "--output-dir", o1])
        if r.returncode != 0:
            return f"{model}: --ep {ref_ep} failed: {r.stderr[-400:]}", None
        r = run([exe, "run", model, "--ep", eps, "--input-dir", ind, "--output-dir", o2], vk_env(validation))
        if r.returncode != 0:
            return f"{model}: --ep {eps} failed: {r.stderr[-600:]}", None
        if not validation_clean(r):
            return f"{model}: validation messages: {r.stderr[-800:]}", None
        placement = [l for l in (r.stdout + r.stderr).splitlines() if l.startswith("placement")]
        if expect_placement:
            for word in expect_placement:
                if not any(word in p for p in placement):
                    return f"{model}: placement {placement} lacks '{word}'", None
        return compare(o2, o1, os.path.basename(model)), placement


def mode_mixed(args):
    exe = nxrt(args.build)
    if not exe:
        print("FAIL: no nxrt binary under --build")
        return 1
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((36, 36)).astype(np.float32), "w")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["a"]),
        helper.make_node("Relu", ["a"], ["b"]),
        # 3-D MaxPool: Vulkan refuses it (2-D only), the cpu plugin runs it.
        helper.make_node("MaxPool", ["b"], ["c"], kernel_shape=[2, 2, 2], strides=[1, 1, 1]),
        helper.make_node("Softmax", ["c"], ["d"], axis=-1),
        helper.make_node("Mul", ["d", "d"], ["y"]),
    ]
    g = helper.make_graph(nodes, "mixed", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 6, 36])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 3, 5, 35])], initializer=[w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "mixed.onnx")
        onnx.save(m, path)
        err, placement = run_compare(exe, path, "vulkan,cpu", validation=True, expect_placement=["vulkan", "cpu"])
    print(f"mixed: {'FAIL ' + err if err else 'ok'} {placement or ''}")
    return 1 if err else 0


def fp16_model(rng):
    """The model, its input and the numpy reference outputs."""
    h16 = lambda *shape: rng.uniform(-1, 1, shape).astype(np.float16)
    W1, b1, W2, b2 = h16(16, 72), h16(72), h16(10, 72), h16(10)
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["m"]),  # 80 x 72: the 64x64 GEMM tile class
        helper.make_node("Add", ["m", "b1"], ["a"]),
        helper.make_node("Relu", ["a"], ["r"]),
        helper.make_node("Reshape", ["r", "shp"], ["r2"]),
        helper.make_node("Gemm", ["r2", "W2", "b2"], ["g"], transB=1, alpha=0.5),
        helper.make_node("Tanh", ["g"], ["t"]),
        helper.make_node("Sigmoid", ["g"], ["s"]),
        helper.make_node("Mul", ["t", "s"], ["ts"]),
        helper.make_node("Softmax", ["ts"], ["y"], axis=-1),
        helper.make_node("LogSoftmax", ["g"], ["z"], axis=-1),
    ]
    inits = [numpy_helper.from_array(v, n) for v, n in ((W1, "W1"), (b1, "b1"), (W2, "W2"), (b2, "b2"))]
    inits.append(numpy_helper.from_array(np.array([80, 72], np.int64), "shp"))
    F16 = TensorProto.FLOAT16
    g = helper.make_graph(nodes, "fp16", [helper.make_tensor_value_info("x", F16, [2, 40, 16])],
                          [helper.make_tensor_value_info("y", F16, [80, 10]), helper.make_tensor_value_info("z", F16, [80, 10])],
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    x = rng.uniform(-2, 2, (2, 40, 16)).astype(np.float16)
    f = lambda v: v.astype(np.float16).astype(np.float32)
    r = f(np.maximum(f(f(x.astype(np.float32) @ W1.astype(np.float32)) + b1.astype(np.float32)), 0)).reshape(80, 72)
    gg = f(0.5 * (r @ W2.astype(np.float32).T) + b2.astype(np.float32))
    ts = f(f(np.tanh(gg)) * f(1 / (1 + np.exp(-gg))))
    e = np.exp(ts - ts.max(-1, keepdims=True))
    y = f(e / e.sum(-1, keepdims=True))
    sh = gg - gg.max(-1, keepdims=True)
    z = f(sh - np.log(np.exp(sh).sum(-1, keepdims=True)))
    return m, x, [y, z]


F16 = lambda v: v.astype(np.float16).astype(np.float32)  # round a float32 tensor to float16


def ref_conv(x, w, b, stride, pad, group):
    """float32 Conv (NCHW, square kernel, symmetric pads), as numpy would compute it."""
    n, c, h, wd = x.shape
    co, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    og = co // group
    y = np.zeros((n, co, oh, ow), np.float32)
    for g in range(group):
        xs = xp[:, g * cg:(g + 1) * cg]
        cols = np.stack([xs[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride] for i in range(kh) for j in range(kw)], 2)
        y[:, g * og:(g + 1) * og] = np.einsum("nckhw,ock->nohw", cols, w[g * og:(g + 1) * og].reshape(og, cg, kh * kw))
    return y + b.reshape(1, -1, 1, 1) if b is not None else y


def ref_pool(x, k, stride, pad, mode):
    """MaxPool / AveragePool (count_include_pad=0) over k x k windows, float32."""
    n, c, h, w = x.shape
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=np.nan)
    win = np.stack([xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride] for i in range(k) for j in range(k)], -1)
    if mode == "max":
        return np.nanmax(win, -1)
    return (np.nansum(win, -1) / np.sum(~np.isnan(win), -1)).astype(np.float32)


def fp16_cnn_model(rng):
    """A float16 CNN over every float16 kernel family past the mlp model, with its numpy reference."""
    h16 = lambda *shape, lo=-1, hi=1: rng.uniform(lo, hi, shape).astype(np.float16)
    W1, b1 = h16(32, 8, 3, 3, lo=-0.3, hi=0.3), h16(32)
    bn_s, bn_b, bn_m, bn_v = h16(32, lo=0.5, hi=1.5), h16(32), h16(32, lo=-0.5, hi=0.5), h16(32, lo=0.2, hi=2)
    Wd, bd = h16(32, 1, 3, 3, lo=-0.5, hi=0.5), h16(32)
    Wg, bg = h16(32, 16, 3, 3, lo=-0.15, hi=0.15), h16(32)
    Wq = h16(8, 8, 1, 1, lo=-0.5, hi=0.5)
    ln_s, ln_b = h16(40, lo=0.5, hi=1.5), h16(40)
    i64 = np.array([4, 0, -1, 17], np.int64)
    i32 = np.array([3, 39, 0], np.int32)
    nodes = [
        # dense, pads and strides: implicit GEMM (Cout/group = 32, K = 72)
        helper.make_node("Conv", ["x", "W1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        # after Relu, so the host cannot fold it into the Conv
        helper.make_node("BatchNormalization", ["r1", "bn_s", "bn_b", "bn_m", "bn_v"], ["bn"], epsilon=1e-3),
        # depthwise (group = C): direct kernel
        helper.make_node("Conv", ["bn", "Wd", "bd"], ["dw"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=32),
        # grouped, Cout/group = 16, K = 144: implicit GEMM per group
        helper.make_node("Conv", ["dw", "Wg", "bg"], ["gg"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=2),
        # grouped, Cout/group = 2, no bias: direct kernel
        helper.make_node("Conv", ["dw", "Wq"], ["gd"], kernel_shape=[1, 1], group=4),
        helper.make_node("Concat", ["gg", "gd"], ["cat"], axis=1),
        helper.make_node("MaxPool", ["cat"], ["mp"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("AveragePool", ["cat"], ["ap"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["mp", "ap"], ["s"]),
        helper.make_node("GlobalAveragePool", ["cat"], ["gap"]),
        helper.make_node("GlobalMaxPool", ["s"], ["gmp"]),
        helper.make_node("Transpose", ["s"], ["t"], perm=[0, 2, 3, 1]),
        helper.make_node("LayerNormalization", ["t", "ln_s", "ln_b"], ["ln"], axis=-1),
        helper.make_node("ReduceMean", ["ln"], ["rm"], axes=[1, 2], keepdims=0),
        helper.make_node("ReduceSum", ["t", "rs_axes"], ["rs"], keepdims=1),
        helper.make_node("Gather", ["rm", "i64"], ["ga"], axis=1),
        helper.make_node("Gather", ["cat", "i32"], ["gb"], axis=1),
        helper.make_node("Slice", ["ln", "sl_s", "sl_e", "sl_a", "sl_p"], ["sl"]),
        helper.make_node("Expand", ["gmp", "ex_shape"], ["ex"]),
    ]
    arrays = dict(W1=W1, b1=b1, bn_s=bn_s, bn_b=bn_b, bn_m=bn_m, bn_v=bn_v, Wd=Wd, bd=bd, Wg=Wg, bg=bg, Wq=Wq, ln_s=ln_s,
                  ln_b=ln_b, i64=i64, i32=i32, rs_axes=np.array([3], np.int64), sl_s=np.array([1], np.int64),
                  sl_e=np.array([40], np.int64), sl_a=np.array([3], np.int64), sl_p=np.array([3], np.int64),
                  ex_shape=np.array([2, 40, 2, 3], np.int64))
    inits = [numpy_helper.from_array(v, k) for k, v in arrays.items()]
    F16T = TensorProto.FLOAT16
    outs = [("gap", [2, 40, 1, 1]), ("rm", [2, 40]), ("ga", [2, 4]), ("gb", [2, 3, 5, 5]), ("sl", [2, 3, 3, 13]),
            ("rs", [2, 3, 3, 1]), ("ex", [2, 40, 2, 3]), ("ln", [2, 3, 3, 40])]
    g = helper.make_graph(nodes, "fp16_cnn", [helper.make_tensor_value_info("x", F16T, [2, 8, 9, 9])],
                          [helper.make_tensor_value_info(n, F16T, s) for n, s in outs], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)

    x = rng.uniform(-2, 2, (2, 8, 9, 9)).astype(np.float16)
    a = {k: v.astype(np.float32) if v.dtype == np.float16 else v for k, v in arrays.items()}
    c1 = F16(ref_conv(x.astype(np.float32), a["W1"], a["b1"], 2, 1, 1))
    r1 = np.maximum(c1, 0)
    ch = lambda v: v.reshape(1, -1, 1, 1)
    bn = F16((r1 - ch(a["bn_m"])) / np.sqrt(ch(a["bn_v"]) + np.float32(1e-3)) * ch(a["bn_s"]) + ch(a["bn_b"]))
    dw = F16(ref_conv(bn, a["Wd"], a["bd"], 1, 1, 32))
    gg = F16(ref_conv(dw, a["Wg"], a["bg"], 1, 1, 2))
    gd = F16(ref_conv(dw, a["Wq"], None, 1, 0, 4))
    cat = np.concatenate([gg, gd], 1)
    mp = ref_pool(cat, 3, 2, 1, "max")
    ap = F16(ref_pool(cat, 3, 2, 1, "avg"))
    s_ = F16(mp + ap)
    gap = F16(cat.mean((2, 3), keepdims=True))
    gmp = s_.max((2, 3), keepdims=True)
    t = s_.transpose(0, 2, 3, 1)
    mu = t.mean(-1, keepdims=True)
    var = ((t - mu) ** 2).mean(-1, keepdims=True)
    ln = F16((t - mu) / np.sqrt(var + np.float32(1e-5)) * a["ln_s"] + a["ln_b"])
    rm = F16(ln.mean((1, 2)))
    rs = F16(t.sum(3, keepdims=True))
    ga = rm[:, [4, 0, 39, 17]]
    gb = cat[:, [3, 39, 0]]
    sl = ln[:, :, :, 1:40:3]
    ex = np.broadcast_to(gmp, (2, 40, 2, 3))
    return m, x, [gap, rm, ga, gb, sl, rs, ex, ln]


def mixed_model(rng):
    """float32 in and out, float16 inside: Cast -> MatMul -> Relu -> Cast, plus an int64 -> int32
    -> int64 index round trip; the usual shape of a mixed-precision model."""
    W = rng.uniform(-1, 1, (24, 20)).astype(np.float16)
    F32, F16T, I64, I32 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.INT64, TensorProto.INT32
    nodes = [
        helper.make_node("Cast", ["x"], ["xh"], to=F16T),
        helper.make_node("MatMul", ["xh", "W"], ["m"]),
        helper.make_node("Relu", ["m"], ["r"]),
        helper.make_node("Cast", ["r"], ["y"], to=F32),
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Cast", ["s"], ["s32"], to=I32),
        helper.make_node("Cast", ["s32"], ["z"], to=I64),
    ]
    g = helper.make_graph(nodes, "mixed", [helper.make_tensor_value_info("x", F32, [3, 7, 24])],
                          [helper.make_tensor_value_info("y", F32, [3, 7, 20]), helper.make_tensor_value_info("z", I64, [3])],
                          initializer=[numpy_helper.from_array(W, "W")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    x = rng.uniform(-2, 2, (3, 7, 24)).astype(np.float32)
    y = F16(np.maximum(F16(F16(x) @ W.astype(np.float32)), 0))
    return m, x, [y, np.array([3, 7, 24], np.int64)]


def run_fp16_model(exe, tmp, name, m, x, refs, atol):
    """Runs one float16 model strictly on Vulkan with validation on; returns a list of problems."""
    path, out = os.path.join(tmp, f"{name}.onnx"), os.path.join(tmp, f"{name}_out")
    onnx.save(m, path)
    with open(os.path.join(tmp, f"{name}_x.pb"), "wb") as fh:
        fh.write(numpy_helper.from_array(x, "x").SerializeToString())
    # --opt 0: every node must run on Vulkan, so none may be folded away at load.
    r = run([exe, "run", path, "--ep", "vulkan", "--opt", "0", "--input", f"x={tmp}/{name}_x.pb", "--output-dir", out],
            vk_env(True))
    if r.returncode != 0 or not validation_clean(r):
        return [f"{name}: rc={r.returncode}\n{r.stderr[-800:]}"]
    placement = [l for l in (r.stdout + r.stderr).splitlines() if l.startswith("placement")]
    bad = []
    # Strict and whole: only vulkan, every node of the model (none folded away or fallen back).
    want = f"placement: vulkan: {len(m.graph.node)} nodes;"
    if len(placement) != 1 or not placement[0].startswith(want):
        bad.append(f"{name}: placement {placement}, expected '{want} ...'")
    for k, w in enumerate(refs):
        got = tools_compare.load(os.path.join(out, f"output_{k}.pb"))
        want_dt = np.dtype(np.float16 if x.dtype == np.float16 else w.dtype)  # float16 models, or float32/int I/O
        if got.dtype != want_dt or got.shape != w.shape:
            bad.append(f"{name} output {k} is {got.dtype} {list(got.shape)}, expected {want_dt} {list(w.shape)}")
            continue
        d = np.abs(got.astype(np.float32) - w)
        if not np.all(d <= atol + RTOL_F16 * np.abs(w)):
            bad.append(f"{name} output {k}: max abs diff {d.max()}")
        print(f"{name} output {k}: {got.dtype} {list(got.shape)}, max abs diff {d.max():.3g}, "
              f"{np.count_nonzero(d)} of {d.size} differ")
    print(f"{name}: {'FAIL' if bad else 'ok'} {placement}")
    return bad


# float16 results against numpy: rtol 2e-3 is two float16 ulps (2^-10 relative) for the
# one-rounding differences a different float32 summation order can cause. atol: 1e-4 for
# the mlp; 1e-3 for the cnn, where a flipped rounding of an intermediate (up to 1 ulp,
# 2^-11..2^-10 of values below 2) is carried through the later Convs and LayerNormalization.
RTOL_F16 = 2e-3


def mode_fp16(args):
    exe = nxrt(args.build)
    if not exe:
        print("FAIL: no nxrt binary under --build")
        return 1
    r = run([exe, "plugins"])
    if "vulkan.storage_buffer_16bit: 1" not in r.stdout + r.stderr:
        print("skip: no Vulkan device with storageBuffer16BitAccess")
        return 77  # reported by ctest as skipped, never as a pass
    bad = []
    with tempfile.TemporaryDirectory() as tmp:
        bad += run_fp16_model(exe, tmp, "mlp", *fp16_model(np.random.default_rng(7)), atol=1e-4)
        bad += run_fp16_model(exe, tmp, "cnn", *fp16_cnn_model(np.random.default_rng(11)), atol=1e-3)
        bad += run_fp16_model(exe, tmp, "mixed", *mixed_model(np.random.default_rng(13)), atol=1e-4)
    print(f"fp16: {'FAIL ' + '; '.join(bad) if bad else 'ok'}")
    return 1 if bad else 0


def mode_nodriver(args):
    exe = nxrt(args.build)
    if not exe:
        print("FAIL: no nxrt binary under --build")
        return 1
    bad = []
    for env in ({"VK_ICD_FILENAMES": "/nonexistent.json", "VK_DRIVER_FILES": "/nonexistent.json"},
                {"NXRT_VULKAN_LOADER": "/nonexistent/libvulkan.so.1"}):
        r = run([exe, "plugins"], env)
        out = r.stdout + r.stderr
        sect = out[out.find("\nvulkan"):] if "\nvulkan" in out else out[out.find("vulkan"):]
        if r.returncode != 0 or "devices: 0" not in sect or "no device:" not in sect:
            bad.append(f"{env}: rc={r.returncode}\n{out[-800:]}")
        else:
            print(f"{list(env)[0]}: {[l.strip() for l in sect.splitlines() if 'no device' in l]}")
    for f in bad:
        print("FAIL", f)
    return 1 if bad else 0


def split_conv_model(rng):
    """Conv+Relu (vulkan) -> Round (cpu: Vulkan has no Round) -> Conv+Sigmoid (vulkan)."""
    W1 = rng.uniform(-0.3, 0.3, (16, 8, 3, 3)).astype(np.float32)
    W2 = rng.uniform(-0.3, 0.3, (16, 16, 3, 3)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "W1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Round", ["r1"], ["q"]),
        helper.make_node("Conv", ["q", "W2"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Sigmoid", ["c2"], ["y"]),
    ]
    g = helper.make_graph(nodes, "split", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 32, 32])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 32, 32])],
                          initializer=[numpy_helper.from_array(W1, "W1"), numpy_helper.from_array(W2, "W2")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def mode_profile(args):
    exe = nxrt(args.build)
    if not exe:
        print("FAIL: no nxrt binary under --build")
        return 1
    r = run([exe, "plugins", "--verbose"])
    out = r.stdout + r.stderr
    sect = out[out.find("vulkan"):]
    if "vulkan.timestamp_valid_bits:" not in sect:
        print(f"FAIL: `nxrt plugins --verbose` shows no vulkan.timestamp_valid_bits:\n{out[-1500:]}")
        return 1
    bits = [l.split(":")[-1].strip() for l in sect.splitlines() if "vulkan.timestamp_valid_bits:" in l]
    if bits and bits[0] == "0":
        print("skip: the Vulkan device has no timestamp queries on its compute queue")
        return 77
    bad = []
    for feat in ("run-hooks", "device-profiling"):
        if feat not in sect:
            bad.append(f"`nxrt plugins --verbose` does not list {feat} for vulkan")
    iters = 3
    with tempfile.TemporaryDirectory() as tmp:
        path, trace = os.path.join(tmp, "split.onnx"), os.path.join(tmp, "trace.json")
        onnx.save(split_conv_model(np.random.default_rng(5)), path)
        r = run([exe, "bench", path, "--ep", "vulkan,cpu", "--profile", trace, "--iters", str(iters)], vk_env(True))
        if r.returncode != 0 or not validation_clean(r):
            print(f"FAIL: bench --profile rc={r.returncode}\n{(r.stdout + r.stderr)[-1500:]}")
            return 1
        with open(trace) as f:
            events = json.load(f)["traceEvents"]
    tracks = {e["tid"] for e in events if e.get("ph") == "M" and e.get("args", {}).get("name") == "vulkan device"}
    if len(tracks) != 1:
        bad.append(f"no single 'vulkan device' track in the trace (thread_name metadata: {tracks})")
    dev = [e for e in events if e.get("cat") == "device"]
    kern = [e for e in events if e.get("cat") == "kernel" and e.get("args", {}).get("ep") == "vulkan"]
    runs = {e["args"]["run"]: e for e in events if e.get("cat") == "run"}
    if len(runs) != iters:
        bad.append(f"{len(runs)} run events, expected {iters}")
    for e in dev:
        if e["tid"] not in tracks:
            bad.append(f"device event {e['name']} is not on the vulkan device track")
        if e["args"].get("ep") != "vulkan":
            bad.append(f"device event {e['name']} has ep {e['args'].get('ep')}")
        if e["dur"] < 0:
            bad.append(f"device event {e['name']} ends before it starts: dur {e['dur']}")
        if "Conv" in e["name"] and not e["dur"] > 0:
            bad.append(f"device event {e['name']} (a Conv) has no duration: {e['dur']}")
    for run_id, rev in sorted(runs.items()):
        d = sorted((e for e in dev if e["args"]["run"] == run_id), key=lambda e: e["ts"])
        k = [e for e in kern if e["args"]["run"] == run_id]
        names = [e["name"] for e in d]
        if len(d) != len(k) or len(d) != 2:
            bad.append(f"run {run_id}: {len(d)} device events {names} for {len(k)} vulkan kernels (expected 2)")
            continue
        if names != ["Conv+Relu", "Conv+Sigmoid"]:
            bad.append(f"run {run_id}: device events {names}, expected ['Conv+Relu', 'Conv+Sigmoid']")
        if sorted(e["args"].get("node") for e in d) != [0, 3]:
            bad.append(f"run {run_id}: device events name nodes {[e['args'].get('node') for e in d]}, expected [0, 3]")
        lo, hi = rev["ts"] - 1, rev["ts"] + rev["dur"] + 1  # microseconds, printed to 3 decimals
        for e in d:
            if e["ts"] < lo or e["ts"] + e["dur"] > hi:
                bad.append(f"run {run_id}: device event {e['name']} [{e['ts']}, +{e['dur']}] outside the run [{rev['ts']}, +{rev['dur']}]")
        print(f"run {run_id}: " + ", ".join(f"{e['name']} {e['dur']:.1f} us" for e in d) + f" (run {rev['dur']:.1f} us)")
    for b in bad:
        print("FAIL", b)
    print(f"profile: {'FAIL' if bad else 'ok'}")
    return 1 if bad else 0


def mode_options(args):
    exe = nxrt(args.build)
    if not exe:
        print("FAIL: no nxrt binary under --build")
        return 1
    bad = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "split.onnx")
        m = split_conv_model(np.random.default_rng(5))
        # Vulkan only: drop the Round so the model needs no other EP.
        del m.graph.node[2]
        m.graph.node[2].input[0] = "r1"
        onnx.save(m, path)
        cache = os.path.join(tmp, "pc.bin")
        env = dict(vk_env(True), NXRT_VULKAN_STATS="1")
        base = [exe, "run", path, "--ep", "vulkan", "--ep-option", f"vulkan.pipeline_cache={cache}"]
        r1 = run(base, env)
        size = os.path.getsize(cache) if os.path.exists(cache) else 0
        if r1.returncode != 0 or not validation_clean(r1):
            bad.append(f"first run with vulkan.pipeline_cache: rc={r1.returncode}\n{(r1.stdout + r1.stderr)[-1200:]}")
        elif size == 0:
            bad.append(f"first run did not write {cache}")
        else:
            with open(cache, "rb") as f:
                if f.read(8) != b"NXVKPC01":
                    bad.append("the cache file lacks the NXVKPC01 header")
            if "no file yet" not in r1.stderr:
                bad.append(f"first run: no 'no file yet' stats line:\n{r1.stderr[-800:]}")
        r2 = run(base, env)
        lines = [l for l in r2.stderr.splitlines() if "pipeline cache" in l]
        if r2.returncode != 0 or not validation_clean(r2):
            bad.append(f"second run: rc={r2.returncode}\n{(r2.stdout + r2.stderr)[-1200:]}")
        elif not any("loaded" in l and "loaded 0 bytes" not in l for l in lines):
            bad.append(f"second run did not load the cache: {lines}")
        print(f"pipeline cache: {size} bytes; second run: {lines}")
        with open(cache, "wb") as f:
            f.write(b"garbage" * 20)
        r3 = run(base, env)
        lines3 = [l for l in r3.stderr.splitlines() if "pipeline cache" in l]
        with open(cache, "rb") as f:
            head = f.read(8)
        if r3.returncode != 0 or not any("ignored" in l for l in lines3) or head != b"NXVKPC01":
            bad.append(f"foreign cache file: rc={r3.returncode}, {lines3}, header now {head!r}")
        for opt, codes in (("vulkan.device=99", (1, 2)), ("vulkan.device=abc", (2,)), ("vulkan.no_such_key=1", (2,))):
            r = run([exe, "run", path, "--ep", "vulkan", "--ep-option", opt], vk_env(True))
            key = opt.split("=")[0]
            if r.returncode not in codes or key not in r.stderr:
                bad.append(f"--ep-option {opt}: rc={r.returncode} (want {codes}), stderr must name {key}:\n{r.stderr[-600:]}")
            else:
                print(f"--ep-option {opt}: rc={r.returncode}: {r.stderr.strip().splitlines()[-1][:200]}")
    for b in bad:
        print("FAIL", b)
    print(f"options: {'FAIL' if bad else 'ok'}")
    return 1 if bad else 0


def lavapipe_target(exe):
    """Device 0 of the vulkan plugin, flattened as `nxrt plugins --json` prints it, or None."""
    r = run([exe, "plugins", "--json"])
    if r.returncode != 0:
        return None
    for p in json.loads(r.stdout)["plugins"]:
        if p["name"] == "vulkan" and p["devices"]:
            return p["devices"][0]
    return None


def mode_cache(args):
    exe = nxrt(args.build)
    if not exe:
        print("FAIL: no nxrt binary under --build")
        return 1
    bad = []
    no_driver = {"VK_DRIVER_FILES": "/nonexistent", "VK_ICD_FILENAMES": "/nonexistent"}
    desc = lavapipe_target(exe)
    on_device = desc is not None and "llvmpipe" in desc.get("name", "")
    if not on_device:
        with open(os.path.join(HERE, "data", "lavapipe_device.json")) as f:
            desc = json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "convs.onnx")
        m = split_conv_model(np.random.default_rng(5))
        del m.graph.node[2]  # Vulkan only: Conv+Relu -> Conv+Sigmoid
        m.graph.node[2].input[0] = "r1"
        onnx.save(m, model)
        ind, want, got = (os.path.join(tmp, x) for x in ("in", "want", "got"))
        for d in (ind, want, got):
            os.makedirs(d)
        random_inputs(model, ind)

        def compile_for(d, name):
            target, out = os.path.join(tmp, name + ".json"), os.path.join(tmp, name + ".nxrt")
            with open(target, "w") as f:
                json.dump(d, f)
            r = run([exe, "compile", model, "--ep", "vulkan", "--target", target, "-o", out], no_driver)
            if r.returncode != 0 or not os.path.exists(out):
                bad.append(f"compile --target {name} with no driver: rc={r.returncode}\n{(r.stdout + r.stderr)[-1200:]}")
                return None
            print(f"compiled for {name} with no driver: {os.path.getsize(out)} bytes")
            return out

        lp = compile_for(desc, "lavapipe")
        other = dict(desc)
        other["vulkan.subgroup_size"] = "32"
        other["name"] = "NVIDIA H200"
        sg32 = compile_for(other, "subgroup32")
        if not on_device:
            for b in bad:
                print("FAIL", b)
            if bad:
                return 1
            print("SKIP: no lavapipe device: compiled with no driver, not run")
            return 77
        r = run([exe, "run", model, "--ep", "vulkan", "--input-dir", ind, "--output-dir", want], vk_env(True))
        if r.returncode != 0:
            bad.append(f"run .onnx: {r.stderr[-600:]}")
        if lp:
            r = run([exe, "inspect", lp, "--ep", "vulkan"], vk_env(True))
            lines = [l.strip() for l in r.stdout.splitlines() if l.strip().startswith("vulkan:")]
            print(f"lavapipe artifact on lavapipe: {lines}")
            if r.returncode != 0 or not lines or not lines[0].startswith("vulkan: optimal") or " 0 compiled" not in lines[0] \
                    or " 0 kernel(s) imported" in lines[0]:
                bad.append(f"inspect {lp}: rc={r.returncode}, want 'vulkan: optimal', kernels imported, 0 compiled:\n{r.stdout[-1500:]}{r.stderr[-600:]}")
            r = run([exe, "run", lp, "--ep", "vulkan", "--input-dir", ind, "--output-dir", got], vk_env(True))
            if r.returncode != 0 or not validation_clean(r):
                bad.append(f"run {lp}: rc={r.returncode}\n{r.stderr[-800:]}")
            else:
                for w in sorted(glob.glob(os.path.join(want, "output_*.pb"))):
                    a = tools_compare.load(w)
                    g = tools_compare.load(os.path.join(got, os.path.basename(w)))
                    if a.shape != g.shape or a.tobytes() != g.tobytes():
                        bad.append(f"{os.path.basename(w)}: the compiled model's output differs from the .onnx's")
        if sg32:
            r = run([exe, "inspect", sg32, "--ep", "vulkan"], vk_env(True))
            lines = [l.strip() for l in r.stdout.splitlines() if l.strip().startswith("vulkan:")]
            print(f"subgroup-32 artifact on lavapipe: {lines}")
            own = desc["vulkan.subgroup_size"]
            if r.returncode != 0 or not lines or "must recompile" not in lines[0] or "subgroup size 32" not in lines[0] \
                    or f"has {own}" not in lines[0]:
                bad.append(f"inspect {sg32}: rc={r.returncode}, want 'must recompile' naming subgroup size 32 and {own}:\n{r.stdout[-1500:]}")
            r = run([exe, "run", sg32, "--ep", "vulkan", "--input-dir", ind, "--output-dir", got], vk_env(True))
            if r.returncode != 0:
                bad.append(f"run {sg32} (compiled again): rc={r.returncode}\n{r.stderr[-800:]}")
        # Compiled on lavapipe itself (its blobs carry the driver's cache bytes), and a cache
        # folder: written on the first session, read on the second.
        real = os.path.join(tmp, "real.nxrt")
        r = run([exe, "compile", model, "--ep", "vulkan", "-o", real], vk_env(True))
        r2 = run([exe, "inspect", real, "--ep", "vulkan"], vk_env(True)) if r.returncode == 0 else r
        if r2.returncode != 0 or "vulkan: optimal; 1 kernel(s) imported, 0 compiled" not in r2.stdout:
            bad.append(f"compiled on lavapipe, inspected there: rc={r2.returncode}\n{r2.stdout[-1200:]}{r2.stderr[-400:]}")
        cdir = os.path.join(tmp, "cache")
        first = run([exe, "inspect", model, "--ep", "vulkan", "--cache", cdir], vk_env(True))
        second = run([exe, "inspect", model, "--ep", "vulkan", "--cache", cdir], vk_env(True))
        hit = [l for l in second.stdout.splitlines() if l.startswith("cache:") or l.strip().startswith("vulkan:")]
        print(f"--cache second session: {hit}")
        if first.returncode != 0 or second.returncode != 0 or not any(l.startswith("cache: hit") for l in hit) or \
                not any("vulkan: optimal; 1 kernel(s) imported, 0 compiled" in l for l in hit):
            bad.append(f"--cache: second session not a hit with the kernel imported:\n{first.stdout[-600:]}\n{second.stdout[-800:]}")
        # A warm session on lavapipe (a CPU-kind device) wraps the entry's mapped weights in
        # place (memory_import): no weight is allocated or copied to the device.
        def bench(cache):
            r = run([exe, "bench", model, "--ep", "vulkan", "--iters", "1", "--warmup", "0", "--json"] +
                    (["--cache", cache] if cache else []), vk_env(True))
            if r.returncode != 0:
                bad.append(f"bench --cache {cache}: rc={r.returncode}\n{r.stderr[-600:]}")
                return None
            d = json.loads(r.stdout.strip().splitlines()[-1])
            return d["memory"][0]["plugin"]["host_to_device_bytes"], d["memory"][0]["bytes_in_use"]
        weights = sum(np.prod(t.dims) * 4 for t in onnx.load(model).graph.initializer)
        cold, warm = bench(None), bench(cdir)
        print(f"weights {weights} bytes; host-to-device bytes, bytes in use: cold {cold}, warm {warm}")
        if cold and warm and not (cold[0] - warm[0] >= weights * 0.9 and cold[1] - warm[1] >= weights * 0.9):
            bad.append(f"--cache: the warm session still allocated or copied its weights (cold {cold}, warm {warm}, weights {weights})")
    for b in bad:
        print("FAIL", b)
    print(f"cache: {'FAIL' if bad else 'ok'}")
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["mixed", "nodriver", "fp16", "profile", "options", "cache"])
    ap.add_argument("--build", default=os.environ.get("NXRT_BUILD_DIR", os.path.join(SRC, "build")))
    args = ap.parse_args()
    modes = {"mixed": mode_mixed, "nodriver": mode_nodriver, "fp16": mode_fp16, "profile": mode_profile,
             "options": mode_options, "cache": mode_cache}
    return modes[args.mode](args)


if __name__ == "__main__":
    sys.exit(main())
