#!/usr/bin/python3
"""Where do two EPs part ways? Runs a model with every intermediate float tensor made a graph
output, on each EP, and prints per tensor the largest |difference| between the EPs and each
EP's error against a float64 numpy evaluation (tools/reference.py; ops it lacks print '-').

Usage: layer_diff.py MODEL --nxrt BIN --ep A --ep B [--seed N] [--ops Conv,Clip,...]
Inputs follow tools/model_tests.py (lcgFloat32, seed 1234 + input index). With --ops only
the outputs of those op types are listed (default: all float tensors).
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import model_tests  # noqa: E402
import reference  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--nxrt", required=True)
    ap.add_argument("--ep", action="append", required=True)
    ap.add_argument("--ops", default="")
    a = ap.parse_args()
    ops = set(filter(None, a.ops.split(",")))
    m = onnx.shape_inference.infer_shapes(onnx.load(a.model))
    vi = {v.name: v for v in m.graph.value_info}
    outs = {o.name for o in m.graph.output}
    names = []
    for n in m.graph.node:
        o = n.output[0]
        if (not ops or n.op_type in ops) and o in vi and o not in outs \
                and vi[o].type.tensor_type.elem_type == onnx.TensorProto.FLOAT:
            m.graph.output.append(vi[o])
            names.append((o, n.op_type))
    tmp = tempfile.mkdtemp(prefix="nxrt-layer-diff-")
    path = os.path.join(tmp, "all.onnx")
    onnx.save(m, path)
    inits = {t.name for t in m.graph.initializer}
    feeds = {}
    os.makedirs(os.path.join(tmp, "in"))
    for k, i in enumerate(x for x in m.graph.input if x.name not in inits):
        shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
        feeds[i.name] = model_tests.lcg_fast(int(np.prod(shape)), 1234 + k).reshape(shape)
        onnx.save_tensor(numpy_helper.from_array(feeds[i.name], i.name), os.path.join(tmp, "in", f"input_{k}.pb"))
    results = {}
    for ep in a.ep:
        d = os.path.join(tmp, "out_" + ep)
        r = subprocess.run([a.nxrt, "run", path, "--ep", ep, "--input-dir", os.path.join(tmp, "in"),
                            "--output-dir", d], capture_output=True, text=True)
        if r.returncode:
            sys.exit(f"{ep}: {r.stderr.strip()}")
        order = [o.name for o in m.graph.output]
        results[ep] = {nm: numpy_helper.to_array(onnx.load_tensor(os.path.join(d, f"output_{k}.pb")))
                       for k, nm in enumerate(order)}
    # float64 evaluation of the original graph, node by node, as far as the reference goes.
    orig = onnx.load(a.model)
    env = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in orig.graph.initializer}
    env.update({k: v.astype(np.float64) for k, v in feeds.items()})
    for node in orig.graph.node:
        try:
            ins = [env[i] if i else None for i in node.input]
            env[node.output[0]] = reference._run_node(node.op_type, ins, reference._attrs(node))
        except (NotImplementedError, KeyError):
            pass
    eps = a.ep
    head = f"{'tensor':32s} {'op':18s} {'max|ref|':>9s}" + "".join(f" {e + ' err':>12s}" for e in eps)
    if len(eps) == 2:
        head += f" {'|' + eps[0] + '-' + eps[1] + '|':>14s}"
    print(head)
    for nm, op in names + [(o.name, "(output)") for o in orig.graph.output]:
        ref = env.get(nm)
        scale = np.abs(ref).max() if ref is not None else np.abs(results[eps[0]][nm]).max()
        line = f"{nm[:32]:32s} {op[:18]:18s} {scale:9.3g}"
        for e in eps:
            line += f" {np.abs(results[e][nm] - ref).max():12.2e}" if ref is not None else f" {'-':>12s}"
        if len(eps) == 2:
            line += f" {np.abs(results[eps[0]][nm] - results[eps[1]][nm]).max():14.2e}"
        print(line)


if __name__ == "__main__":
    main()
