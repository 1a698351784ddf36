#!/usr/bin/python3
"""Generate small float32 ONNX models that repeat one conv layer shape, for kernel work.

Usage: /usr/bin/python3 gen_layer_models.py OUTDIR

The bench models time whole networks; when a change targets one kernel (the Winograd
transforms, a depthwise kernel, the transposed im2col GEMM), a model made of a few layers
of exactly that shape shows its effect without the rest of the network's noise, e.g.

    build/bin/nxrt bench OUTDIR/winograd_56x56x64.onnx --ep cpu --threads 1 --iters 100

Each model chains LAYERS convs of one shape (same in and out channels, "same" padding,
random weights from a fixed seed; a Relu after each dense conv, as in ResNet), so every
layer but the first reads what the previous one wrote. Models (name: layers x shape, path):
    winograd_56x56x64     4 x 3x3, 64 ch at 56x56      (Winograd, blocks per thread)
    winograd_28x28x128    3 x 3x3, 128 ch at 28x28     (Winograd, 49 tiles)
    winograd_14x14x256    3 x 3x3, 256 ch at 14x14     (Winograd, 16 tiles)
    im2col_7x7x512        3 x 3x3, 512 ch at 7x7       (im2col as a transposed GEMM)
    depthwise3x3_112x112x32  8 x depthwise 3x3, 32 ch at 112x112 (direct AVX-512/AVX2 kernel)
    depthwise5x5_7x7x960     8 x depthwise 5x5, 960 ch at 7x7    (phase planes on AVX-512)
Each NAME.onnx gets a NAME.json sidecar (inputs: name, shape, dtype) like gen_bench_models.py,
so tools/bench_vs_ort.py --model-dir OUTDIR times them against ONNX Runtime too.
"""
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

MODELS = {
    # name: (channels, size, kernel, depthwise, layers)
    "winograd_56x56x64": (64, 56, 3, False, 4),
    "winograd_28x28x128": (128, 28, 3, False, 3),
    "winograd_14x14x256": (256, 14, 3, False, 3),
    "im2col_7x7x512": (512, 7, 3, False, 3),
    "depthwise3x3_112x112x32": (32, 112, 3, True, 8),
    "depthwise5x5_7x7x960": (960, 7, 5, True, 8),
}


def make(name, c, size, k, depthwise, layers, seed):
    rng = np.random.default_rng(seed)
    nodes, inits, x = [], [], "input"
    fan_in = k * k * (1 if depthwise else c)
    for i in range(layers):
        w_shape = (c, 1, k, k) if depthwise else (c, c, k, k)
        w = (rng.standard_normal(w_shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        b = (rng.standard_normal(c) * 0.01).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        attrs = dict(kernel_shape=[k, k], pads=[k // 2] * 4, strides=[1, 1])
        if depthwise:
            attrs["group"] = c
        conv_out = f"conv{i}" if not depthwise else f"y{i}"
        nodes.append(helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [conv_out], name=f"conv_{i}", **attrs))
        if not depthwise:
            nodes.append(helper.make_node("Relu", [conv_out], [f"y{i}"], name=f"relu_{i}"))
        x = f"y{i}"
    nodes.append(helper.make_node("Identity", [x], ["output"], name="output"))
    shape = [1, c, size, size]
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="nxrt-gen-layer-models")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model, shape


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for seed, (name, (c, size, k, dw, layers)) in enumerate(MODELS.items(), start=300):
        model, shape = make(name, c, size, k, dw, layers, seed)
        onnx.save(model, os.path.join(out, name + ".onnx"))
        side = {"name": name, "description": f"{layers} x {'depthwise ' if dw else ''}{k}x{k} conv, {c} ch at {size}x{size}",
                "opset": 17, "seed": seed, "model": name + ".onnx",
                "inputs": [{"name": "input", "dtype": "float32", "shape": shape}],
                "outputs": [{"name": "output", "dtype": "float32", "shape": shape}]}
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump(side, f, indent=1)
        print(f"wrote {name}.onnx")


if __name__ == "__main__":
    main()
