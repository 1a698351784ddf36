#!/usr/bin/python3
"""Corrupted model files through `nxrt run`: seeded truncations and byte flips of a small
valid model. Every run (under a 4 GiB address-space limit) must end with exit 0, 1 or 2
(never a signal, a sanitizer report or a hang), and a failure must be one line starting
with 'nxrt: error: '. host/tests/hostile_models.py reuses run_nxrt and refusal_problem.

Usage: fuzz_models.py --nxrt BIN [--cases N] [--seed S]
"""
import argparse
import os
import random
import resource
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


MEMORY_LIMIT = 4 << 30  # address space of each nxrt run: a model that would need more must be refused
SANITIZER_MARKS = ("Sanitizer", "runtime error:")


def limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_nxrt(nxrt, model, timeout, address_limit=True):
    """`nxrt run MODEL --ep cpu` under a 4 GiB address-space limit (address_limit=False: none, for
    AddressSanitizer builds, which reserve terabytes of shadow memory); raises TimeoutExpired."""
    return subprocess.run([nxrt, "run", model, "--ep", "cpu"], capture_output=True, text=True, errors="replace",
                          timeout=timeout, preexec_fn=limit_memory if address_limit else None)


def refusal_problem(p):
    """Why run `p` is not a clean outcome (exit 0, or exit 1/2 with one 'nxrt: error: ' line and
    no sanitizer report), or None when it is."""
    lines = p.stderr.strip().splitlines()
    if p.returncode < 0:
        return f"killed by signal {-p.returncode}"
    if p.returncode not in (0, 1, 2):
        return f"exit {p.returncode}"
    if any(m in p.stderr for m in SANITIZER_MARKS):
        return "sanitizer report"
    if p.returncode != 0 and (len(lines) != 1 or not lines[0].startswith("nxrt: error: ")):
        return "the error is not one 'nxrt: error: ' line"
    return None


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
                p = run_nxrt(args.nxrt, path, 60)
            except subprocess.TimeoutExpired:
                failures += 1
                print(f"FAIL {what}: hung for 60 s (input kept as {path}.hang)")
                os.replace(path, path + ".hang")
                continue
            outcomes += 1
            bad = refusal_problem(p)
            if bad:
                failures += 1
                keep = os.path.join(os.getcwd(), f"fuzz-crash-{failures}.onnx")
                with open(keep, "wb") as f:
                    f.write(blob)
                print(f"FAIL {what}: {bad}: exit {p.returncode}, stderr {p.stderr.strip()[:300]!r} (input saved as {keep})")
            else:
                counts[p.returncode] += 1
    print(f"{args.cases} corrupted models: {counts[0]} still ran, {counts[1] + counts[2]} refused with one line")
    print(f"{args.cases - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
