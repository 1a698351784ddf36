#!/usr/bin/python3
"""The cpu plugin's bf16 fast-math option (cpu.precision=bf16) end to end through `nxrt`:

- where the CPU has AVX-512 BF16 (`nxrt plugins --json`: device property bf16=yes): MatMul,
  MatMul+Add and Gemm with constant weights say "bf16" in `nxrt inspect`, and only with the
  option; their results match numpy on bf16-rounded operands, differ from float32 (so the
  rounding happened) by no more than bf16's precision; without the option the float32 result
  is unchanged; a kernel cache shared by a float32 and a bf16 session never hands one the
  other's weights;
- everywhere: the option is refused with a clear error where AVX-512 BF16 is missing
  (NXRT_CPU_ISA=avx2 makes every CPU such a one), and a value other than fp32 / bf16 is refused.

Usage: bf16_precision_e2e.py --nxrt BIN   (NXRT_PLUGIN_PATH must hold the cpu plugin)
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPT = ["--ep-option", "cpu.precision=bf16"]


def bf16(a):
    """Round float32 to bfloat16 (nearest even, subnormals to zero), kept as float32."""
    u = np.ascontiguousarray(a, np.float32).view(np.uint32).astype(np.uint64)
    tiny = (u & 0x7F800000) == 0
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    u = np.where(tiny, u & 0x80000000, u)
    return u.astype(np.uint32).view(np.float32)


def model(rng):
    w1 = rng.uniform(-1, 1, (300, 200)).astype(np.float32)
    b1 = rng.uniform(-1, 1, 200).astype(np.float32)
    w2 = rng.uniform(-1, 1, (130, 200)).astype(np.float32)  # Gemm transB=1
    c2 = rng.uniform(-1, 1, 130).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["m1"], name="mm1"),
             helper.make_node("Add", ["m1", "b1"], ["a1"], name="add1"),
             helper.make_node("Relu", ["a1"], ["r1"], name="relu1"),
             helper.make_node("Gemm", ["r1", "w2", "c2"], ["y"], name="gemm2", transB=1),
             helper.make_node("MatMul", ["x3", "w1"], ["z"], name="mm3")]
    g = helper.make_graph(nodes, "bf16", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 300]),
                                          helper.make_tensor_value_info("x3", TensorProto.FLOAT, [3, 5, 300])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 130]),
                           helper.make_tensor_value_info("z", TensorProto.FLOAT, [3, 5, 200])],
                          [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
                           numpy_helper.from_array(w2, "w2"), numpy_helper.from_array(c2, "c2")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), (w1, b1, w2, c2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nxrt", required=True)
    nxrt = ap.parse_args().nxrt
    failures = 0

    def check(name, ok, detail=""):
        nonlocal failures
        print(f"{'ok  ' if ok else 'FAIL'} {name}" + ("" if ok else f": {detail}"))
        failures += 0 if ok else 1

    def call(args, env_extra=None):
        env = dict(os.environ, **(env_extra or {}))
        return subprocess.run([nxrt] + args, capture_output=True, text=True, timeout=300, env=env)

    with tempfile.TemporaryDirectory() as tmp:
        rng = np.random.default_rng(7)
        m, (w1, b1, w2, c2) = model(rng)
        path = os.path.join(tmp, "bf16.onnx")
        onnx.save(m, path)
        x = rng.uniform(-1, 1, (64, 300)).astype(np.float32)
        x3 = rng.uniform(-1, 1, (3, 5, 300)).astype(np.float32)
        inputs = []
        for name, v in (("x", x), ("x3", x3)):
            f = os.path.join(tmp, name + ".pb")
            with open(f, "wb") as fh:
                fh.write(numpy_helper.from_array(v, name).SerializeToString())
            inputs += ["--input", f"{name}={f}"]

        # Refusals, on every machine.
        p = call(["run", path] + inputs + ["--ep-option", "cpu.precision=fp16"])
        check("cpu.precision=fp16 is refused, naming the option and the values",
              p.returncode != 0 and "cpu.precision" in p.stderr and "bf16" in p.stderr, p.stderr.strip())
        p = call(["run", path] + inputs + OPT, {"NXRT_CPU_ISA": "avx2"})
        check("bf16 under NXRT_CPU_ISA=avx2 is refused: the CPU (as capped) lacks AVX-512 BF16",
              p.returncode != 0 and "AVX-512 BF16" in p.stderr and "NXRT_CPU_ISA" in p.stderr, p.stderr.strip())

        p = call(["plugins", "--json"])
        cpu = [d for pl in json.loads(p.stdout)["plugins"] if pl["name"] == "cpu" for d in pl["devices"]]
        has_bf16 = bool(cpu) and cpu[0].get("bf16") == "yes"  # device properties sit beside kind, name...
        if not has_bf16:
            p = call(["run", path] + inputs + OPT)
            check("without AVX-512 BF16 the option is refused with a clear error",
                  p.returncode != 0 and "AVX-512 BF16" in p.stderr, p.stderr.strip())
            print("(this CPU has no AVX-512 BF16: the bf16 results are not checked here)")
            return 1 if failures else 0

        def describe(extra):
            p = call(["inspect", path, "--json"] + extra)
            nodes = json.loads(p.stdout)["nodes"] if p.returncode == 0 else []
            return {n["name"]: n.get("kernel", "") for n in nodes}

        k32, k16 = describe([]), describe(OPT)
        check("with the option MatMul(+Add), Gemm and the batched MatMul say bf16",
              all("bf16" in k16.get(n, "") for n in ("mm1", "gemm2", "mm3")), k16)
        check("without it no kernel says bf16", not any("bf16" in k for k in k32.values()), k32)

        def run(extra, tag):
            out = os.path.join(tmp, tag)
            p = call(["run", path] + inputs + ["--output-dir", out] + extra)
            if p.returncode != 0:
                check(f"run {tag}", False, p.stderr.strip())
                return None
            return [numpy_helper.to_array(onnx.load_tensor(os.path.join(out, f"output_{i}.pb"))) for i in range(2)]

        f32, b16 = run([], "fp32"), run(OPT, "bf16")
        if f32 is None or b16 is None:
            return 1
        # References: float64 products of the float32 operands, and of the bf16-rounded ones
        # (the bf16 path rounds the Gemm's input, the Relu output, too).
        y32 = np.maximum(x.astype(np.float64) @ w1 + b1, 0) @ w2.T.astype(np.float64) + c2
        z32 = x3.astype(np.float64) @ w1
        r16 = np.maximum(bf16(x).astype(np.float64) @ bf16(w1) + b1, 0).astype(np.float32)
        y16 = bf16(r16).astype(np.float64) @ bf16(w2).T.astype(np.float64) + c2
        z16 = bf16(x3).astype(np.float64) @ bf16(w1)
        for name, got32, got16, want32, want16 in (("Gemm(Relu(MatMul+Add))", f32[0], b16[0], y32, y16),
                                                     ("batched MatMul", f32[1], b16[1], z32, z16)):
            scale = float(np.abs(want32).max())
            check(f"{name}: float32 run matches float64 within 1e-5 of its scale",
                  np.abs(got32 - want32).max() <= 1e-5 * scale, np.abs(got32 - want32).max())
            # A Relu output may round to the neighbouring bf16 value when float32 and float64
            # sums differ in the last bit: a few ulps of bf16 on one operand of 200.
            check(f"{name}: bf16 run matches the bf16-rounded reference within 2e-3 of its scale",
                  np.abs(got16 - want16).max() <= 2e-3 * scale, np.abs(got16 - want16).max() / scale)
            d = float(np.abs(got16 - got32).max())
            check(f"{name}: bf16 differs from float32 (rounding happened) by at most 2% of the scale",
                  1e-6 * scale < d <= 2e-2 * scale, d / scale)

        # One cache folder, both precisions: each session gets its own weights back.
        cache = os.path.join(tmp, "cache")
        for tag, extra, want in (("fp32 into cache", [], f32), ("bf16 into cache", OPT, b16),
                                 ("fp32 from cache", [], f32), ("bf16 from cache", OPT, b16)):
            got = run(extra + ["--cache", cache], tag.replace(" ", "_"))
            check(f"{tag}: same outputs as without a cache",
                  got is not None and all(np.array_equal(g, w) for g, w in zip(got, want)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
