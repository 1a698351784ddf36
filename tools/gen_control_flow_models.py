#!/usr/bin/python3
"""Writes control-flow test models in the ONNX backend-test layout, with a numpy reference.

Usage: gen_control_flow_models.py OUT
  OUT/node/test_if_lstm/: an If whose branches each run an LSTM (forward in the then-branch,
  reverse in the else-branch) on X, W, R, B of the enclosing graph; two data sets, one per
  branch. Expected outputs come from the float64 numpy LSTM below (ONNX defaults: gates
  i, o, f, c; sigmoid, tanh, tanh), not from any runtime.
Run them with tools/node_tests.py --tests OUT.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SEQ, BATCH, INPUT, HIDDEN = 5, 2, 3, 4


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def lstm_last_hidden(x, w, r, b, reverse):
    """Y_h of a one-direction ONNX LSTM, shape [1, batch, hidden], in float64."""
    w, r, b = w[0].astype(np.float64), r[0].astype(np.float64), b[0].astype(np.float64)
    h = np.zeros((x.shape[1], HIDDEN))
    c = np.zeros((x.shape[1], HIDDEN))
    steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
    for t in steps:
        g = x[t].astype(np.float64) @ w.T + h @ r.T + b[:4 * HIDDEN] + b[4 * HIDDEN:]
        i, o, f, cc = np.split(g, 4, axis=1)
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(cc)
        h = sigmoid(o) * np.tanh(c)
    return h[None]


def branch(name, direction):
    lstm = helper.make_node("LSTM", ["X", "W", "R", "B"], ["", f"{name}_h"], hidden_size=HIDDEN, direction=direction,
                            name=f"{name}_lstm")
    out = helper.make_tensor_value_info(f"{name}_h", TensorProto.FLOAT, [1, BATCH, HIDDEN])
    return helper.make_graph([lstm], name, [], [out])


def write_case(root, name, model, data_sets):
    case = os.path.join(root, "node", name)
    os.makedirs(case, exist_ok=True)
    onnx.save(model, os.path.join(case, "model.onnx"))
    for k, (inputs, outputs) in enumerate(data_sets):
        d = os.path.join(case, f"test_data_set_{k}")
        os.makedirs(d, exist_ok=True)
        for i, (n, a) in enumerate(inputs):
            onnx.save_tensor(numpy_helper.from_array(a, n), os.path.join(d, f"input_{i}.pb"))
        for i, (n, a) in enumerate(outputs):
            onnx.save_tensor(numpy_helper.from_array(a, n), os.path.join(d, f"output_{i}.pb"))


def if_lstm(root):
    rng = np.random.default_rng(7)
    w = (rng.standard_normal((1, 4 * HIDDEN, INPUT)) * 0.5).astype(np.float32)
    r = (rng.standard_normal((1, 4 * HIDDEN, HIDDEN)) * 0.5).astype(np.float32)
    b = (rng.standard_normal((1, 8 * HIDDEN)) * 0.1).astype(np.float32)
    x = rng.standard_normal((SEQ, BATCH, INPUT)).astype(np.float32)
    node = helper.make_node("If", ["cond"], ["y"], then_branch=branch("then", "forward"),
                            else_branch=branch("else", "reverse"), name="if_lstm")
    graph = helper.make_graph(
        [node], "if_lstm",
        [helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("X", TensorProto.FLOAT, [SEQ, BATCH, INPUT])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, BATCH, HIDDEN])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(r, "R"), numpy_helper.from_array(b, "B")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    sets = []
    for cond in (True, False):
        y = lstm_last_hidden(x, w, r, b, reverse=not cond).astype(np.float32)
        sets.append(([("cond", np.array(cond)), ("X", x)], [("y", y)]))
    write_case(root, "test_if_lstm", model, sets)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    if_lstm(sys.argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
