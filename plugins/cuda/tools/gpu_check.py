#!/usr/bin/python3
"""The CUDA plugin's checks on a GPU; run by gpu_check.sh (which builds first).

Usage: gpu_check.py --build BUILD_DIR --out OUT_DIR [--budget SECONDS]

Steps, in order, each bounded by what is left of the budget (gpu_check.sh gives what its build left of 470 s, so the whole
script with its build stays under 8 minutes on one H200); a step that does not fit is
reported "not run: out of time":
  1. devices     `nxrt plugins --verbose`: the cuda section must list a device.
  2. host        test_cuda_host (the kernel math and bookkeeping, on the CPU).
  2b. cache      ABI 2.4 import side: the device's own description (`nxrt plugins --json`) is
                 compiled offline with the driver hidden (`nxrt compile --target`, NVRTC, no
                 GPU) for the chain model of tests/offline_compile.py and transformer;
                 each artifact then runs on the GPU: verdict "optimal" (inspect), outputs
                 bit-identical to a cold `--ep cuda` run of the .onnx, load time warm vs cold
                 (`bench --json` load_ms, the lower of 2 processes). A description one architecture lower
                 (sm_80) must give "usable but slower" (PTX JIT) and the same outputs within
                 1e-6; a higher one (sm_120) "must recompile" and still run correctly. The
                 chain model's cold CUDA output (its generated NVRTC kernel) against the CPU
                 plugin: max |err| < 1e-5.
  3. models      the five bench models, float32, `--ep cuda` vs `--ep cpu` (tools/model_tests.py,
                 rtol 1e-3, atol 1e-3; dwconv 2e-3).
  4. fp16        mlp, cnn32 and transformer converted to float16, `--ep cuda` vs the CPU's
                 float32 result on the same (float16-rounded) inputs: max |err| / max |ref|.
  5. session     cuda_gpu_session_check: graphs off/on (capture, replay, replay on new data) and
                 I/O binding (no host<->device copies) vs the CPU plugin, on tiny_ops, cnn32,
                 transformer.
  6. conformance nxrt-conformance --plugin cuda: abi+interop+stress+cache, ops, models (reports in OUT).
  7. graphs      `nxrt bench --io-binding` median ms with cuda.cuda_graph=0 and 1.
  8. gemm        4096^3 MatMul through `nxrt bench --io-binding` (float32, float32 with
                 cuda.allow_tf32=1, float16) vs cuBLAS called directly (nxrt_cuda_gemm_bench).
Writes OUT/report.md (summary table and figures) and OUT/*.log / conformance reports.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", "..", ".."))


class Check:
    def __init__(self, args):
        self.args = args
        self.start = time.time()
        self.rows = []  # (step, verdict, detail)
        self.figures = []
        self.env = dict(os.environ)
        self.env["NXRT_PLUGIN_PATH"] = os.path.join(args.build, "lib")
        # Binaries carried from another checkout keep that checkout's RUNPATH: find libnxrt here.
        self.env["LD_LIBRARY_PATH"] = os.path.join(os.path.abspath(args.build), "lib") + (
            ":" + self.env["LD_LIBRARY_PATH"] if self.env.get("LD_LIBRARY_PATH") else "")
        self.env["NXRT_FAKE_LIBCUDA"] = os.path.join(os.path.abspath(args.build), "tests", "libnxrt_fake_libcuda.so")
        self.nxrt = os.path.join(args.build, "bin", "nxrt")
        self.ep = args.ep

    def opts(self, options):
        """EP options for the EP under test (the cuda.* ones only apply to cuda)."""
        return options if self.ep == "cuda" else []

    def left(self):
        return self.args.budget - (time.time() - self.start)

    def run(self, name, cmd, timeout, log=None):
        """Runs cmd with min(timeout, budget left); (returncode or None on timeout, output)."""
        t = min(timeout, self.left() - 5)
        if t < 10:
            return None, "not run: out of time"
        t0 = time.time()
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, env=self.env, timeout=t)
            out, rc = r.stdout + r.stderr, r.returncode
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            out += f"\n(timed out after {t:.0f} s)"
            rc = None
        if log:
            with open(os.path.join(self.args.out, log), "w") as f:
                f.write(f"$ {' '.join(cmd)}\n({time.time() - t0:.1f} s, exit {rc})\n{out}")
        return rc, out

    def row(self, step, ok, detail):
        if ok is False and str(detail).startswith("not run"):
            ok = "not run"
        verdict = "pass" if ok is True else ("FAIL" if ok is False else str(ok))
        self.rows.append((step, verdict, detail))
        print(f"[{time.time() - self.start:5.0f}s] {step}: {verdict}: {detail}", flush=True)


def bench_models_dir(build):
    return os.path.join(build, "testdata", "bench-models")


def write_pb(arr, name, path):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(arr, name).SerializeToString())


def read_pb(path):
    t = TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def to_fp16(model):
    """A copy of a float32 model with every float32 tensor, input, output and Cast made float16."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    for i, init in enumerate(g.initializer):
        if init.data_type == TensorProto.FLOAT:
            g.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float16), init.name))
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = TensorProto.FLOAT16
    for n in g.node:
        for a in n.attribute:
            if n.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = TensorProto.FLOAT16
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TensorProto.FLOAT:
                a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float16), a.t.name))
    return m


def step_devices(c):
    rc, out = c.run("devices", [c.nxrt, "plugins", "--verbose"], 60, "plugins.log")
    m = re.search(r"^" + c.ep + r"\n((?:  .*\n?)*)", out or "", re.M)
    sect = m.group(1) if m else ""
    n = re.search(r"devices: (\d+)", sect)
    name = re.search(r"name: (.*)", sect)
    cc = re.search(r"cuda.compute_capability[:=] *(\S+)", sect)
    ok = rc == 0 and n is not None and int(n.group(1)) > 0
    why = re.search(r"no device: (.*)", sect)
    c.row("devices", ok, f"{n.group(1) if n else '?'} device(s), {name.group(1) if name else '?'}, cc {cc.group(1) if cc else '?'}"
          if ok else f"no device: {why.group(1) if why else sect.strip()[-300:]}")
    return ok


def step_host(c):
    rc, out = c.run("host", [os.path.join(c.args.build, "tests", "test_cuda_host")], 60, "host.log")
    m = re.search(r"test cases: *(\d+) \| *(\d+) passed \| *(\d+) failed", out or "")
    c.row("host math", rc == 0, m.group(0) if m else out[-200:])


def cache_verdicts(text):
    """The verdict words the host prints for the cuda EP of a compiled model."""
    return set(re.findall(r"(optimal|usable but slower|must recompile|unsupported)", text or ""))


def step_cache(c):
    if c.ep != "cuda":
        c.row("cache", "not run", "cuda only")
        return
    sys.path.insert(0, os.path.join(SRC, "plugins", "cuda", "tests"))
    import offline_compile  # the chain model and the device description format
    rc, out = c.run("cache", [c.nxrt, "plugins", "--json"], 60)
    try:
        line = [l for l in (out or "").splitlines() if l.startswith("{")][0]
        dev = [p for p in json.loads(line)["plugins"] if p["name"] == "cuda"][0]["devices"][0]
    except (ValueError, IndexError, KeyError, TypeError):
        c.row("cache", False, f"no cuda device in plugins --json: {(out or '')[-200:]}")
        return
    tmp = os.path.join(c.args.out, "cache")
    os.makedirs(tmp, exist_ok=True)
    hidden = dict(c.env, NXRT_CUDA_DRIVER="/nonexistent/libcuda.so.1")
    models = bench_models_dir(c.args.build)
    chain = os.path.join(tmp, "chain.onnx")
    offline_compile.chain_model(chain)
    targets = {"own": dev, "sm80": dict(dev, **{"cuda.compute_capability": "8.0", "name": "described A100"}),
               "sm120": dict(dev, **{"cuda.compute_capability": "12.0", "name": "described sm_120"})}
    for tag, d in targets.items():
        json.dump(d, open(os.path.join(tmp, f"{tag}.json"), "w"))

    def outputs(d):
        return {f: open(os.path.join(d, f), "rb").read() for f in sorted(os.listdir(d))} if os.path.isdir(d) else {}

    def load_ms(model):  # the lower of two processes (the first may pay for cold disk caches)
        vals = []
        for _ in range(2):
            rc, out = c.run("cache", [c.nxrt, "bench", model, "--ep", "cuda", "--iters", "1", "--warmup", "0", "--json"], 90)
            js = [l for l in (out or "").splitlines() if l.startswith("{")]
            if rc != 0 or not js:
                return None
            vals.append(json.loads(js[-1])["load_ms"])
        return min(vals)

    for name, model in (("chain", chain), ("transformer", os.path.join(models, "transformer.onnx"))):
        if not os.path.exists(model):
            c.row(f"cache {name}", False, f"no {model}")
            continue
        if c.left() < 60:
            c.row(f"cache {name}", "not run", "out of time")
            continue
        art = os.path.join(tmp, f"{name}.nxrt")
        t0 = time.time()
        try:
            r = subprocess.run([c.nxrt, "compile", model, "--ep", "cuda", "--target", os.path.join(tmp, "own.json"), "-o", art],
                               capture_output=True, text=True, env=hidden, timeout=max(10, min(120, c.left() - 5)))
            rc, out = r.returncode, r.stdout + r.stderr
        except subprocess.TimeoutExpired:
            rc, out = None, "timed out"
        compile_s = time.time() - t0
        if rc != 0:
            c.row(f"cache {name}", False, f"offline compile (driver hidden) failed: {out[-300:]}")
            continue
        cold, warm = os.path.join(tmp, f"{name}_cold"), os.path.join(tmp, f"{name}_warm")
        rc1, o1 = c.run("cache", [c.nxrt, "run", model, "--ep", "cuda", "--output-dir", cold], 120, f"cache_{name}_cold.log")
        rc2, o2 = c.run("cache", [c.nxrt, "run", art, "--ep", "cuda", "--output-dir", warm, "--verbose"], 120, f"cache_{name}_warm.log")
        rc3, o3 = c.run("cache", [c.nxrt, "inspect", art, "--ep", "cuda"], 120, f"cache_{name}_inspect.log")
        v = cache_verdicts(o3)
        same = rc1 == 0 and rc2 == 0 and outputs(cold) and outputs(cold) == outputs(warm)
        if name == "chain" and outputs(cold):  # the generated kernel's numbers, against the CPU plugin
            ref = os.path.join(tmp, "chain_cpu")
            rc4, o4 = c.run("cache", [c.nxrt, "run", model, "--ep", "cpu", "--output-dir", ref], 60, "cache_chain_cpu.log")
            err = max(float(np.max(np.abs(read_pb(os.path.join(cold, f)).astype(np.float64) -
                                         read_pb(os.path.join(ref, f)).astype(np.float64)))) for f in outputs(cold)) \
                if rc4 == 0 and outputs(ref).keys() == outputs(cold).keys() else None
            c.row("generated chain kernel vs cpu", err is not None and err < 1e-5, f"max |cuda - cpu| = {err} (< 1e-5)")
        cold_ms, warm_ms = load_ms(model), load_ms(art)
        ok = rc3 == 0 and v == {"optimal"} and bool(same)
        c.figures.append(f"| cache {name} | {cold_ms} | {warm_ms} | {compile_s:.1f} |")
        c.row(f"cache {name} (offline sm_own -> GPU)", ok,
              f"verdicts {sorted(v)}, outputs bit-identical: {bool(same)}, load ms cold {cold_ms} / warm {warm_ms}, "
              f"offline compile {compile_s:.1f} s")
    for tag, want in (("sm80", "usable but slower"), ("sm120", "must recompile")):
        art = os.path.join(tmp, f"chain_{tag}.nxrt")
        if c.left() < 30:
            c.row(f"cache chain {tag}", "not run", "out of time")
            continue
        try:
            r = subprocess.run([c.nxrt, "compile", chain, "--ep", "cuda", "--target", os.path.join(tmp, f"{tag}.json"), "-o", art],
                               capture_output=True, text=True, env=hidden, timeout=max(10, min(120, c.left() - 5)))
            rc, out = r.returncode, r.stdout + r.stderr
        except subprocess.TimeoutExpired:
            rc, out = None, "timed out"
        if rc != 0:
            c.row(f"cache chain {tag}", False, f"offline compile failed: {out[-300:]}")
            continue
        out_dir = os.path.join(tmp, f"chain_{tag}_out")
        rc1, o1 = c.run("cache", [c.nxrt, "run", art, "--ep", "cuda", "--output-dir", out_dir, "--verbose"], 120, f"cache_{tag}.log")
        cold = outputs(os.path.join(tmp, "chain_cold"))
        got = outputs(out_dir)
        close = bool(cold) and cold.keys() == got.keys() and all(
            np.allclose(read_pb(os.path.join(out_dir, f)), read_pb(os.path.join(tmp, "chain_cold", f)), rtol=1e-6, atol=1e-6)
            for f in cold)
        v = cache_verdicts(o1)
        c.row(f"cache chain {tag}", rc1 == 0 and want in v and close, f"verdicts {sorted(v)} (want '{want}'), outputs match: {close}")


def step_models(c):
    rc, out = c.run("models", [sys.executable, os.path.join(SRC, "tools", "model_tests.py"), "--nxrt", c.nxrt, "--ep", c.ep,
                               "--cache", os.path.join(c.args.build, "testdata"), "--reference", "ep:cpu", "--atol", "1e-3"],
                    200, "models_fp32.log")
    last = (out or "").strip().splitlines()[-1:] or ["?"]
    c.row("bench models fp32 vs cpu", rc == 0, last[0])


def step_fp16(c):
    models = bench_models_dir(c.args.build)
    rng = np.random.default_rng(5)
    for name in ("mlp", "cnn32", "transformer"):
        path = os.path.join(models, name + ".onnx")
        if not os.path.exists(path):
            c.row(f"fp16 {name}", False, f"no {path}")
            continue
        m = onnx.load(path)
        with tempfile.TemporaryDirectory() as tmp:
            m16 = to_fp16(m)
            p16 = os.path.join(tmp, name + "_fp16.onnx")
            onnx.save(m16, p16)
            d32, d16, o32, o16 = (os.path.join(tmp, d) for d in ("in32", "in16", "out32", "out16"))
            for d in (d32, d16):
                os.makedirs(d)
            inits = {i.name for i in m.graph.initializer}
            k = 0
            for i in m.graph.input:
                if i.name in inits:
                    continue
                shape = [d.dim_value if d.dim_value > 0 else 1 for d in i.type.tensor_type.shape.dim]
                x = rng.standard_normal(shape).astype(np.float16)
                write_pb(x.astype(np.float32), i.name, os.path.join(d32, f"input_{k}.pb"))
                write_pb(x, i.name, os.path.join(d16, f"input_{k}.pb"))
                k += 1
            rc1, out1 = c.run("fp16", [c.nxrt, "run", path, "--ep", "cpu", "--input-dir", d32, "--output-dir", o32], 120,
                              f"fp16_{name}_cpu.log")
            rc2, out2 = c.run("fp16", [c.nxrt, "run", p16, "--ep", c.ep, "--input-dir", d16, "--output-dir", o16], 120,
                              f"fp16_{name}_cuda.log")
            if rc1 != 0 or rc2 != 0:
                c.row(f"fp16 {name}", False, f"cpu exit {rc1}, cuda exit {rc2}: {(out2 or '')[-300:]}")
                continue
            placement = [l for l in out2.splitlines() if l.startswith("placement")]
            ref = read_pb(os.path.join(o32, "output_0.pb")).astype(np.float64)
            got = read_pb(os.path.join(o16, "output_0.pb")).astype(np.float64)
            err = float(np.max(np.abs(got - ref)) / max(1e-6, float(np.max(np.abs(ref)))))
            c.row(f"fp16 {name}", err < 3e-2 and got.dtype is not None, f"max|err|/max|ref| = {err:.2e} (< 3e-2); {placement}")


def step_session(c):
    models = bench_models_dir(c.args.build)
    exe = os.path.join(c.args.build, "tests", "cuda_gpu_session_check")
    rc, out = c.run("session", [exe, os.path.join(c.args.build, "lib", f"libnxrt_ep_{c.ep}.so"),
                                os.path.join(c.args.build, "lib", "libnxrt_ep_cpu.so")] +
                    [os.path.join(models, f"{m}.onnx") for m in ("tiny_ops", "cnn32", "transformer")], 150, "session.log")
    lines = [l for l in (out or "").splitlines() if "FAIL" in l or "copies" in l]
    c.row("graphs on/off + I/O binding vs cpu", rc == 0, "; ".join(lines[:6]) or (out or "").strip().splitlines()[-1:])


def step_conformance(c):
    conf = os.path.join(c.args.build, "bin", "nxrt-conformance")
    for suites, t in (("abi,interop,stress,cache", 150), ("ops", 200), ("models", 200)):
        tag = suites.split(",")[0]
        rc, out = c.run("conformance", [conf, "--plugin", c.ep, "--suite", suites, "--jobs", "8", "--stress-seconds", "5",
                                        "--report-md", os.path.join(c.args.out, f"conformance_{tag}.md"),
                                        "--report-json", os.path.join(c.args.out, f"conformance_{tag}.json")], t,
                        f"conformance_{tag}.log")
        m = re.search(r"(\d+) passed, (\d+) failed, (\d+) skipped", out or "")
        c.row(f"conformance {suites}", rc == 0 if rc is not None else "not run", m.group(0) if m else (out or "")[-200:])


def bench(c, model, options, iters=30):
    cmd = [c.nxrt, "bench", model, "--ep", c.ep, "--io-binding", "--iters", str(iters), "--warmup", "3", "--json"]
    for o in c.opts(options):
        cmd += ["--ep-option", o]
    rc, out = c.run("bench", cmd, 90)
    if rc != 0:
        return None, (out or "")[-200:]
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            return json.loads(line), ""
    return None, "no JSON"


def step_graphs(c):
    models = bench_models_dir(c.args.build)
    for name in ("tiny_ops", "transformer", "cnn", "mlp"):
        path = os.path.join(models, name + ".onnx")
        off, e1 = bench(c, path, ["cuda.cuda_graph=0"])
        on, e2 = bench(c, path, ["cuda.cuda_graph=1"])
        if not off or not on:
            c.row(f"bench {name}", False, e1 or e2)
            continue
        c.figures.append(f"| {name} | {off['median_ms']:.3f} | {on['median_ms']:.3f} |")
        c.row(f"bench {name}", True, f"median {off['median_ms']:.3f} ms graphs off, {on['median_ms']:.3f} ms on")


def matmul_model(path, n, dtype):
    t = TensorProto.FLOAT16 if dtype == np.float16 else TensorProto.FLOAT
    a = helper.make_tensor_value_info("a", t, [n, n])
    y = helper.make_tensor_value_info("y", t, [n, n])
    b = numpy_helper.from_array((np.random.default_rng(1).standard_normal((n, n)) / np.sqrt(n)).astype(dtype), "b")
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "mm", [a], [y], [b])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def step_gemm(c):
    n = 4096
    flops = 2.0 * n ** 3
    rc, out = c.run("gemm", [os.path.join(c.args.build, "bin", "nxrt_cuda_gemm_bench"), str(n), "50"], 60, "cublas.log")
    cublas = {}
    for line in (out or "").splitlines():
        if line.startswith("{"):
            j = json.loads(line)
            cublas[j["case"]] = j["tflops"]
    with tempfile.TemporaryDirectory() as tmp:
        for case, dtype, opts in (("fp32", np.float32, ["cuda.allow_tf32=0"]), ("tf32", np.float32, ["cuda.allow_tf32=1"]),
                                  ("fp16", np.float16, [])):
            p = os.path.join(tmp, f"mm_{case}.onnx")
            matmul_model(p, n, dtype)
            r, err = bench(c, p, opts, iters=20)
            if not r:
                c.row(f"gemm {case}", False, err)
                continue
            tf = flops / (r["median_ms"] * 1e9)
            ref = cublas.get(case)
            c.figures.append(f"| MatMul {n}^3 {case} | {tf:.1f} TFLOP/s | {ref if ref else '?'} TFLOP/s | "
                             f"{(tf / ref * 100) if ref else float('nan'):.0f}% |")
            c.row(f"gemm {case}", True, f"nxrt {tf:.1f} TFLOP/s, cuBLAS {ref} TFLOP/s")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget", type=float, default=440)
    ap.add_argument("--ep", default="cuda", help="the EP under test (cpu: a dry run of this script's plumbing)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    c = Check(args)
    subprocess.run([sys.executable, os.path.join(SRC, "tools", "gen_bench_models.py"), bench_models_dir(args.build)],
                   capture_output=True, env=c.env)
    if step_devices(c):
        for step in (step_host, step_cache, step_models, step_fp16, step_session, step_conformance, step_graphs, step_gemm):
            try:
                step(c)
            except Exception as e:  # one broken step must not hide the others' results
                c.row(step.__name__[5:], False, f"the step raised {type(e).__name__}: {e}")
    fails = [r for r in c.rows if r[1] == "FAIL"]
    with open(os.path.join(args.out, "report.md"), "a") as f:
        f.write(f"\n## Checks ({time.time() - c.start:.0f} s)\n\n| step | verdict | detail |\n|---|---|---|\n")
        for s, v, d in c.rows:
            f.write(f"| {s} | {v} | {str(d).replace('|', '/')} |\n")
        f.write("\n## Figures\n\n| model | graphs off (ms) | graphs on (ms) |\n|---|---:|---:|\n")
        f.write("\n".join(x for x in c.figures if not x.startswith("| MatMul") and not x.startswith("| cache")) + "\n")
        f.write("\n| compiled-model cache | load ms cold (.onnx) | load ms warm (.nxrt, compiled offline) | offline compile s |\n|---|---:|---:|---:|\n")
        f.write("\n".join(x for x in c.figures if x.startswith("| cache")) + "\n")
        f.write("\n| GEMM | nxrt --ep cuda (io-binding) | cuBLAS direct | ratio |\n|---|---:|---:|---:|\n")
        f.write("\n".join(x for x in c.figures if x.startswith("| MatMul")) + "\n")
        f.write(f"\n{len(fails)} failed of {len(c.rows)} checks.\n")
    print(f"{len(fails)} failed of {len(c.rows)} checks; report: {os.path.join(args.out, 'report.md')}")
    return 1 if fails or not c.rows or c.rows[0][1] != "pass" else 0


if __name__ == "__main__":
    sys.exit(main())
