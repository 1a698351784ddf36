#!/usr/bin/python3
"""Compiling for a described CUDA device with no driver and no GPU (ABI 2.4 offline compile).

Usage: offline_compile.py --build BUILD_DIR [--out DIR]
  `nxrt compile M --ep cuda --target DEV.json -o M.nxrt`, DEV.json describing an H200
  (cuda.compute_capability 9.0) as `nxrt plugins --json` prints a CUDA device, on a machine
  where the CUDA plugin has no device (on one with a GPU, the driver is hidden with
  NXRT_CUDA_DRIVER): exits 0, and the artifact holds the plugin's kernel blobs whose cubins
  are CUDA ELF files for sm_90 (checked from the ELF header; with cuobjdump when the toolkit
  has it); a description of an A100 (8.0) gives sm_80 cubins. Without NVRTC
  (NXRT_CUDA_NVRTC pointing nowhere), without a compute capability or for another vendor,
  compile fails with a message that says so. With --out, the artifacts and DEV.json files
  are kept there (tools/gpu_check.sh runs them on the GPU).
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HIDDEN = {"NXRT_CUDA_DRIVER": "/nonexistent/libcuda.so.1"}
failures = []


def check(what, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)
        if detail:
            print("     " + str(detail)[-1500:].replace("\n", "\n     "))


def run(cmd, env=None):
    e = dict(os.environ)
    e.update(HIDDEN)
    if env:
        e.update(env)
    return subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=300)


def chain_model(path):
    """MatMul, then element-wise nodes the plugin fuses into one generated kernel."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 32])
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.standard_normal((16, 32)).astype(np.float32) / 4, "w")]
    for name, v in [("two", 2.0), ("one", 1.0), ("half", 0.5)]:
        inits.append(numpy_helper.from_array(np.array(v, dtype=np.float32), name))
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("Mul", ["m", "two"], ["a"]),
        helper.make_node("Tanh", ["a"], ["b"]),
        helper.make_node("Add", ["b", "one"], ["c"]),
        helper.make_node("Mul", ["c", "half"], ["d"]),
        helper.make_node("Mul", ["d", "m"], ["e"]),
        helper.make_node("Abs", ["e"], ["y"]),
    ]
    g = helper.make_graph(nodes, "chain", [x], [y], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    inputs = os.path.join(os.path.dirname(path), "chain_in")
    os.makedirs(inputs, exist_ok=True)
    with open(os.path.join(inputs, "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(np.linspace(-2, 2, 64, dtype=np.float32).reshape(4, 16), "x").SerializeToString())


def described(name, cc):
    """A CUDA device as `nxrt plugins --json` prints one (values are text)."""
    return {"kind": "gpu", "name": name, "vendor": "NVIDIA", "vendor_id": "4318", "device_id": "0", "uuid": "",
            "memory_bytes": "150754820096", "host_addressable": "0", "pci_bus_id": "0000:00:00.0",
            "dtypes": "float32,float16,int32,int64,int8,uint8,bool", "cuda.compute_capability": cc, "cuda.sm_count": "132",
            "cuda.driver_version": "13.0", "cuda.runtime_version": "13.0",
            "cuda.precisions": "float32 float16 (tf32 with cuda.allow_tf32)", "cuda.kernel_architectures": "90"}


def cubin_archs(artifact):
    """The SM architecture of every CUDA ELF inside the CUDA kernel blobs of an artifact."""
    data = open(artifact, "rb").read()
    archs, at = [], 0
    while True:
        at = data.find(b"NXRTCUDA", at)
        if at < 0:
            return archs
        elf = data.find(b"\x7fELF", at)
        if elf >= 0 and data[elf + 4] == 2 and struct.unpack_from("<H", data, elf + 18)[0] == 190:
            flags = struct.unpack_from("<I", data, elf + 48)[0]
            archs.append((flags >> 8) & 0xFF if data[elf + 8] >= 8 else flags & 0xFF)
        at += 8


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--out")
    a = ap.parse_args()
    exe = os.path.join(a.build, "bin", "nxrt")
    t = a.out or tempfile.mkdtemp(prefix="nxrt_cuda_offline_")
    os.makedirs(t, exist_ok=True)
    try:
        p = run([exe, "plugins", "--json"])
        cuda = [x for x in json.loads(p.stdout)["plugins"] if x["name"] == "cuda"]
        check("nxrt plugins --json lists cuda with kernel-cache and offline-compile, and no device (driver hidden)",
              cuda and cuda[0]["device_count"] == 0 and "kernel-cache" in cuda[0]["features"]
              and "offline-compile" in cuda[0]["features"], p.stdout[-800:])
        m = os.path.join(t, "chain.onnx")
        chain_model(m)
        for name, cc, sm in [("NVIDIA H200", "9.0", 90), ("NVIDIA A100-SXM4-80GB", "8.0", 80)]:
            target = os.path.join(t, f"sm{sm}.json")
            json.dump(described(name, cc), open(target, "w"))
            out = os.path.join(t, f"chain_sm{sm}.nxrt")
            p = run([exe, "compile", m, "--ep", "cuda", "--target", target, "-o", out])
            check(f"compile --ep cuda --target ({name}, {cc}) with no GPU", p.returncode == 0 and os.path.exists(out),
                  p.stdout + p.stderr)
            if p.returncode:
                continue
            check(f"{name}: the listing names the cuda kernels", "cuda" in p.stdout and "kernel" in p.stdout, p.stdout)
            archs = cubin_archs(out)
            check(f"{name}: the artifact's CUDA blobs hold cubins for sm_{sm}", archs and all(x == sm for x in archs), archs)
            cuobjdump = shutil.which("cuobjdump") or ("/usr/local/cuda/bin/cuobjdump" if os.path.exists("/usr/local/cuda/bin/cuobjdump") else None)
            if cuobjdump and archs:
                data = open(out, "rb").read()
                at = data.find(b"\x7fELF", data.find(b"NXRTCUDA"))
                cub = os.path.join(t, f"sm{sm}.cubin")
                open(cub, "wb").write(data[at:])  # trailing bytes after the ELF are ignored by its header
                q = subprocess.run([cuobjdump, "-sass", cub], capture_output=True, text=True)
                check(f"{name}: cuobjdump disassembles nxrt_chain_0 for sm_{sm}",
                      q.returncode == 0 and "nxrt_chain_0" in q.stdout and f"sm_{sm}" in q.stdout, q.stdout[-600:] + q.stderr)
        target = os.path.join(t, "sm90.json")
        p = run([exe, "compile", m, "--ep", "cuda", "--target", target, "-o", os.path.join(t, "x.nxrt")],
                {"NXRT_CUDA_NVRTC": "/nonexistent/libnvrtc.so"})
        check("without NVRTC: compile --target fails naming NVRTC", p.returncode != 0 and "NVRTC" in p.stderr, p.stderr)
        bad = dict(described("NVIDIA H200", "9.0"))
        del bad["cuda.compute_capability"]
        json.dump(bad, open(os.path.join(t, "nocc.json"), "w"))
        p = run([exe, "compile", m, "--ep", "cuda", "--target", os.path.join(t, "nocc.json"), "-o", os.path.join(t, "x.nxrt")])
        check("a description without cuda.compute_capability: a clear error",
              p.returncode != 0 and "cuda.compute_capability" in p.stderr, p.stderr)
        amd = dict(described("Radeon", "9.0"), vendor_id="4098")
        json.dump(amd, open(os.path.join(t, "amd.json"), "w"))
        p = run([exe, "compile", m, "--ep", "cuda", "--target", os.path.join(t, "amd.json"), "-o", os.path.join(t, "x.nxrt")])
        check("another vendor's device: refused with the reason", p.returncode != 0 and "not an NVIDIA GPU" in p.stderr, p.stderr)
    finally:
        if not a.out:
            shutil.rmtree(t, ignore_errors=True)
    if failures:
        print(f"{len(failures)} failed")
        sys.exit(1)
    print("all passed")


if __name__ == "__main__":
    main()
