#!/usr/bin/python3
"""The CUDA plugin's no-device contract through the nxrt CLI and the conformance tool.

Usage: no_device.py MODE --build BUILD_DIR --fake-driver LIBFAKE.so
  plugins      `nxrt plugins` lists cuda with "devices: 0" and a precise reason: on this
               machine as it is (when it has no usable GPU), and forced through
               NXRT_CUDA_DRIVER: a missing driver library, a fake driver older than the
               toolkit, CUDA_VISIBLE_DEVICES="" and a fake driver that sees no GPU.
  run          `nxrt run M --ep cuda` fails (nonzero exit) and its message carries the reason.
  fallback     `nxrt run M --ep cuda,cpu --fallback` runs every node on cpu and gives the same
               outputs as `--ep cpu`.
  conformance  `nxrt-conformance --plugin cuda` (every suite) exits 0 with no failure and reports
               the device checks of each suite as "skipped" with "no device: <reason>".
On a machine with a GPU the "as it is" part is left out and the modes run with the
driver hidden (NXRT_CUDA_DRIVER=/nonexistent/libcuda.so.1), so they check the same path.
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HIDDEN = {"NXRT_CUDA_DRIVER": "/nonexistent/libcuda.so.1"}


def run(cmd, env=None, timeout=300):
    e = dict(os.environ)
    if env:
        e.update(env)
    return subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=timeout)


def cuda_section(out):
    m = re.search(r"^cuda\n((?:  .*\n?)*)", out, re.M)
    return m.group(1) if m else None


def plugins_report(exe, env=None):
    """(devices, reason) of the cuda plugin as `nxrt plugins` shows it."""
    r = run([exe, "plugins"], env)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: nxrt plugins exited {r.returncode}: {r.stderr[-500:]}")
    sect = cuda_section(r.stdout + r.stderr)
    if sect is None:
        raise SystemExit("FAIL: nxrt plugins does not list cuda:\n" + r.stdout[-1500:])
    dev = re.search(r"devices: (\d+)", sect)
    why = re.search(r"no device: (.*)", sect)
    return (int(dev.group(1)) if dev else -1), (why.group(1).strip() if why else None)


def no_device_env(exe):
    """The environment under which cuda has no device, and its reason."""
    n, why = plugins_report(exe)
    if n == 0:
        return {}, why
    n, why = plugins_report(exe, HIDDEN)
    return HIDDEN, why


def small_model(path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    w = numpy_helper.from_array((np.arange(12, dtype=np.float32).reshape(4, 3) - 5) / 10, "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["y"])], "g",
                          [x], [y], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    inputs = os.path.join(os.path.dirname(path), "in")
    os.makedirs(inputs, exist_ok=True)
    a = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    with open(os.path.join(inputs, "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(a, "x").SerializeToString())
    return inputs


def mode_plugins(args, exe):
    bad = []
    n, why = plugins_report(exe)
    if n == 0:
        print(f"this machine: no device: {why}")
        if not why or not any(k in why for k in ("CUDA driver missing", "CUDA driver too old", "no CUDA device",
                                                 "CUDA_VISIBLE_DEVICES", "failed to initialise")):
            bad.append(f"imprecise reason on this machine: {why!r}")
    else:
        print(f"this machine: {n} CUDA device(s); checking the forced cases only")
    fake = args.fake_driver
    cases = [
        (HIDDEN, "CUDA driver missing: cannot load libcuda.so.1"),
        ({"NXRT_CUDA_DRIVER": fake, "NXRT_FAKE_CUDA_VERSION": "11080"},
         "CUDA driver too old: it supports CUDA 11.8, the plugin was built with CUDA"),
        ({"NXRT_CUDA_DRIVER": fake, "NXRT_FAKE_CUDA_VERSION": "99000", "CUDA_VISIBLE_DEVICES": ""},
         "CUDA_VISIBLE_DEVICES is set to an empty list"),
        ({"NXRT_CUDA_DRIVER": fake, "NXRT_FAKE_CUDA_VERSION": "99000"}, "no CUDA device: the driver (CUDA 99.0) reports no GPU"),
    ]
    for env, want in cases:
        n, why = plugins_report(exe, env)
        if n != 0 or not why or want not in why:
            bad.append(f"{env}: devices {n}, reason {why!r}, want {want!r}")
        else:
            print(f"{sorted(env)}: {why}")
    return bad


def mode_run(args, exe):
    env, why = no_device_env(exe)
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "m.onnx")
        inputs = small_model(model)
        r = run([exe, "run", model, "--ep", "cuda", "--input-dir", inputs], env)
        msg = (r.stdout + r.stderr).strip()
        print(f"--ep cuda: exit {r.returncode}: {msg.splitlines()[-1] if msg else ''}")
        if r.returncode == 0:
            return ["--ep cuda succeeded without a device"]
        if why not in msg:
            return [f"--ep cuda message lacks the reason {why!r}: {msg[-500:]}"]
    return []


def mode_fallback(args, exe):
    env, _ = no_device_env(exe)
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "m.onnx")
        inputs = small_model(model)
        outs = {}
        for eps, extra in (("cpu", []), ("cuda,cpu", ["--fallback"])):
            od = os.path.join(tmp, eps.replace(",", "_"))
            r = run([exe, "run", model, "--ep", eps, *extra, "--input-dir", inputs, "--output-dir", od], env)
            if r.returncode != 0:
                return [f"--ep {eps} {extra}: exit {r.returncode}: {r.stderr[-500:]}"]
            placement = [l for l in (r.stdout + r.stderr).splitlines() if l.startswith("placement")]
            print(f"--ep {eps} {' '.join(extra)}: {placement}")
            if not placement or "cuda" in placement[0] or "cpu: 2 nodes" not in placement[0]:
                return [f"--ep {eps}: unexpected placement {placement}"]
            files = sorted(glob.glob(os.path.join(od, "output_*.pb")))
            if not files:
                return [f"--ep {eps}: no outputs written"]
            t = onnx.TensorProto()
            with open(files[0], "rb") as f:
                t.ParseFromString(f.read())
            outs[eps] = numpy_helper.to_array(t)
        if not np.array_equal(outs["cpu"], outs["cuda,cpu"]):
            return [f"outputs differ: {outs}"]
        if not (outs["cpu"] > 0).any():
            return ["the reference output is all zero: the model checks nothing"]
    return []


def mode_conformance(args, exe):
    env, why = no_device_env(exe)
    conf = os.path.join(args.build, "bin", "nxrt-conformance")
    if not os.path.exists(conf):
        return [f"no {conf}"]
    r = run([conf, "--plugin", "cuda", "--jobs", "2"], env, timeout=600)
    out = r.stdout + r.stderr
    total = re.search(r"(\d+) passed, (\d+) failed, (\d+) skipped", out)
    print(total.group(0) if total else out[-800:])
    bad = []
    if r.returncode != 0:
        bad.append(f"nxrt-conformance exited {r.returncode}")
    if not total or int(total.group(2)) != 0 or int(total.group(3)) == 0:
        bad.append("want no failure and some skipped checks")
    for suite in ("abi", "interop", "stress", "ops", "models"):
        if not re.search(rf"^\s*\d+ x {suite}: no device: {re.escape(why)}$", out, re.M):
            bad.append(f"the report lacks '{suite}: no device: {why}'")
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["plugins", "run", "fallback", "conformance"])
    ap.add_argument("--build", required=True)
    ap.add_argument("--fake-driver", required=True)
    args = ap.parse_args()
    exe = os.path.join(args.build, "bin", "nxrt")
    if not os.path.exists(exe):
        print(f"FAIL: no {exe}")
        return 1
    bad = {"plugins": mode_plugins, "run": mode_run, "fallback": mode_fallback, "conformance": mode_conformance}[args.mode](args, exe)
    for b in bad:
        print("FAIL", b)
    print(f"{args.mode}: {'FAIL' if bad else 'ok'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
