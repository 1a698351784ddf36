#!/usr/bin/env python3
"""The installed SDK end to end: `cmake --install` into a temporary prefix, the three samples
built out of tree with find_package(nxrt) (warnings as errors), run through host_embed (C and
C++) against float64 numpy references, and both sample EPs certified by the installed
nxrt-conformance (abi, interop, stress suites). Also checks the pkg-config files and that the
installed host finds its CPU plugin with no NXRT_PLUGIN_PATH.

    install_samples_test.py --build BUILD_DIR --source SOURCE_DIR
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import models

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd, env=None, cwd=None):
    p = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-4000:]}")
    return p.stdout


def clean_env():
    env = dict(os.environ)
    env.pop("NXRT_PLUGIN_PATH", None)  # the installed host must find its plugins by itself
    env.pop("NXRT_SOURCE_DIR", None)
    return env


def check_embed(out, expected, placement, what):
    """`out` is host_embed's output: node lines, then 'output NAME [dims] on EP: sum S'."""
    for node, ep in placement.items():
        m = re.search(rf"^node {node} \(\w+\) -> (\S+)(.*)$", out, re.M)
        if not m or m.group(1) != ep or "fallback" in m.group(2):
            sys.exit(f"FAIL: {what}: node {node} should run on {ep} (no fallback):\n{out}")
    for name, ref in expected.items():
        m = re.search(rf"^output {name} \[([0-9,]*)\] on (\S+): sum (\S+)$", out, re.M)
        if not m:
            sys.exit(f"FAIL: {what}: no output {name}:\n{out}")
        dims = tuple(int(d) for d in m.group(1).split(",") if d)
        if dims != ref.shape or abs(float(m.group(3)) - ref.sum()) > 1e-4 * max(1.0, abs(ref.sum())):
            sys.exit(f"FAIL: {what}: output {name} {dims} sum {m.group(3)}, expected {ref.shape} sum {ref.sum():.6f}")
    print(f"ok: {what}")


PY_CHECK = """
import sys, numpy as np, nxrt, nxrt.conformance
sys.path.insert(0, sys.argv[4])
import models
assert nxrt.__file__.startswith(sys.argv[1]), nxrt.__file__
assert "cpu" in nxrt.get_available_providers(), nxrt.get_plugins()
assert nxrt.register_plugin(sys.argv[2]) == "minimal"
s = nxrt.InferenceSession(sys.argv[3], providers=["minimal"])
feeds = {"X": models.pattern(0, (2, 3)), "Y": models.pattern(1, (3,)), "Z": models.pattern(2, (1,))}
(out,) = s.run(None, feeds)
np.testing.assert_allclose(out, np.load(sys.argv[5]), rtol=1e-6, atol=1e-6)
assert {ep for _, _, ep, _, _ in s.get_placement()} == {"minimal"}
r = nxrt.conformance.certify(sys.argv[2], suites=["abi"], jobs=2, timeout=20)
assert r["passed"] and r["report"]["summary"]["passed"] > 50, r["output"][-2000:]
assert nxrt.conformance.executable().startswith(sys.argv[6]), nxrt.conformance.executable()
print("python ok")
"""


def check_python(prefix, env, plugin, model, ref):
    """The installed nxrt package: import, providers, a run on ep_minimal, nxrt.conformance."""
    site = [os.path.join(r, "nxrt") for r, ds, _ in os.walk(prefix) for d in ds if d == "nxrt" and "dist-packages" in r]
    if not site:
        print("SKIP: python: no nxrt package installed (pybind11-dev missing at build time)")
        return
    ref_file = os.path.join(os.path.dirname(model), "ref.npy")
    import numpy as np
    np.save(ref_file, ref)
    out = run([sys.executable, "-c", PY_CHECK, site[0], plugin, model, HERE, ref_file, prefix],
              env=dict(env, PYTHONPATH=os.path.dirname(site[0])))
    if "python ok" not in out:
        sys.exit(f"FAIL: python: {out}")
    print("ok: the installed nxrt Python package runs ep_minimal and certifies it (nxrt.conformance)")


def guide_script(source):
    """The shell blocks of docs/plugin-guide.md between its guide-steps markers, in order."""
    with open(os.path.join(source, "docs", "plugin-guide.md")) as f:
        text = f.read()
    m = re.search(r"<!-- guide-steps: begin -->(.*)<!-- guide-steps: end -->", text, re.S)
    if not m:
        sys.exit("FAIL: docs/plugin-guide.md has no guide-steps markers")
    blocks = re.findall(r"^```sh\n(.*?)^```$", m.group(1), re.S | re.M)
    if len(blocks) < 5:
        sys.exit(f"FAIL: docs/plugin-guide.md: only {len(blocks)} sh blocks between the markers")
    return "set -euo pipefail\n" + "\n".join(blocks)


def run_guide(source, prefix, env, work):
    """docs/plugin-guide.md section 0, run as written in an empty folder against the prefix."""
    folder = os.path.join(work, "guide")
    os.makedirs(folder)
    genv = dict(env, NXRT_PREFIX=prefix, NXRT_CONFORMANCE_CACHE=os.path.join(work, "cache"),
                PATH="/usr/bin:" + env.get("PATH", ""))  # python3 = Debian's, with python3-onnx
    out = run(["bash", "-c", guide_script(source)], env=genv, cwd=folder)
    if "myep: [[0. 3. 0. 5.]] certified:" not in out:
        sys.exit(f"FAIL: the plugin guide's steps did not end with the Python check:\n{out[-3000:]}")
    print("ok: docs/plugin-guide.md section 0 runs as written (empty folder -> certified myep)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="nxrt-install-")
    try:
        prefix = os.path.join(work, "prefix")
        run(["cmake", "--install", a.build, "--prefix", prefix])
        env = clean_env()
        nxrt, conformance = os.path.join(prefix, "bin", "nxrt"), os.path.join(prefix, "bin", "nxrt-conformance")
        listing = run([nxrt, "plugins"], env=env)
        if not re.search(r"^cpu\n  path: .*/lib[^/]*/nxrt/libnxrt_ep_cpu\.so$", listing, re.M):
            sys.exit(f"FAIL: the installed nxrt does not find the installed CPU plugin:\n{listing}")
        print("ok: installed nxrt finds <libdir>/nxrt/libnxrt_ep_cpu.so without NXRT_PLUGIN_PATH")

        # pkg-config, relocated with the prefix (the .pc files are relative to themselves).
        pc_env = dict(env, PKG_CONFIG_PATH=":".join(
            os.path.join(r, d) for r, ds, _ in os.walk(prefix) for d in ds if d == "pkgconfig"))
        cflags = run(["pkg-config", "--cflags", "--libs", "nxrt"], env=pc_env)
        incs = [os.path.realpath(f[2:]) for f in cflags.split() if f.startswith("-I")]
        if incs != [os.path.realpath(os.path.join(prefix, "include"))]:
            sys.exit(f"FAIL: pkg-config nxrt gives '{cflags.strip()}', not the install prefix {prefix}")
        script = run(["pkg-config", "--variable=versionscript", "nxrt-sdk"], env=pc_env).strip()
        if not os.path.isfile(script):
            sys.exit(f"FAIL: pkg-config nxrt-sdk versionscript '{script}' does not exist")
        print("ok: pkg-config nxrt / nxrt-sdk point into the prefix")

        built = {}
        for sample in ("ep_minimal", "ep_device", "host_embed"):
            b = os.path.join(work, "build", sample)
            run(["cmake", "-S", os.path.join(a.source, "samples", sample), "-B", b, "-G", "Ninja",
                 f"-DCMAKE_PREFIX_PATH={prefix}", "-DCMAKE_BUILD_TYPE=Release",
                 "-DCMAKE_C_FLAGS=-Wall -Wextra -Werror", "-DCMAKE_CXX_FLAGS=-Wall -Wextra -Werror"], env=env)
            run(["cmake", "--build", b, "-j1"], env=env)
            built[sample] = b
            print(f"ok: samples/{sample} built against the prefix")
        minimal = os.path.join(built["ep_minimal"], "libnxrt_ep_minimal.so")
        device = os.path.join(built["ep_device"], "libnxrt_ep_device.so")
        embed_c = os.path.join(built["host_embed"], "host_embed_c")
        embed_cpp = os.path.join(built["host_embed"], "host_embed_cpp")

        bc, mlp = os.path.join(work, "broadcast.onnx"), os.path.join(work, "mlp.onnx")
        bc_ref, mlp_ref = models.broadcast_model(bc), models.mlp_model(mlp)
        every_bc = {n: "minimal" for n in ("Add_0", "Mul_1", "Sub_2", "Div_3", "Relu_4")}
        for exe in (embed_c, embed_cpp):
            tag = os.path.basename(exe)
            check_embed(run([exe, bc, "minimal", minimal], env=env), bc_ref, every_bc, f"{tag}: ep_minimal, broadcasting, dynamic N")
            check_embed(run([exe, mlp, "device", device], env=env), mlp_ref,
                        {n: "device" for n in ("mm1", "add1", "relu1", "mm2", "add2")}, f"{tag}: ep_device, fused MatMul+Add+Relu")
            # Fallback: minimal has no MatMul, so those go to the installed CPU plugin.
            check_embed(run([exe, mlp, "minimal,cpu", minimal], env=env), mlp_ref,
                        {"mm1": "cpu", "add1": "minimal", "relu1": "minimal"}, f"{tag}: minimal,cpu")
        # The fused group really is one kernel: the profile shows one MatMul+Add+Relu step on device.
        trace = os.path.join(work, "trace.json")
        run([nxrt, "bench", mlp, "--ep", "device", "--plugin", device, "--iters", "1", "--warmup", "0", "--profile", trace], env=env)
        with open(trace) as f:
            events = json.load(f)
        events = events["traceEvents"] if isinstance(events, dict) else events
        steps = sorted({(e.get("args", {}).get("ep"), e.get("args", {}).get("ops")) for e in events if e.get("ph") == "X"})
        if ("device", "MatMul+Add+Relu") not in steps or ("device", "Relu") in steps:
            sys.exit(f"FAIL: ep_device did not run MatMul+Add+Relu as one fused kernel: {steps}")
        print("ok: ep_device runs MatMul+Add+Relu as one fused kernel (profile)")
        # Bad input: a clear error and exit 1, no crash.
        p = subprocess.run([embed_c, bc, "nosuchep"], env=env, capture_output=True, text=True)
        if p.returncode != 1 or "nosuchep" not in p.stderr:
            sys.exit(f"FAIL: host_embed_c with an unknown EP: exit {p.returncode}, stderr {p.stderr!r}")
        print("ok: host_embed_c names an unknown EP and exits 1")

        for plugin in (minimal, device):
            report = os.path.join(work, os.path.basename(plugin) + ".md")
            out = run([conformance, "--plugin", plugin, "--suite", "abi,interop,stress", "--jobs", "2", "--timeout", "20",
                       "--stress-seconds", "2", "--report-md", report], env=env)
            m = re.search(r"(\d+) passed, (\d+) failed", out)
            if not m or int(m.group(1)) < 50 or int(m.group(2)) != 0:
                sys.exit(f"FAIL: conformance of {plugin}:\n{out[-3000:]}")
            print(f"ok: {os.path.basename(plugin)} certified (abi, interop, stress): {m.group(0)}")
        check_python(prefix, env, minimal, bc, bc_ref["out"])
        run_guide(a.source, prefix, env, work)
        print("PASS")
    finally:
        if a.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
