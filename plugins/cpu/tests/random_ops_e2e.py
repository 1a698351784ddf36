#!/usr/bin/python3
"""End to end through `nxrt run --ep cpu`: the random ops that have no ONNX 1.12 node test
(RandomUniform, RandomNormal, RandomUniformLike, RandomNormalLike, Multinomial; Bernoulli and
training Dropout on large inputs), checked by range and distribution; seeded nodes give the same
values in two processes, unseeded nodes different ones; bad input is a clear error, not a crash.

Usage: random_ops_e2e.py --nxrt BIN
"""
import argparse
import os
import sys
import tempfile

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nxrt_run import run  # noqa: E402

N = 20000
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def model(node, inputs, outputs, opset=17):
    g = helper.make_graph([node], "g", inputs, outputs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])




def near(v, want, tol):
    return abs(v - want) <= tol


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nxrt", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        f32 = TensorProto.FLOAT
        # RandomUniform, seeded: range, moments, same values in two processes.
        m = model(helper.make_node("RandomUniform", [], ["y"], shape=[N], low=-1.0, high=3.0, seed=5.0), [],
                  [helper.make_tensor_value_info("y", f32, [N])])
        (a,), _ = run(args.nxrt, m, [], tmp, "uniform1")
        (b,), _ = run(args.nxrt, m, [], tmp, "uniform2")
        check(a.dtype == np.float32 and a.shape == (N,), "RandomUniform: float32 [N]")
        check(bool(((a >= -1) & (a < 3)).all()), "RandomUniform: values in [low, high)")
        check(near(a.mean(), 1.0, 0.05) and near(a.var(), 16 / 12, 0.06), f"RandomUniform: mean {a.mean():.3f} ~ 1, var {a.var():.3f} ~ 1.333")
        check(np.array_equal(a, b), "RandomUniform: a seed gives the same values in two processes")
        # RandomNormal, unseeded float64: moments, different values in two processes.
        m = model(helper.make_node("RandomNormal", [], ["y"], shape=[100, 200], mean=-2.0, scale=3.0, dtype=TensorProto.DOUBLE), [],
                  [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [100, 200])])
        (a,), _ = run(args.nxrt, m, [], tmp, "normal1")
        (b,), _ = run(args.nxrt, m, [], tmp, "normal2")
        check(a.dtype == np.float64 and a.shape == (100, 200), "RandomNormal: float64 [100, 200]")
        check(near(a.mean(), -2.0, 0.1) and near(a.std(), 3.0, 0.1), f"RandomNormal: mean {a.mean():.3f} ~ -2, sd {a.std():.3f} ~ 3")
        check(not np.array_equal(a, b), "RandomNormal: no seed gives different values in two processes")
        # The *Like ops take the input's shape (and dtype unless dtype is set).
        x = np.zeros((50, 400), np.float64)
        m = model(helper.make_node("RandomUniformLike", ["x"], ["y"], low=10.0, high=11.0, dtype=f32),
                  [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [50, 400])], [helper.make_tensor_value_info("y", f32, [50, 400])])
        (a,), _ = run(args.nxrt, m, [x], tmp, "ulike")
        check(a.dtype == np.float32 and a.shape == (50, 400) and bool(((a >= 10) & (a < 11)).all()) and near(a.mean(), 10.5, 0.02),
              "RandomUniformLike: float32, input's shape, in [10, 11), mean 10.5")
        m = model(helper.make_node("RandomNormalLike", ["x"], ["y"], scale=0.5),
                  [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [50, 400])],
                  [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [50, 400])])
        (a,), _ = run(args.nxrt, m, [x], tmp, "nlike")
        check(a.dtype == np.float64 and near(a.mean(), 0, 0.03) and near(a.std(), 0.5, 0.02), "RandomNormalLike: float64, mean 0, sd 0.5")
        # Multinomial: class frequencies follow softmax(logits) per batch row.
        probs = np.array([[0.1, 0.2, 0.7], [0.5, 0.0, 0.5]])
        logits = np.log(np.maximum(probs, 1e-300)).astype(np.float32)
        logits[1, 1] = -np.inf
        m = model(helper.make_node("Multinomial", ["x"], ["y"], sample_size=N, dtype=TensorProto.INT64),
                  [helper.make_tensor_value_info("x", f32, [2, 3])], [helper.make_tensor_value_info("y", TensorProto.INT64, [2, N])])
        (a,), _ = run(args.nxrt, m, [logits], tmp, "multinomial")
        freq = np.stack([np.bincount(a[r], minlength=3) / N for r in range(2)])
        check(a.shape == (2, N) and bool(np.abs(freq - probs).max() < 0.02), f"Multinomial: frequencies {freq.round(3).tolist()} ~ {probs.tolist()}")
        # Bernoulli on many probabilities: frequency of ones per probability level.
        p = np.repeat(np.array([0.0, 0.2, 0.8, 1.0], np.float32), N // 4)
        m = model(helper.make_node("Bernoulli", ["x"], ["y"], dtype=TensorProto.INT32), [helper.make_tensor_value_info("x", f32, [N])],
                  [helper.make_tensor_value_info("y", TensorProto.INT32, [N])])
        (a,), _ = run(args.nxrt, m, [p], tmp, "bernoulli")
        means = [a[p == v].mean() for v in (0.0, 0.2, 0.8, 1.0)]
        check(a.dtype == np.int32 and means[0] == 0 and means[3] == 1 and near(means[1], 0.2, 0.03) and near(means[2], 0.8, 0.03),
              f"Bernoulli: int32, frequencies {np.round(means, 3).tolist()} ~ [0, .2, .8, 1]")
        # Training Dropout with graph-input ratio and mode; off: Y = X.
        xs = np.arange(1, N + 1, dtype=np.float32)
        m = model(helper.make_node("Dropout", ["x", "r", "t"], ["y", "mask"]),
                  [helper.make_tensor_value_info("x", f32, [N]), helper.make_tensor_value_info("r", f32, []),
                   helper.make_tensor_value_info("t", TensorProto.BOOL, [])],
                  [helper.make_tensor_value_info("y", f32, [N]), helper.make_tensor_value_info("mask", TensorProto.BOOL, [N])])
        (y, mask), _ = run(args.nxrt, m, [xs, np.array(0.3, np.float32), np.array(True)], tmp, "dropout_on")
        check(bool(np.allclose(y[mask], xs[mask] / 0.7, rtol=1e-6)) and bool((y[~mask] == 0).all()) and near(mask.mean(), 0.7, 0.02),
              f"Dropout training: kept {mask.mean():.3f} ~ 0.7, scaled by 1/0.7, dropped are 0")
        (y, mask), _ = run(args.nxrt, m, [xs, np.array(0.3, np.float32), np.array(False)], tmp, "dropout_off")
        check(np.array_equal(y, xs) and bool(mask.all()), "Dropout inference: Y = X, mask all true")
        # Bad input: a clear error (exit 1, one line naming the problem), never a crash.
        res, proc = run(args.nxrt, m, [xs, np.array(1.5, np.float32), np.array(True)], tmp, "dropout_bad")
        check(res is None and proc.returncode == 1 and "ratio" in proc.stderr, f"Dropout ratio 1.5: error '{proc.stderr.strip()[:100]}'")
        res, proc = run(args.nxrt, model(helper.make_node("Bernoulli", ["x"], ["y"]), [helper.make_tensor_value_info("x", f32, [2])],
                                         [helper.make_tensor_value_info("y", f32, [2])]), [np.array([0.5, 2.0], np.float32)], tmp, "bern_bad")
        check(res is None and proc.returncode == 1 and "outside [0, 1]" in proc.stderr, f"Bernoulli p = 2: error '{proc.stderr.strip()[:100]}'")
        dft = model(helper.make_node("DFT", ["x", "n"], ["y"], axis=1),
                    [helper.make_tensor_value_info("x", f32, [1, 4, 1]), helper.make_tensor_value_info("n", TensorProto.INT64, [])],
                    [helper.make_tensor_value_info("y", f32, ["b", "n", "c"])])
        res, proc = run(args.nxrt, dft, [np.ones((1, 4, 1), np.float32), np.array(0, np.int64)], tmp, "dft_bad")
        check(res is None and proc.returncode == 1 and "dft_length" in proc.stderr, f"DFT dft_length 0: error '{proc.stderr.strip()[:100]}'")
        (y,), _ = run(args.nxrt, dft, [np.arange(4, dtype=np.float32).reshape(1, 4, 1), np.array(6, np.int64)], tmp, "dft_pad")
        want = np.fft.fft(np.arange(4.0), 6)
        check(y.shape == (1, 6, 2) and bool(np.allclose(y[0, :, 0] + 1j * y[0, :, 1], want, atol=1e-5)), "DFT dft_length 6 > 4: zero padded")
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
