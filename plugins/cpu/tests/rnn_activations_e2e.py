#!/usr/bin/python3
"""End to end through `nxrt run --ep cpu`: RNN, GRU and LSTM nodes with explicit activations
(every ONNX RNN activation function, activation_alpha/activation_beta given and defaulted,
forward/reverse/bidirectional with different functions per direction) against a float64 numpy
reference (atol 1e-5); an unknown activation name is refused with a reason naming it.

Usage: rnn_activations_e2e.py --nxrt BIN
"""
import argparse
import os
import sys
import tempfile

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nxrt_run import run  # noqa: E402

failures = []

# name -> (takes alpha, takes beta, default alpha, default beta, f(x, a, b))
ACTS = {
    "relu": (False, False, 0, 0, lambda x, a, b: np.maximum(x, 0)),
    "tanh": (False, False, 0, 0, lambda x, a, b: np.tanh(x)),
    "sigmoid": (False, False, 0, 0, lambda x, a, b: 1 / (1 + np.exp(-x))),
    "affine": (True, True, 1.0, 0.0, lambda x, a, b: a * x + b),
    "leakyrelu": (True, False, 0.01, 0, lambda x, a, b: np.where(x >= 0, x, a * x)),
    "thresholdedrelu": (True, False, 1.0, 0, lambda x, a, b: np.where(x > a, x, 0)),
    "scaledtanh": (True, True, 1.0, 1.0, lambda x, a, b: a * np.tanh(b * x)),
    "hardsigmoid": (True, True, 0.2, 0.5, lambda x, a, b: np.clip(a * x + b, 0, 1)),
    "elu": (True, False, 1.0, 0, lambda x, a, b: np.where(x >= 0, x, a * (np.exp(np.minimum(x, 0)) - 1))),
    "softsign": (False, False, 0, 0, lambda x, a, b: x / (1 + np.abs(x))),
    "softplus": (False, False, 0, 0, lambda x, a, b: np.log1p(np.exp(x))),
}
DEFAULTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def resolve(names, alphas, betas):
    """The activations as callables, alpha/beta consumed in order by the functions that take them."""
    alphas, betas, out = list(alphas), list(betas), []
    for n in names:
        ta, tb, da, db, f = ACTS[n.lower()]
        a = alphas.pop(0) if ta and alphas else da
        b = betas.pop(0) if tb and betas else db
        out.append(lambda x, f=f, a=a, b=b: f(x, a, b))
    return out


def reference(op, x, w, r, bias, h0, acts, direction, lbr):
    """Y [T, D, B, H] and Y_h [D, B, H] (and Y_c for LSTM) in float64, layout 0."""
    T, B, _ = x.shape
    D, GH, _ = w.shape
    H = GH // GATES[op]
    per = len(DEFAULTS[op])
    Y = np.zeros((T, D, B, H))
    Yh, Yc = np.zeros((D, B, H)), np.zeros((D, B, H))
    for d in range(D):
        f = acts[d * per: (d + 1) * per]
        W, R, Wb, Rb = w[d], r[d], bias[d][:GH], bias[d][GH:]
        h, c = h0[d].copy(), np.zeros((B, H))
        steps = range(T - 1, -1, -1) if (direction == "reverse" or d == 1) else range(T)
        for t in steps:
            gx = x[t] @ W.T + Wb
            gh = h @ R.T + Rb
            if op == "RNN":
                h = f[0](gx + gh)
            elif op == "GRU":
                z = f[0](gx[:, :H] + gh[:, :H])
                rr = f[0](gx[:, H:2 * H] + gh[:, H:2 * H])
                if lbr:
                    n = f[1](gx[:, 2 * H:] + rr * gh[:, 2 * H:])
                else:
                    n = f[1](gx[:, 2 * H:] + (rr * h) @ R[2 * H:].T + Rb[2 * H:])
                h = (1 - z) * n + z * h
            else:
                i = f[0](gx[:, :H] + gh[:, :H])
                o_pre = gx[:, H:2 * H] + gh[:, H:2 * H]
                fg = f[0](gx[:, 2 * H:3 * H] + gh[:, 2 * H:3 * H])
                cg = f[1](gx[:, 3 * H:] + gh[:, 3 * H:])
                c = fg * c + i * cg
                h = f[0](o_pre) * f[2](c)
            Y[t, d] = h
        Yh[d], Yc[d] = h, c
    return [Y, Yh, Yc] if op == "LSTM" else [Y, Yh]




def build(op, names, alphas, betas, direction, lbr, T=4, B=2, I=3, H=5, seed=0):
    rng = np.random.default_rng(seed)
    D = 2 if direction == "bidirectional" else 1
    G = GATES[op]
    x = rng.uniform(-1.5, 1.5, (T, B, I)).astype(np.float32)
    w = rng.uniform(-0.8, 0.8, (D, G * H, I)).astype(np.float32)
    r = rng.uniform(-0.8, 0.8, (D, G * H, H)).astype(np.float32)
    bias = rng.uniform(-0.5, 0.5, (D, 2 * G * H)).astype(np.float32)
    seq = np.full((B,), T, np.int32)
    h0 = rng.uniform(-0.5, 0.5, (D, B, H)).astype(np.float32)
    attrs = {"hidden_size": H, "direction": direction}
    if names is not None:
        attrs["activations"] = names
    if alphas:
        attrs["activation_alpha"] = alphas
    if betas:
        attrs["activation_beta"] = betas
    if op == "GRU" and lbr:
        attrs["linear_before_reset"] = 1
    outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, ["X", "W", "R", "B", "seq", "h0"], outs, **attrs)
    f32 = TensorProto.FLOAT
    inputs = [helper.make_tensor_value_info("X", f32, x.shape), helper.make_tensor_value_info("W", f32, w.shape),
              helper.make_tensor_value_info("R", f32, r.shape), helper.make_tensor_value_info("B", f32, bias.shape),
              helper.make_tensor_value_info("seq", TensorProto.INT32, seq.shape),
              helper.make_tensor_value_info("h0", f32, h0.shape)]
    shapes = {"Y": [T, D, B, H], "Y_h": [D, B, H], "Y_c": [D, B, H]}
    outputs = [helper.make_tensor_value_info(o, f32, shapes[o]) for o in outs]
    g = helper.make_graph([node], "g", inputs, outputs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    acts = resolve(names if names is not None else DEFAULTS[op] * D, alphas or [], betas or [])
    if len(acts) == len(DEFAULTS[op]) and D == 2:
        acts = acts * 2
    want = reference(op, x.astype(np.float64), w.astype(np.float64), r.astype(np.float64), bias.astype(np.float64),
                     h0.astype(np.float64), acts, direction, lbr)
    return m, [x, w, r, bias, seq, h0], want


CASES = [
    # op, activations, alpha, beta, direction, linear_before_reset
    ("RNN", ["Relu"], None, None, "forward", False),
    ("RNN", ["LeakyRelu"], [0.2], None, "reverse", False),
    ("RNN", ["Softsign", "Elu"], None, None, "bidirectional", False),          # Elu alpha defaulted
    ("RNN", ["Affine", "ScaledTanh"], [0.7, 1.3], [0.1, 0.6], "bidirectional", False),
    ("RNN", ["Softplus"], None, None, "bidirectional", False),                 # one list for both directions
    ("GRU", ["HardSigmoid", "Softsign"], [0.3], [0.4], "forward", False),
    ("GRU", ["Sigmoid", "ThresholdedRelu"], [0.1], None, "forward", True),
    ("GRU", ["HardSigmoid", "Elu", "Sigmoid", "ScaledTanh"], [0.25, 0.5, 0.9], [0.55, 1.1], "bidirectional", False),
    ("GRU", ["Sigmoid", "LeakyRelu", "HardSigmoid", "Affine"], None, None, "bidirectional", True),  # defaults
    ("LSTM", ["HardSigmoid", "Softsign", "Softplus"], None, None, "forward", False),
    ("LSTM", ["Sigmoid", "LeakyRelu", "ScaledTanh"], [0.05, 0.8], [1.2], "reverse", False),
    ("LSTM", ["HardSigmoid", "Tanh", "Elu", "Sigmoid", "Relu", "Affine"], [0.3, 0.6, 0.9], [0.45, 0.2],
     "bidirectional", False),
    ("LSTM", ["Sigmoid", "Tanh", "Tanh", "Sigmoid", "Tanh", "Tanh"], None, None, "bidirectional", False),  # explicit defaults
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nxrt", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for k, (op, names, al, be, direction, lbr) in enumerate(CASES):
            tag = f"{op} {direction} {names} alpha={al} beta={be}" + (" lbr" if lbr else "")
            m, feeds, want = build(op, names, al, be, direction, lbr, seed=k)
            got, p = run(args.nxrt, m, feeds, tmp, f"case{k}")
            if got is None:
                check(False, f"{tag}: nxrt run failed: {p.stderr.strip()[-400:]}")
                continue
            err = max(float(np.max(np.abs(g.astype(np.float64) - w))) for g, w in zip(got, want))
            check(err <= 1e-5, f"{tag}: max |error| {err:.2e}")
        # An unknown activation is refused by name (and no EP takes the node).
        m, feeds, _ = build("LSTM", ["Sigmoid", "Tanh", "Tanh"], None, None, "forward", False)
        next(a for a in m.graph.node[0].attribute if a.name == "activations").strings[1] = b"Swish"
        got, p = run(args.nxrt, m, feeds, tmp, "unknown")
        check(got is None and "Swish" in (p.stderr + p.stdout), "unknown activation 'Swish' refused by name")
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)
    print("all passed")


if __name__ == "__main__":
    main()
