#!/usr/bin/env python3
"""The .deb packages: `cpack -G DEB` from the build, each package's name, dependencies and files
checked, all installed with `dpkg --root` into a throwaway root the test makes (an empty dpkg
database; the Debian libraries they depend on are the system's, so --force-depends), each then
listed by dpkg as installed, then a model run there by the installed `nxrt` (which must find the
installed CPU and Vulkan plugins by itself) and by the installed Python module, against a float64
numpy reference. Finally the installed nxrt-dev is used to build samples/ep_minimal with
find_package(nxrt), which the installed nxrt then loads.

    deb_test.py --build BUILD_DIR --source SOURCE_DIR
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

import models


def run(cmd, env=None):
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-4000:]}")
    return p.stdout


PY_RUN = """
import sys, numpy as np, nxrt
assert nxrt.__file__.startswith(sys.argv[1]), nxrt.__file__
s = nxrt.InferenceSession(sys.argv[2], providers=["cpu"])
feeds = {i.name: np.load(f"{sys.argv[3]}/{i.name}.npy") for i in s.get_inputs()}
(out,) = s.run(None, feeds)
np.testing.assert_allclose(out, np.load(sys.argv[3] + "/ref.npy"), rtol=1e-6, atol=1e-6)
print("python ok", sorted(nxrt.get_all_providers()))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    missing = [t for t in ("cpack", "dpkg", "dpkg-deb") if not shutil.which(t)]
    if missing:
        print(f"SKIP: {', '.join(missing)} not found (not a Debian system)")
        sys.exit(77)
    work = tempfile.mkdtemp(prefix="nxrt-deb-")
    try:
        debs_dir = os.path.join(work, "debs")
        run(["cpack", "-G", "DEB", "-B", debs_dir, "--config", os.path.join(a.build, "CPackConfig.cmake")])
        debs = {}
        for f in sorted(os.listdir(debs_dir)):
            if f.endswith(".deb"):
                name = run(["dpkg-deb", "-f", os.path.join(debs_dir, f), "Package"]).strip()
                debs[name] = os.path.join(debs_dir, f)
        for required in ("nxrt", "nxrt-dev"):
            if required not in debs:
                sys.exit(f"FAIL: no {required} package among {sorted(debs)}")
        print(f"ok: packages {sorted(debs)}")

        def files(pkg):
            return [ln.split()[-1] for ln in run(["dpkg-deb", "-c", debs[pkg]]).splitlines() if not ln.endswith("/")]
        expect = {"nxrt": ["./usr/bin/nxrt", "./usr/bin/nxrt-conformance", "./usr/lib/libnxrt.so", "./usr/lib/nxrt/libnxrt_ep_cpu.so"],
                  "nxrt-dev": ["./usr/include/nxrt/nxrt.h", "./usr/include/nxrt_ep.h", "./usr/include/nxrt_sdk/sdk.hpp",
                               "./usr/lib/cmake/nxrt/nxrtConfig.cmake", "./usr/lib/pkgconfig/nxrt.pc"],
                  "nxrt-vulkan": ["./usr/lib/nxrt/libnxrt_ep_vulkan.so"],
                  "python3-nxrt": ["./usr/lib/python3/dist-packages/nxrt/__init__.py"]}
        for pkg, want in expect.items():
            if pkg not in debs:
                print(f"SKIP: no {pkg} package (not built here)")
                continue
            got = files(pkg)
            missing = [w for w in want if w not in got]
            if missing:
                sys.exit(f"FAIL: {pkg} lacks {missing}: {got}")
            if pkg != "nxrt" and not re.search(r"\bnxrt \(= ", run(["dpkg-deb", "-f", debs[pkg], "Depends"])):
                sys.exit(f"FAIL: {pkg} does not depend on the same nxrt version")
        print("ok: each package holds its files; the others depend on nxrt of the same version")

        root = os.path.join(work, "root")
        admin = os.path.join(root, "var", "lib", "dpkg")
        for d in ("info", "updates", "triggers"):
            os.makedirs(os.path.join(admin, d))
        for f in ("status", "available"):
            open(os.path.join(admin, f), "w").close()
        run(["dpkg", f"--root={root}", "--force-depends", "--force-script-chrootless", "-i", *debs.values()])
        listed = run(["dpkg", f"--root={root}", "-l"])
        for pkg in debs:
            if not re.search(rf"^ii\s+{re.escape(pkg)}\s", listed, re.M):
                sys.exit(f"FAIL: dpkg does not list {pkg} as installed:\n{listed}")
        print(f"ok: dpkg --root installed {sorted(debs)} into a throwaway root")
        env = {k: v for k, v in os.environ.items() if k not in ("NXRT_PLUGIN_PATH", "NXRT_SOURCE_DIR", "LD_LIBRARY_PATH")}
        nxrt = os.path.join(root, "usr", "bin", "nxrt")
        listing = run([nxrt, "plugins"], env=env)
        found = dict(re.findall(r"^(\w+)\n  path: (\S+)$", listing, re.M))
        for ep in ["cpu"] + (["vulkan"] if "nxrt-vulkan" in debs else []):
            if os.path.realpath(found.get(ep, "")) != os.path.realpath(os.path.join(root, "usr", "lib", "nxrt", f"libnxrt_ep_{ep}.so")):
                sys.exit(f"FAIL: the installed nxrt does not find the installed {ep} plugin:\n{listing}")
        print(f"ok: the installed nxrt finds {sorted(found)} in <root>/usr/lib/nxrt without configuration")

        model = os.path.join(work, "broadcast.onnx")
        ref = models.broadcast_model(model)["out"]
        inputs = {"X": models.pattern(0, (2, 3)), "Y": models.pattern(1, (3,)), "Z": models.pattern(2, (1,))}
        in_dir, out_dir = os.path.join(work, "in"), os.path.join(work, "out")
        os.makedirs(in_dir)
        for k, (name, arr) in enumerate(inputs.items()):
            onnx.save_tensor(numpy_helper.from_array(arr, name), os.path.join(in_dir, f"input_{k}.pb"))
            np.save(os.path.join(in_dir, f"{name}.npy"), arr)
        np.save(os.path.join(in_dir, "ref.npy"), ref)
        run([nxrt, "run", model, "--ep", "cpu", "--input-dir", in_dir, "--output-dir", out_dir], env=env)
        y = numpy_helper.to_array(onnx.load_tensor(os.path.join(out_dir, "output_0.pb")))
        np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-6)
        print("ok: the installed nxrt runs a model on the installed CPU plugin (matches numpy)")

        if "python3-nxrt" in debs:
            site = os.path.join(root, "usr", "lib", "python3", "dist-packages")
            out = run([sys.executable, "-c", PY_RUN, site, model, in_dir], env=dict(env, PYTHONPATH=site))
            print(f"ok: the installed Python module runs it too ({out.strip()})")
        else:
            print("SKIP: python: no python3-nxrt package (pybind11-dev missing at build time)")

        # The installed nxrt-dev is enough to build a plugin the installed nxrt then loads.
        b = os.path.join(work, "ep_minimal")
        run(["cmake", "-S", os.path.join(a.source, "samples", "ep_minimal"), "-B", b, "-G", "Ninja",
             f"-DCMAKE_PREFIX_PATH={os.path.join(root, 'usr')}", "-DCMAKE_BUILD_TYPE=Release"], env=env)
        run(["cmake", "--build", b, "-j1"], env=env)
        plugin = os.path.join(b, "libnxrt_ep_minimal.so")
        run([nxrt, "run", model, "--ep", "minimal", "--plugin", plugin, "--input-dir", in_dir, "--output-dir", out_dir], env=env)
        y = numpy_helper.to_array(onnx.load_tensor(os.path.join(out_dir, "output_0.pb")))
        np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-6)
        print("ok: ep_minimal built from the installed nxrt-dev runs in the installed nxrt")
        print("PASS")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
