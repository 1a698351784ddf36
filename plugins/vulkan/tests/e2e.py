#!/usr/bin/python3
"""End-to-end checks of the Vulkan plugin through the nxrt CLI.

Usage: e2e.py MODE --build BUILD_DIR
(Node tests and bench models run through tools/node_tests.py and tools/model_tests.py.)
  mixed     a model with an op Vulkan lacks, run with `--ep vulkan,cpu`: it must
            partition (with transfers) and match `--ep cpu`.
  nodriver  with no Vulkan driver or loader the plugin loads and reports no device
            with a reason.
Validation layers are enabled (NXRT_VULKAN_VALIDATION=1); any validation message fails
the run. A missing nxrt binary is a failure, not a skip.
"""
import argparse
import glob
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["mixed", "nodriver"])
    ap.add_argument("--build", default=os.environ.get("NXRT_BUILD_DIR", os.path.join(SRC, "build")))
    args = ap.parse_args()
    return {"mixed": mode_mixed, "nodriver": mode_nodriver}[args.mode](args)


if __name__ == "__main__":
    sys.exit(main())
