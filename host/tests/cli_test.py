#!/usr/bin/python3
"""The nxrt CLI. Good paths: plugins, run (outputs written; sequence and optional .pb files), inspect,
bench JSON keys.
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


def relu_add_model(path, op="Relu", domain="", opset=17):
    nodes = [helper.make_node(op, ["x"], ["r"], domain=domain), helper.make_node("Add", ["r", "x"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                          initializer=[numpy_helper.from_array(np.arange(1000, dtype=np.float32), "unused_weights")])
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    m = helper.make_model(g, opset_imports=opsets)
    with open(path, "wb") as f:
        f.write(m.SerializeToString())  # no checker: some fixtures are invalid on purpose


def tensor(path, arr, name="x"):
    onnx.save_tensor(numpy_helper.from_array(arr, name), path)


GOOD_CHECKS = 8


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
          and "abi: 2.5" in p.stdout and "kind: cpu" in p.stdout, p.stdout + p.stderr)
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
    # nxrt optimize: the written model (no unused initializer left) runs to the same values.
    written = os.path.join(tmp, "optimized.onnx")
    p = subprocess.run([nxrt, "optimize", model, "-o", written, "--opt", "3"], capture_output=True, text=True, timeout=60)
    ok = p.returncode == 0 and "optimization level 3" in p.stdout and "dead-node elimination" in p.stdout
    if ok:
        m = onnx.load(written)
        onnx.checker.check_model(m)
        ok = [n.op_type for n in m.graph.node] == ["Relu", "Add"] and not m.graph.initializer
        p = subprocess.run([nxrt, "run", written, "--ep", "sample", "--opt", "0", "--input",
                            "x=" + os.path.join(tmp, "x_good.pb"), "--output-dir", out], capture_output=True, text=True,
                           timeout=60)
        y = numpy_helper.to_array(onnx.load_tensor(os.path.join(out, "output_0.pb")))
        ok = ok and p.returncode == 0 and np.array_equal(y, np.maximum(x, 0) + x)
    check("optimize writes a checked model that runs to the same values", ok, p.stdout + p.stderr)
    p = subprocess.run([nxrt, "inspect", model, "--ep", "sample", "--json", "--opt", "1"], capture_output=True, text=True,
                       timeout=60)
    try:
        ok = json.loads(p.stdout)["optimization"][0] == "optimization level 1"
    except (ValueError, KeyError, IndexError):
        ok = False
    check("inspect --json reports the optimizer's passes at the level asked for", ok, p.stdout + p.stderr)
    return failures


def sequence_paths(nxrt, tmp):
    """Sequence and optional inputs/outputs through `run --input-dir/--output-dir` (SequenceProto /
    OptionalProto files) and a missing sequence input. Returns (failures, checks)."""
    failures = 0

    def check(name, ok, detail):
        nonlocal failures
        print(f"{'ok  ' if ok else 'FAIL'} {name}" + ("" if ok else f": {detail}"))
        failures += 0 if ok else 1

    seq_t = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, None))
    nodes = [helper.make_node("SequenceInsert", ["s", "x"], ["s2"]), helper.make_node("SequenceLength", ["s2"], ["n"]),
             helper.make_node("Optional", ["s2"], ["o"])]
    g = helper.make_graph(nodes, "seq", [helper.make_value_info("s", seq_t),
                                         helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_value_info("s2", seq_t), helper.make_tensor_value_info("n", TensorProto.INT64, []),
                           helper.make_value_info("o", helper.make_optional_type_proto(seq_t))])
    model = os.path.join(tmp, "seq.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), model)
    data = os.path.join(tmp, "seq_data")
    os.makedirs(data, exist_ok=True)
    items = [np.array([1, 2], np.float32), np.array([3, 4, 5], np.float32)]
    with open(os.path.join(data, "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_list(items, "s").SerializeToString())
    tensor(os.path.join(data, "input_1.pb"), np.array([7, 8], np.float32))
    out = os.path.join(tmp, "seq_out")
    p = subprocess.run([nxrt, "run", model, "--ep", "sample", "--input-dir", data, "--output-dir", out],
                       capture_output=True, text=True, timeout=60)
    ok = p.returncode == 0
    try:
        sp, op = onnx.SequenceProto(), onnx.OptionalProto()
        with open(os.path.join(out, "output_0.pb"), "rb") as f:
            sp.ParseFromString(f.read())
        with open(os.path.join(out, "output_2.pb"), "rb") as f:
            op.ParseFromString(f.read())
        got = numpy_helper.to_list(sp)
        n = numpy_helper.to_array(onnx.load_tensor(os.path.join(out, "output_1.pb")))
        opt = numpy_helper.to_optional(op)
        ok = ok and len(got) == 3 and np.array_equal(got[2], [7, 8]) and np.array_equal(got[1], [3, 4, 5]) and int(n) == 3
        ok = ok and isinstance(opt, list) and len(opt) == 3 and "sequence of 3 float32 tensors" in p.stdout
    except (OSError, ValueError, TypeError) as e:
        ok = False
        p.stderr += str(e)
    check("run reads a SequenceProto input and writes SequenceProto / OptionalProto outputs", ok, p.stdout + p.stderr)
    p = subprocess.run([nxrt, "run", model, "--ep", "sample"], capture_output=True, text=True, timeout=60)
    check("a sequence input without a file is a clear error (exit 2)",
          p.returncode == 2 and "input 's' is a sequence: give it as a .pb file" in p.stderr, p.stdout + p.stderr)
    return failures, 2


def relu_model(path, n=1):
    """x[2,3] -> n x Relu -> y (every node runs on the hooks test plugin)."""
    nodes, prev = [], "x"
    for i in range(n):
        out = "y" if i + 1 == n else f"r{i}"
        nodes.append(helper.make_node("Relu", [prev], [out]))
        prev = out
    g = helper.make_graph(nodes, "relu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    with open(path, "wb") as f:
        f.write(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())


def abi2_cases(nxrt, t, plug):
    """ABI 2.0 error paths with the exit code each must give: 1 for a plugin failure
    (including an output shape disagreeing with shape inference), 2 only for a bad request."""
    relu = os.path.join(t, "relu.onnx")
    relu_model(relu)
    x = ["--input", "x=" + os.path.join(t, "x.pb")]
    run = [nxrt, "run"]
    hooks = ["--ep", "hooks", "--plugin", plug("hooks")]
    return [
        # plugin failures: exit 1
        ("1.x plugin (polite) refused at load", run + [relu, "--plugin", plug("abi1")],
         "plugin 'libnxrt_ep_abi1.so' is built for nxrt EP ABI 1.x; this host speaks 2.5", 1),
        ("1.x plugin (careless) refused at load", run + [relu, "--plugin", plug("abi1_careless")],
         "plugin 'libnxrt_ep_abi1_careless.so' is built for nxrt EP ABI 1.x; this host speaks 2.5", 1),
        ("plugin session_create fails (permanent)", run + [relu] + hooks + x +
         ["--ep-option", "hooks.fail_session_create=permanent"], "attempt 1 failed (permanent)", 1),
        ("plugin session_create fails (retryable, twice)", run + [relu] + hooks + x +
         ["--ep-option", "hooks.fail_session_create=retryable_always"], "attempt 2 failed (retryable", 1),
        ("kernel fails", run + [relu] + hooks + x + ["--run-option", "hooks.fail=1"], "was asked to fail", 1),
        ("kernel output disagrees with shape inference", run + [relu] + hooks + x + ["--run-option", "hooks.bad_shape=1"],
         "but shape inference says", 1),
        # bad requests: exit 2, one line naming the key
        ("--ep-option unknown key", run + [relu] + hooks + x + ["--ep-option", "hooks.nope=1"],
         "unknown option 'hooks.nope' for EP 'hooks' (its options: hooks.log, hooks.fail_session_create, hooks.sleep_us)",
         2),
        ("--ep-option wrong type", run + [relu] + hooks + x + ["--ep-option", "hooks.sleep_us=abc"],
         "option 'hooks.sleep_us' for EP 'hooks' needs an int, got 'abc'", 2),
        ("--ep-option for an EP not in the list", run + [relu, "--ep", "sample", "--plugin", plug("hooks")] + x +
         ["--ep-option", "hooks.log=/tmp/x"],
         "option 'hooks.log' is for EP 'hooks', which is not in the EP list (sample)", 2),
        ("--ep-option without EP prefix", run + [relu, "--ep", "sample"] + x + ["--ep-option", "foo=1"],
         "option 'foo' has no '<ep>.' prefix", 2),
        ("--ep-option for an unknown EP", run + [relu, "--ep", "sample"] + x + ["--ep-option", "nosuchep.k=1"],
         "option 'nosuchep.k' is for EP 'nosuchep'", 2),
        ("--ep-option malformed", run + [relu, "--ep", "sample"] + x + ["--ep-option", "novalue"],
         "--ep-option needs EP.KEY=VALUE, got 'novalue'", 2),
        ("--run-option for an EP the session does not use", run + [relu] + hooks + x + ["--run-option", "cpu.k=1"],
         "run option 'cpu.k' is for EP 'cpu', which this session does not use (its EPs: hooks)", 2),
    ]


def abi2_good_paths(nxrt, t, plug):
    """ABI 2.0 listings and hooks through the CLI. Returns (failures, checks)."""
    import json
    failures, checks = 0, 0

    def check(name, ok, detail):
        nonlocal failures, checks
        checks += 1
        print(f"{'ok  ' if ok else 'FAIL'} {name}" + ("" if ok else f": {detail}"))
        failures += 0 if ok else 1

    def section(out, name):
        """The lines of one plugin's block in `nxrt plugins` output."""
        lines, inside = [], False
        for line in out.splitlines():
            if not line.startswith(" "):
                inside = line == name
                continue
            if inside:
                lines.append(line)
        return "\n".join(lines)

    p = subprocess.run([nxrt, "--version"], capture_output=True, text=True, timeout=60)
    check("--version names the EP ABI 2.5", p.returncode == 0 and "(EP ABI 2.5)" in p.stdout, p.stdout + p.stderr)

    # Refused 1.x plugins are listed with the reason, naming both majors; listing still exits 0.
    p = subprocess.run([nxrt, "plugins", "--plugin", plug("abi1"), "--plugin", plug("abi1_careless")],
                       capture_output=True, text=True, timeout=60)
    ok = p.returncode == 0
    for name in ("abi1", "abi1_careless"):
        block = section(p.stdout, f"libnxrt_ep_{name}") or section(p.stdout, name)
        ok = ok and (f"status: not loaded: plugin 'libnxrt_ep_{name}.so' is built for nxrt EP ABI 1.x; "
                     "this host speaks 2.5 (rebuild it against the 2.x header)") in block
    check("plugins lists both 1.x plugins as refused, naming majors 1 and 2", ok, p.stdout + p.stderr)

    # Options schema and features.
    p = subprocess.run([nxrt, "plugins", "--verbose", "--plugin", plug("hooks")], capture_output=True, text=True,
                       timeout=60)
    hooks = section(p.stdout, "hooks")
    check("plugins --verbose shows a test plugin's options schema and hook features",
          p.returncode == 0 and "  options:" in hooks
          and '    hooks.log (path, default: ""): file the plugin appends one line per hook call to' in hooks
          and '    hooks.sleep_us (int, default: "0"): each kernel sleeps this many microseconds' in hooks
          and "hooks.fail_session_create (string" in hooks
          and "run-hooks" in hooks and "device-profiling" in hooks, p.stdout + p.stderr)
    cpu = section(p.stdout, "cpu")
    check("plugins --verbose shows the cpu plugin's options (or 'none')",
          "  options:" in cpu and ("options: none" in cpu or "    cpu." in cpu), p.stdout)
    vk = section(p.stdout, "vulkan")
    if "status: not loaded" in vk or not vk:
        print("skip plugins --verbose vulkan options: the vulkan plugin is not loaded here")
    else:
        check("plugins --verbose shows the vulkan plugin's options schema",
              "    vulkan.device (int" in vk and "    vulkan.pipeline_cache (path" in vk, vk)
    p2 = subprocess.run([nxrt, "plugins", "--plugin", plug("hooks")], capture_output=True, text=True, timeout=60)
    check("plugins without --verbose has no options block", "options:" not in p2.stdout, p2.stdout)

    # A newer minor: loads at 2.0 with the unknown feature bit masked off.
    p = subprocess.run([nxrt, "plugins", "--plugin", plug("future_minor")], capture_output=True, text=True, timeout=60)
    fm = section(p.stdout, "future_minor")
    check("a 2.9 plugin is listed at abi 2.5 without its extra feature bit",
          p.returncode == 0 and "abi: 2.5" in fm and "features: concurrent-run\n" in fm + "\n" and "bit40" not in fm,
          p.stdout + p.stderr)
    # An older minor: a plugin built against the 2.0 header runs at 2.0.
    p = subprocess.run([nxrt, "plugins", "--plugin", plug("v2_0")], capture_output=True, text=True, timeout=60)
    v20 = section(p.stdout, "v2_0")
    check("a 2.0 plugin is listed at abi 2.0", p.returncode == 0 and "abi: 2.0" in v20, p.stdout + p.stderr)

    # Two plugins offering one physical device (same uuid).
    p = subprocess.run([nxrt, "plugins", "--plugin", plug("twin_a"), "--plugin", plug("twin_b")], capture_output=True,
                       text=True, timeout=60)
    a, b = section(p.stdout, "twin_a"), section(p.stdout, "twin_b")
    check("equal uuids are shown as one physical device, with pci_bus_id and free memory",
          p.returncode == 0 and "same device as twin_a:0" in b and "same device as" not in a
          and all("pci_bus_id: 0000:3b:00.0" in s and "memory_free: 3072 MiB" in s
                  and "uuid: 6e787274-2d74-7769-6e2d-757569640001" in s for s in (a, b)), p.stdout + p.stderr)

    # Run hooks and run options through `nxrt run`; device events through `bench --profile`.
    relu2 = os.path.join(t, "relu2.onnx")
    relu_model(relu2, 2)
    log = os.path.join(t, "hooks.log")
    xin = ["--input", "x=" + os.path.join(t, "x.pb")]
    p = subprocess.run([nxrt, "run", relu2, "--ep", "hooks", "--plugin", plug("hooks"), "--ep-option",
                        "hooks.log=" + log, "--run-option", "hooks.tag=cli"] + xin, capture_output=True, text=True,
                       timeout=60)
    lines = open(log).read().splitlines() if os.path.exists(log) else []
    starts = [ln for ln in lines if ln.startswith("start ")]
    ends = [ln for ln in lines if ln.startswith("end ")]
    check("run forwards --ep-option to session_create and --run-option to on_run_start",
          p.returncode == 0 and len(starts) == 1 and len(ends) == 1 and "opts=hooks.tag=cli" in starts[0]
          and "status=ok" in ends[0] and sum(ln.startswith("kernel ") for ln in lines) == 2,
          p.stdout + p.stderr + "\n".join(lines))
    trace = os.path.join(t, "hooks_trace.json")
    p = subprocess.run([nxrt, "bench", relu2, "--ep", "hooks", "--plugin", plug("hooks"), "--warmup", "1", "--iters",
                        "3", "--json", "--profile", trace], capture_output=True, text=True, timeout=60)
    try:
        with open(trace) as f:
            ev = json.load(f)["traceEvents"]
        dev = [e for e in ev if e.get("cat") == "device"]
        ok = p.returncode == 0 and len(dev) == 3 * 2 and {e["name"] for e in dev} == {"relu@0", "relu@1"}
    except (OSError, ValueError, KeyError):
        ok = False
    check("bench --profile puts the plugin's device events in the trace (3 runs x 2 kernels)", ok, p.stdout + p.stderr)

    # Device interop: bench --io-binding keeps I/O on the device: the plugin's copy counters
    # show the first (host) run's upload and download and the one upload of the bound input,
    # whatever the number of timed runs.
    p = subprocess.run([nxrt, "bench", relu2, "--ep", "devmem", "--plugin", plug("devmem"), "--warmup", "2", "--iters",
                        "7", "--json", "--io-binding"], capture_output=True, text=True, timeout=60)
    try:
        j = json.loads(p.stdout)
        mem = j["memory"][0]
        ok = (p.returncode == 0 and j["io_binding"] == "devmem" and mem["ep"] == "devmem"
              and mem["plugin"]["host_to_device_copies"] == 2 and mem["plugin"]["device_to_host_copies"] == 1
              and mem["bytes_in_use"] > 0 and mem["arena_bytes"] > 0)
    except (ValueError, KeyError, IndexError, TypeError):
        ok = False
    check("bench --io-binding --json: memory stats, no transfer per run", ok, p.stdout + p.stderr)
    p = subprocess.run([nxrt, "run", relu2, "--ep", "devmem", "--plugin", plug("devmem"), "--memory-limit", "100"] + xin,
                       capture_output=True, text=True, timeout=60)
    check("--memory-limit below what the run needs: exit 1, RESOURCE_EXHAUSTED naming the limit",
          p.returncode == 1 and "device memory limit is 100 bytes" in p.stderr, p.stdout + p.stderr)
    p = subprocess.run([nxrt, "inspect", relu2, "--ep", "devmem", "--plugin", plug("devmem")], capture_output=True,
                       text=True, timeout=60)
    check("inspect prints the EP's memory", p.returncode == 0 and "memory devmem: host-held" in p.stdout,
          p.stdout + p.stderr)
    return failures, checks


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
    relu_add_model(os.path.join(t, "future_opset.onnx"), opset=999)
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
        ("plugin refusing negotiation", run + [good, "--plugin", plug("newmajor")],
         "plugin 'libnxrt_ep_newmajor.so' is built for nxrt EP ABI 3.x; this host speaks 2.5", 1),
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
        ("optimize without -o", [args.nxrt, "optimize", good], "'nxrt optimize' needs -o OUT.onnx", 2),
        ("--opt out of range", run + [good, "--ep", "sample", "--opt", "4"], "--opt needs an integer from 0 to 3, got '4'", 2),
        ("opset newer than the schemas", run + [os.path.join(t, "future_opset.onnx"), "--ep", "sample"],
         "imports opset 999 of domain 'ai.onnx', newer than this build's ONNX schemas know", 1),
        ("optimize into a missing folder", [args.nxrt, "optimize", good, "-o", os.path.join(t, "no", "dir", "o.onnx")],
         "cannot write model file", 2),
    ]
    cases += abi2_cases(args.nxrt, t, plug)
    failures = 0
    for case in cases:
        name, cmd, want = case[:3]
        want_code = case[3] if len(case) > 3 else None
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
        if want_code is not None and p.returncode != want_code:
            problems.append(f"exit code {p.returncode}, want {want_code}")
        elif p.returncode not in (1, 2):
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
    if p.returncode != 0 or "not loaded: plugin" not in p.stdout or "is built for nxrt EP ABI 3.x; this host speaks 2.5" not in p.stdout:
        failures += 1
        print(f"FAIL plugins listing with a broken plugin: exit {p.returncode}\n{p.stdout}{p.stderr}")
    else:
        print("ok   plugins lists the broken plugin with its reason")
    failures += good_paths(args.nxrt, good, t)
    abi2_failures, abi2_checks = abi2_good_paths(args.nxrt, t, plug)
    failures += abi2_failures
    seq_failures, seq_checks = sequence_paths(args.nxrt, t)
    failures += seq_failures
    total = len(cases) + 1 + GOOD_CHECKS + abi2_checks + seq_checks
    print(f"{total - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
