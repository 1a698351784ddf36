"""Small ONNX models and their float64 numpy references for the install and package tests.

Inputs follow the host_embed samples' fixed pattern (element i of input k is
((7 i + 3 k) mod 11) / 4 - 1, dynamic dims taken as 2), so a test can check the sums they print.
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def pattern(k, shape):
    n = int(np.prod(shape)) if shape else 1
    i = np.arange(n, dtype=np.int64)
    return (((i * 7 + k * 3) % 11).astype(np.float32) * 0.25 - 1.0).reshape(shape)


def _save(graph, path):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


def broadcast_model(path):
    """Relu((((X + Y) * Z) - Y) / W): X [N,3] (N dynamic), Y [3], Z [1], W [1,3] constant."""
    w = np.array([[2.0, -4.0, 0.5]], dtype=np.float32)
    nodes = [helper.make_node("Add", ["X", "Y"], ["a"]), helper.make_node("Mul", ["a", "Z"], ["b"]),
             helper.make_node("Sub", ["b", "Y"], ["c"]), helper.make_node("Div", ["c", "W"], ["d"]),
             helper.make_node("Relu", ["d"], ["out"])]
    g = helper.make_graph(nodes, "broadcast",
                          [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 3]),
                           helper.make_tensor_value_info("Y", TensorProto.FLOAT, [3]),
                           helper.make_tensor_value_info("Z", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", 3])],
                          [numpy_helper.from_array(w, "W")])
    _save(g, path)
    x, y, z = (pattern(0, (2, 3)).astype(np.float64), pattern(1, (3,)).astype(np.float64),
               pattern(2, (1,)).astype(np.float64))
    return {"out": np.maximum((((x + y) * z) - y) / w, 0)}


def mlp_model(path):
    """Relu(X W1 + b1) W2 + b2: X [1,N,4] (rank 3, so the host keeps MatMul+Add rather than making
    a Gemm); the first MatMul+Add+Relu is ep_device's fused group."""
    rng = np.random.default_rng(7)
    w1, b1 = rng.standard_normal((4, 5)).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    w2, b2 = rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["X", "W1"], ["h0"], name="mm1"), helper.make_node("Add", ["h0", "B1"], ["h1"], name="add1"),
             helper.make_node("Relu", ["h1"], ["h2"], name="relu1"), helper.make_node("MatMul", ["h2", "W2"], ["h3"], name="mm2"),
             helper.make_node("Add", ["B2", "h3"], ["out"], name="add2")]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, "N", 4])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, "N", 3])],
                          [numpy_helper.from_array(a, n) for a, n in ((w1, "W1"), (b1, "B1"), (w2, "W2"), (b2, "B2"))])
    _save(g, path)
    x = pattern(0, (1, 2, 4)).astype(np.float64)
    return {"out": np.maximum(x @ w1 + b1, 0) @ w2 + b2}
