#!/usr/bin/python3
"""`nxrt compile`, `--cache DIR` and `nxrt inspect --cache` through the CLI (issue 12).

- compile writes MODEL.nxrt next to the model (never over it); `nxrt run MODEL.nxrt` gives the
  bytes `nxrt run MODEL.onnx` gives.
- a cache folder: the first inspect says "cache: miss" and writes the entry, the second "hit";
  an entry with a flipped byte or cut short is never trusted: the run's outputs stay the same
  bytes, inspect prints the verdict, and the entry is written again.
- compile --target DEVICE.json with the device object `nxrt plugins --json` prints (the cachemul
  test plugin, which compiles for described devices): the result runs on that device with the
  verdict "optimal"; with another lane count it says "must recompile" and why.

Usage: cli_compile_test.py --nxrt BIN --test-plugins DIR   (NXRT_PLUGIN_PATH holds the cpu plugin)
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def conv_model(path):
    """Conv 3x3 (prepacked weights on the CPU plugin) + Relu + MatMul by a constant."""
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w")
    m = numpy_helper.from_array(rng.standard_normal((16, 5)).astype(np.float32), "m")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "m"], ["y"], name="mm")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 16, 5])], [w, m])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def mul_model(path):
    """Mul by a constant: what the cachemul test plugin takes."""
    c = numpy_helper.from_array(np.arange(64, dtype=np.float32).reshape(1, 64) * 0.5, "c")
    g = helper.make_graph([helper.make_node("Mul", ["x", "c"], ["y"], name="mul")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])], [c])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nxrt", required=True)
    ap.add_argument("--test-plugins", required=True)
    a = ap.parse_args()
    nxrt = a.nxrt
    cachemul = os.path.join(a.test_plugins, "libnxrt_ep_cachemul.so")
    failures = 0

    def check(name, ok, detail=""):
        nonlocal failures
        print(f"{'ok  ' if ok else 'FAIL'} {name}" + ("" if ok else f": {detail}"))
        failures += 0 if ok else 1

    def sh(*args):
        return subprocess.run([nxrt, *args], capture_output=True, text=True, timeout=300)

    def outputs(d):
        return {os.path.basename(f): open(f, "rb").read() for f in sorted(glob.glob(os.path.join(d, "*.pb")))}

    with tempfile.TemporaryDirectory() as t:
        m = os.path.join(t, "model.onnx")
        conv_model(m)
        p = sh("run", m, "--ep", "cpu", "--output-dir", os.path.join(t, "o_onnx"))
        check("run the ONNX model", p.returncode == 0, p.stderr)
        want = outputs(os.path.join(t, "o_onnx"))

        art = os.path.join(t, "model.nxrt")
        p = sh("compile", m, "--ep", "cpu", "-o", art)
        check("compile writes MODEL.nxrt and describes it", p.returncode == 0 and os.path.exists(art)
              and "plugin cpu" in p.stdout, p.stdout + p.stderr)
        p = sh("compile", m, "--ep", "cpu", "-o", m)
        check("compile never writes over the model (exit 2)", p.returncode == 2 and "never over it" in p.stderr, p.stderr)
        p = sh("run", art, "--ep", "cpu", "--output-dir", os.path.join(t, "o_art"))
        check("run MODEL.nxrt: the same output bytes", p.returncode == 0 and outputs(os.path.join(t, "o_art")) == want,
              p.stderr)
        p = sh("inspect", art, "--ep", "cpu")
        check("inspect MODEL.nxrt prints the container and the cache verdicts",
              p.returncode == 0 and "compiled model" in p.stdout and "cache: compiled-model" in p.stdout, p.stdout + p.stderr)

        cache = os.path.join(t, "cache")
        p = sh("inspect", m, "--ep", "cpu", "--cache", cache)
        check("first use of a cache folder: miss, entry written", p.returncode == 0 and "cache: miss" in p.stdout
              and "wrote" in p.stdout, p.stdout + p.stderr)
        p = sh("inspect", m, "--ep", "cpu", "--cache", cache)
        check("second use: hit", p.returncode == 0 and "cache: hit" in p.stdout, p.stdout + p.stderr)
        p = sh("bench", m, "--ep", "cpu", "--cache", cache, "--iters", "1", "--warmup", "0", "--json")
        try:
            j = json.loads(p.stdout)
            ok = j["load"]["cache"]["mode"] == "hit" and "compile" in j["load"]["stages"] and j["load_ms"] > 0
        except (ValueError, KeyError):
            ok = False
        check("bench --json reports the load time, its stages and the cache", p.returncode == 0 and ok, p.stdout + p.stderr)
        entry = glob.glob(os.path.join(cache, "*.nxrt"))
        check("one entry in the folder", len(entry) == 1, str(entry))
        good = open(entry[0], "rb").read()
        for what, bad in [("a flipped header byte", good[:30] + bytes([good[30] ^ 1]) + good[31:]),
                          ("a flipped byte at the end", good[:-2] + bytes([good[-2] ^ 0x40]) + good[-1:]),
                          ("cut in half", good[: len(good) // 2]), ("random bytes", os.urandom(3000))]:
            open(entry[0], "wb").write(bad)
            out = os.path.join(t, "o_" + what.replace(" ", "_"))
            p = sh("run", m, "--ep", "cpu", "--cache", cache, "--output-dir", out, "--verbose")
            check(f"cache entry {what}: same output bytes, a verdict printed",
                  p.returncode == 0 and outputs(out) == want and ("must recompile" in p.stderr or "unsupported" in p.stderr
                                                                  or "refused" in p.stderr), p.stderr)
            p = sh("inspect", m, "--ep", "cpu", "--cache", cache)
            check(f"cache entry {what}: written again (hit)", p.returncode == 0 and "cache: hit" in p.stdout, p.stdout)

        # A described device: the cachemul test plugin compiles for it without opening it.
        mm = os.path.join(t, "mul.onnx")
        mul_model(mm)
        p = sh("plugins", "--json", "--plugin", cachemul)
        dev = [x for x in json.loads(p.stdout)["plugins"] if x["name"] == "cachemul"][0]["devices"][0]
        check("plugins --json prints a device as a flat object with its properties", dev.get("cachemul.lanes") == "8", dev)
        for lanes, verdict in [("8", "optimal"), ("2", "usable but slower"), ("32", "must recompile")]:
            d = dict(dev, **{"cachemul.lanes": lanes})
            target = os.path.join(t, f"dev{lanes}.json")
            json.dump(d, open(target, "w"))
            out = os.path.join(t, f"mul{lanes}.nxrt")
            p = sh("compile", mm, "--plugin", cachemul, "--ep", "cachemul", "--target", target, "-o", out)
            check(f"compile --target (lanes {lanes})", p.returncode == 0 and os.path.exists(out), p.stdout + p.stderr)
            p = sh("inspect", out, "--plugin", cachemul, "--ep", "cachemul")
            check(f"the result on this device: {verdict}", p.returncode == 0 and f"cachemul: {verdict}" in p.stdout,
                  p.stdout + p.stderr)
        json.dump({"name": "no lanes"}, open(os.path.join(t, "bad.json"), "w"))
        p = sh("compile", mm, "--plugin", cachemul, "--ep", "cachemul", "--target", os.path.join(t, "bad.json"), "-o",
               os.path.join(t, "bad.nxrt"))
        check("a description the plugin cannot use: its error", p.returncode != 0 and "cachemul.lanes" in p.stderr, p.stderr)
        open(os.path.join(t, "broken.json"), "w").write('{"name": ')
        p = sh("compile", mm, "--plugin", cachemul, "--ep", "cachemul", "--target", os.path.join(t, "broken.json"), "-o",
               os.path.join(t, "bad.nxrt"))
        check("a malformed --target file: a clear error", p.returncode == 2 and "--target" in p.stderr, p.stderr)
        p = sh("compile", m, "--ep", "sample", "--target", target, "-o", os.path.join(t, "x.nxrt"))
        check("--target for an EP without offline compile: refused, naming the feature",
              p.returncode != 0 and "offline-compile" in p.stderr, p.stderr)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
