#!/usr/bin/python3
"""The nxrt CLI. Good paths: plugins, run (outputs written), inspect, bench JSON keys.
Bad input: each case must exit 1 or 2 with one clear line that names the problem, never
crash or hang. Uses the always-built `sample` plugin.

Usage: cli_errors.py --nxrt BIN --test-plugins DIR
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def relu_add_model(path, op="Relu", domain=""):
    nodes = [helper.make_node(op, ["x"], ["r"], domain=domain), helper.make_node("Add", ["r", "x"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                          initializer=[numpy_helper.from_array(np.arange(1000, dtype=np.float32), "unused_weights")])
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    m = helper.make_model(g, opset_imports=opsets)
    with open(path, "wb") as f:
        f.write(m.SerializeToString())  # no checker: some fixtures are invalid on purpose


def tensor(path, arr, name="x"):
    onnx.save_tensor(numpy_helper.from_array(arr, name), path)


GOOD_CHECKS = 6


def good_paths(nxrt, model, tmp):
    """Returns the number of failed checks."""
    import json
    failures = 0

    def check(name, ok, detail):
        nonlocal failures
        print(f"{'ok  ' if ok else 'FAIL'} {name}" + ("" if ok else f": {detail}"))
        failures += 0 if ok else 1

    env = {k: v for k, v in os.environ.items() if k != "NXRT_PLUGIN_PATH"}
    p = subprocess.run([nxrt, "plugins"], capture_output=True, text=True, timeout=60, env=env)
    check("plugins are found in ../lib beside nxrt without NXRT_PLUGIN_PATH",
          p.returncode == 0 and "libnxrt_ep_sample.so" in p.stdout, p.stdout + p.stderr)
    p = subprocess.run([nxrt, "plugins"], capture_output=True, text=True, timeout=60)
    check("plugins lists sample with ABI and device", p.returncode == 0 and "sample" in p.stdout
          and "abi: 1.1" in p.stdout and "kind: cpu" in p.stdout, p.stdout + p.stderr)
    out = os.path.join(tmp, "out")
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    tensor(os.path.join(tmp, "x_good.pb"), x)
    p = subprocess.run([nxrt, "run", model, "--ep", "sample", "--input", "x=" + os.path.join(tmp, "x_good.pb"),
                        "--output-dir", out], capture_output=True, text=True, timeout=60)
    ok = p.returncode == 0 and os.path.exists(os.path.join(out, "output_0.pb"))
    if ok:
        y = numpy_helper.to_array(onnx.load_tensor(os.path.join(out, "output_0.pb")))
        ok = y.dtype == np.float32 and np.array_equal(y, np.maximum(x, 0) + x)
    check("run writes output_0.pb with the right values", ok, p.stdout + p.stderr)
    p = subprocess.run([nxrt, "inspect", model, "--ep", "sample", "--json"], capture_output=True, text=True, timeout=60)
    try:
        j = json.loads(p.stdout)
        ok = [n["ep"] for n in j["nodes"]] == ["sample", "sample"] and j["copies"] == 0
    except ValueError:
        ok = False
    check("inspect --json names the EP of every node", ok, p.stdout + p.stderr)
    p = subprocess.run([nxrt, "bench", model, "--ep", "sample", "--threads", "1", "--warmup", "1", "--iters", "3",
                        "--json"], capture_output=True, text=True, timeout=60)
    keys = {"engine", "model", "ep", "threads", "iters", "median_ms", "p90_ms", "min_ms", "load_ms", "peak_rss_mb"}
    try:
        lines = p.stdout.strip().splitlines()
        j = json.loads(lines[0])
        ok = len(lines) == 1 and keys <= set(j) and j["engine"] == "nxrt" and j["iters"] == 3 and j["median_ms"] >= 0
    except (ValueError, IndexError):
        ok = False
    check("bench --json prints one line with the anchor's keys", ok, p.stdout + p.stderr)
    trace = os.path.join(tmp, "trace.json")
    p = subprocess.run([nxrt, "bench", model, "--ep", "sample", "--warmup", "1", "--iters", "3", "--json",
                        "--profile", trace], capture_output=True, text=True, timeout=60)
    try:
        with open(trace) as f:
            ev = json.load(f)["traceEvents"]
        runs = [e for e in ev if e["cat"] == "run"]
        kernels = [e for e in ev if e["cat"] == "kernel"]
        ok = (p.returncode == 0 and len(json.loads(p.stdout)) > 0 and len(runs) == 3 and len(kernels) == 6
              and sorted({e["args"]["ops"] for e in kernels}) == ["Add", "Relu"]
              and all(e["args"]["ep"] == "sample" and e["ph"] == "X" and e["dur"] >= 0 for e in kernels)
              and all(r["dur"] >= sum(k["dur"] for k in kernels if k["args"]["run"] == r["args"]["run"]) for r in runs)
              and "profile: 9 events" in p.stderr)
    except (OSError, ValueError, KeyError):
        ok = False
    check("bench --profile writes a Chrome trace of the timed runs (3 runs x 2 kernels)", ok, p.stdout + p.stderr)
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nxrt", required=True)
    ap.add_argument("--test-plugins", required=True)
    args = ap.parse_args()
    t = tempfile.mkdtemp(prefix="nxrt-cli-")
    good = os.path.join(t, "good.onnx")
    relu_add_model(good)
    relu_add_model(os.path.join(t, "unknown_op.onnx"), op="FooBar")
    relu_add_model(os.path.join(t, "custom_op.onnx"), op="FooBar", domain="com.example")
    data = open(good, "rb").read()
    open(os.path.join(t, "truncated.onnx"), "wb").write(data[: len(data) * 3 // 5])
    open(os.path.join(t, "corrupt.onnx"), "wb").write(bytes(range(256)) * 8)
    open(os.path.join(t, "empty.onnx"), "wb").close()
    tensor(os.path.join(t, "x.pb"), np.ones((2, 3), np.float32))
    tensor(os.path.join(t, "x_int.pb"), np.ones((2, 3), np.int64))
    tensor(os.path.join(t, "x_shape.pb"), np.ones((3, 2), np.float32))
    open(os.path.join(t, "garbage.pb"), "wb").write(b"\xff\xff\xff\xff not a tensor")
    plug = lambda name: os.path.join(args.test_plugins, f"libnxrt_ep_{name}.so")  # noqa: E731

    run = [args.nxrt, "run"]
    cases = [
        ("unknown EP", run + [good, "--ep", "foo"], "unknown EP 'foo'"),
        ("EP without device", run + [good, "--ep", "nodevice", "--plugin", plug("nodevice")],
         "EP 'nodevice' has no device: no test accelerator is attached"),
        ("missing plugin file", run + [good, "--plugin", "/nonexistent/libnxrt_ep_x.so"],
         "plugin file '/nonexistent/libnxrt_ep_x.so' does not exist"),
        ("plugin refusing negotiation", run + [good, "--plugin", plug("newmajor")], "needs nxrt EP ABI 2.x"),
        ("missing model", run + [os.path.join(t, "nope.onnx"), "--ep", "sample"], "does not exist"),
        ("corrupt model", run + [os.path.join(t, "corrupt.onnx"), "--ep", "sample"], "is not a valid ONNX model"),
        ("truncated model", run + [os.path.join(t, "truncated.onnx"), "--ep", "sample"], "is not a valid ONNX model"),
        ("empty model", run + [os.path.join(t, "empty.onnx"), "--ep", "sample"], "is not a valid ONNX model"),
        ("unknown op", run + [os.path.join(t, "unknown_op.onnx"), "--ep", "sample"], "No Op registered for FooBar"),
        ("op no EP claims", run + [os.path.join(t, "custom_op.onnx"), "--ep", "sample"],
         "node 'FooBar_0' (com.example::FooBar): sample: no kernel for com.example::FooBar"),
        ("wrong input name", run + [good, "--ep", "sample", "--input", "bogus=" + os.path.join(t, "x.pb")],
         "the model has no input named 'bogus' (its inputs: x)"),
        ("wrong input dtype", run + [good, "--ep", "sample", "--input", "x=" + os.path.join(t, "x_int.pb")],
         "input 'x' is int64 but the model expects float32"),
        ("wrong input shape", run + [good, "--ep", "sample", "--input", "x=" + os.path.join(t, "x_shape.pb")],
         "input 'x' has shape [3,2] but the model expects [2,3]"),
        ("unreadable pb", run + [good, "--ep", "sample", "--input", "x=" + os.path.join(t, "garbage.pb")],
         "is not a valid ONNX TensorProto file"),
        ("missing pb", run + [good, "--ep", "sample", "--input", "x=" + os.path.join(t, "none.pb")],
         "cannot open tensor file"),
        ("missing input dir", run + [good, "--ep", "sample", "--input-dir", os.path.join(t, "nodir")],
         "input folder"),
        ("bad thread count", run + [good, "--ep", "sample", "--threads", "abc"], "--threads needs an integer"),
        ("unwritable profile", run + [good, "--ep", "sample", "--input", "x=" + os.path.join(t, "x.pb"), "--profile",
                                      os.path.join(t, "no", "such", "dir", "t.json")],
         "cannot write the profile to"),
        ("unknown command", [args.nxrt, "frobnicate"], "unknown command 'frobnicate'"),
    ]
    failures = 0
    for name, cmd, want in cases:
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            print(f"FAIL {name}: hung for 60 s")
            failures += 1
            continue
        lines = p.stderr.strip().splitlines()
        first = lines[0] if lines else ""
        usage = first.startswith("nxrt: error:") and len(lines) > 1 and lines[1].startswith("usage:")
        problems = []
        if p.returncode not in (1, 2):
            problems.append(f"exit code {p.returncode}, want 1 or 2")
        if want not in first:
            problems.append(f"first stderr line {first!r} lacks {want!r}")
        if not first.startswith("nxrt: error: "):
            problems.append("message does not start with 'nxrt: error: '")
        if len(lines) != 1 and not usage:
            problems.append(f"{len(lines)} stderr lines, want one")
        if problems:
            failures += 1
            print(f"FAIL {name}: " + "; ".join(problems))
        else:
            print(f"ok   {name}: exit {p.returncode}: {first}")
    # A plugin that cannot load is listed with its reason, not fatal.
    p = subprocess.run([args.nxrt, "plugins", "--plugin", plug("newmajor")], capture_output=True, text=True, timeout=60)
    if p.returncode != 0 or "not loaded: plugin" not in p.stdout or "needs nxrt EP ABI 2.x" not in p.stdout:
        failures += 1
        print(f"FAIL plugins listing with a broken plugin: exit {p.returncode}\n{p.stdout}{p.stderr}")
    else:
        print("ok   plugins lists the broken plugin with its reason")
    failures += good_paths(args.nxrt, good, t)
    total = len(cases) + 1 + GOOD_CHECKS
    print(f"{total - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
