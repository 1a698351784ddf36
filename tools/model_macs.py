#!/usr/bin/python3
"""Counts a model's multiply-adds in its convolutions and matrix products, so a latency can be
read as a rate against the core's peak (docs/performance.md, "Targets not met").

Usage: model_macs.py MODEL.onnx [...]   prints "<model> <G multiply-adds>" per model
Counted: Conv, ConvInteger, QLinearConv (output elements x input channels per group x kernel
taps), MatMul, MatMulInteger, QLinearMatMul, Gemm (output elements x the reduced dim), from ONNX
shape inference; the weights of QDQ models (DequantizeLinear outputs) count the same way.
Everything else (pools, elementwise, softmax) is left out: the figure is a floor on the work.
"""
import math
import sys

import onnx
from onnx import shape_inference


def count_macs(path, input_shapes=None):
    """Multiply-adds of the model at `path` with its graph inputs' dims set from `input_shapes`
    ({name: [dims]}, e.g. what `nxrt bench --json` fed); None where a counted node's shape is
    still not static."""
    m = onnx.load(path)
    for i in m.graph.input:
        if input_shapes and i.name in input_shapes:
            dims = i.type.tensor_type.shape.dim
            for d, v in zip(dims, input_shapes[i.name]):
                d.Clear()
                d.dim_value = int(v)
    g = shape_inference.infer_shapes(m).graph
    dims = {}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        d = [x.dim_value if x.HasField("dim_value") else 0 for x in vi.type.tensor_type.shape.dim]
        dims[vi.name] = d
    for t in g.initializer:
        dims[t.name] = list(t.dims)
    total = 0
    for n in g.node:
        op = n.op_type
        if op in ("Conv", "ConvInteger", "QLinearConv", "MatMul", "MatMulInteger", "QLinearMatMul", "Gemm"):
            w_in = {"QLinearConv": 3, "QLinearMatMul": 3}.get(op, 1)
            out, a, w = dims.get(n.output[0]), dims.get(n.input[0]), dims.get(n.input[w_in])
            if not out or not w or 0 in out or 0 in w or a is None:
                return None
            if op in ("Conv", "ConvInteger", "QLinearConv"):
                total += math.prod(out) * math.prod(w[1:])
            elif op == "Gemm":
                trans_a = any(at.name == "transA" and at.i for at in n.attribute)
                total += math.prod(out) * (a[0] if trans_a else a[-1])
            else:
                total += math.prod(out) * a[-1]
    return total


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__.strip().splitlines()[2])
    for p in sys.argv[1:]:
        m = count_macs(p)
        print(f"{p} {'dynamic' if m is None else f'{m / 1e9:.3f}'}")


if __name__ == "__main__":
    main()
