#!/usr/bin/python3
"""Corrupted model files through `nxrt run`: seeded truncations and byte flips of a small
valid model. Every run must end with exit 0, 1 or 2 (never a signal or a hang), and a
failure must be one line starting with 'nxrt: error: '.

Usage: fuzz_models.py --nxrt BIN [--cases N] [--seed S]
"""
import argparse
import os
import random
import subprocess
import sys
import tempfile

import numpy as np
from onnx import TensorProto, helper, numpy_helper


def base_model():
    r = np.random.default_rng(0)
    w = numpy_helper.from_array(r.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(r.standard_normal((4,)).astype(np.float32), "b")
    fc = numpy_helper.from_array(r.standard_normal((10, 64)).astype(np.float32), "fc")
    shape = numpy_helper.from_array(np.array([1, 64], np.int64), "shape")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Reshape", ["p", "shape"], ["f"]),
             helper.make_node("Gemm", ["f", "fc"], ["y"], transB=1)]
    g = helper.make_graph(nodes, "fuzz", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], [w, b, fc, shape])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def mutations(data, n, rng):
    for i in range(n):
        kind = i % 3
        if kind == 0:  # truncation
            yield f"truncated at {i * 7919 % len(data)}", data[: i * 7919 % len(data)]
        elif kind == 1:  # a few flipped bytes
            b = bytearray(data)
            for _ in range(rng.randint(1, 4)):
                b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
            yield "bit flips", bytes(b)
        else:  # a random byte overwritten with an extreme value (lengths, tags, dims)
            b = bytearray(data)
            b[rng.randrange(len(b))] = rng.choice([0x00, 0x7F, 0x80, 0xFF])
            yield "byte overwrite", bytes(b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nxrt", required=True)
    ap.add_argument("--cases", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    data = base_model()
    rng = random.Random(args.seed)
    failures = outcomes = 0
    counts = {0: 0, 1: 0, 2: 0}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.onnx")
        for what, blob in mutations(data, args.cases, rng):
            with open(path, "wb") as f:
                f.write(blob)
            try:
                p = subprocess.run([args.nxrt, "run", path, "--ep", "cpu"], capture_output=True, text=True, errors="replace",
                                   timeout=60)
            except subprocess.TimeoutExpired:
                failures += 1
                print(f"FAIL {what}: hung for 60 s (input kept as {path}.hang)")
                os.replace(path, path + ".hang")
                continue
            outcomes += 1
            lines = p.stderr.strip().splitlines()
            bad = p.returncode not in (0, 1, 2) or (p.returncode != 0 and (len(lines) != 1 or not lines[0].startswith("nxrt: error: ")))
            if bad:
                failures += 1
                keep = os.path.join(os.getcwd(), f"fuzz-crash-{failures}.onnx")
                with open(keep, "wb") as f:
                    f.write(blob)
                print(f"FAIL {what}: exit {p.returncode}, stderr {p.stderr.strip()[:300]!r} (input saved as {keep})")
            else:
                counts[p.returncode] += 1
    print(f"{args.cases} corrupted models: {counts[0]} still ran, {counts[1] + counts[2]} refused with one line")
    print(f"{args.cases - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
