#!/usr/bin/python3
"""`nxrt inspect` when a strict run would fail, and `nxrt plugins --json`.

inspect without --fallback on a model the requested EPs cannot fully take must still print the
whole placement table with every refusal (the unplaced nodes shown where fallback would put them,
marked '*'), say that a strict run would fail and why, and exit 1; --json says the same in
"strict_run_fails" / "strict_error". plugins --json is one JSON object listing every plugin.

Usage: cli_inspect_test.py --nxrt BIN   (NXRT_PLUGIN_PATH must hold the cpu and sample plugins)
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import onnx
from onnx import TensorProto, helper


def model(path):
    """Relu(x) + b with b [3] broadcast: the sample plugin takes the Relu, refuses the Add."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Add", ["r", "b"], ["y"], name="add")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                                       helper.make_tensor_value_info("b", TensorProto.FLOAT, [3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nxrt", required=True)
    nxrt = ap.parse_args().nxrt
    failures = 0

    def check(name, ok, detail):
        nonlocal failures
        print(f"{'ok  ' if ok else 'FAIL'} {name}" + ("" if ok else f": {detail}"))
        failures += 0 if ok else 1

    with tempfile.TemporaryDirectory() as tmp:
        m = os.path.join(tmp, "m.onnx")
        model(m)
        p = subprocess.run([nxrt, "inspect", m, "--ep", "sample"], capture_output=True, text=True, timeout=60)
        lines = p.stdout.splitlines()
        add = [ln for ln in lines if ln.startswith("add ")]
        check("strict inspect exits 1", p.returncode == 1, p.stdout + p.stderr)
        check("the table lists the refused node with a '*' EP and the sample plugin's reason",
              len(add) == 1 and "cpu*" in add[0] and "sample Add needs two inputs of the same static shape" in add[0], p.stdout)
        check("the claimed node is listed on its EP", any(ln.startswith("relu ") and " sample " in ln for ln in lines), p.stdout)
        check("it says a strict run would fail, and why",
              "a run without --fallback would fail: 1 node(s) are not supported by the requested EPs" in p.stdout, p.stdout)
        p = subprocess.run([nxrt, "inspect", m, "--ep", "sample", "--json"], capture_output=True, text=True, timeout=60)
        try:
            j = json.loads(p.stdout)
            ok = (p.returncode == 1 and j["strict_run_fails"] is True and "not supported" in j["strict_error"]
                  and {n["name"]: n["ep"] for n in j["nodes"]} == {"relu": "sample", "add": "cpu"})
        except (ValueError, KeyError):
            ok = False
        check("inspect --json: strict_run_fails, strict_error, every node", ok, p.stdout + p.stderr)
        p = subprocess.run([nxrt, "inspect", m, "--ep", "sample", "--fallback"], capture_output=True, text=True, timeout=60)
        check("with --fallback it is a normal, successful inspect", p.returncode == 0 and "would fail" not in p.stdout
              and "placed by --fallback" in p.stdout, p.stdout + p.stderr)
        p = subprocess.run([nxrt, "inspect", m, "--ep", "nosuchep"], capture_output=True, text=True, timeout=60)
        check("an unknown EP is still a request error (exit 2)", p.returncode == 2 and "nosuchep" in p.stderr, p.stdout + p.stderr)

    v = subprocess.run([nxrt, "--version"], capture_output=True, text=True, timeout=60).stdout
    host_abi = re.search(r"EP ABI (\d+\.\d+)", v)
    p = subprocess.run([nxrt, "plugins", "--json", "--verbose"], capture_output=True, text=True, timeout=60)
    try:
        j = json.loads(p.stdout)
        by = {x["name"]: x for x in j["plugins"]}
        s = by["sample"]
        ok = (p.returncode == 0 and host_abi is not None and s["loaded"] and s["abi"] == host_abi.group(1) and s["device_count"] == len(s["devices"]) == 1
              and s["devices"][0]["name"] == "sample CPU device" and s["devices"][0]["host_addressable"] == "1" and "concurrent-run" in s["features"] and by["cpu"]["loaded"])
    except (ValueError, KeyError):
        ok = False
    check("plugins --json lists every plugin with abi (the SDK plugin at the host's), features, devices", ok, p.stdout + p.stderr)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
