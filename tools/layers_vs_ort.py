#!/usr/bin/python3
"""Per layer: nxrt's kernels (`nxrt bench --profile`) against ONNX Runtime's (its session profiler),
the fastest time of each over several processes, to find where a model's ratio comes from.

Usage: layers_vs_ort.py MODEL.onnx --nxrt BIN [--threads 1 | 1,2] [--rounds 3] [--iters 30]
                        [--ort DIR] [--top N] [--strict]
Each nxrt kernel (a fused group or one node, as `nxrt inspect` shows) is set against the ORT
kernels of the convs and matrix products it holds, paired by op family (conv / matmul), weight
sizes and output sizes (sorted, 1s dropped: ORT may run NHWC or 2-D), in execution order among
equal keys: ORT renames and fuses nodes (FusedConv, NCHWc forms, QLinearConv from QDQ, MatMul +
Add as Gemm), so names cannot pair them; what is left pairs by family in execution order (ORT
pads NCHWc channels to 8), and the output says which. ORT's other nodes
(pools, Mul, Softmax, layout reorders) are summed on one line. Rows in model order, then the
--top N kernels by time nxrt loses. Needs the anchor toolkit (--ort, default ../shared/ort, and
its onnxruntime-node install); without it, exit 77 (ctest SKIP). --strict: exit 1 when a conv or
matmul of the model found no ORT kernel to pair with.
"""
import argparse
import collections
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import onnx
from onnx import shape_inference

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from model_tests import SHARED_ORT  # noqa: E402

SKIP = 77


def family(op):
    if "Conv" in op:
        return "conv"
    if "MatMul" in op or "Gemm" in op:
        return "matmul"
    return None


def norm(dims):
    """Dims as a layout-free key: ORT runs QLinearConv in NHWC and folds MatMul + Add into a
    2-D Gemm, so sizes are compared as a sorted multiset without 1s."""
    return tuple(sorted(int(d) for d in dims if d != 1))


def model_keys(path):
    """Per counted node of the model: name -> (family, weight dims, output dims)."""
    m = shape_inference.infer_shapes(onnx.load(path))
    g = m.graph
    dims = {vi.name: tuple(d.dim_value for d in vi.type.tensor_type.shape.dim)
            for vi in list(g.input) + list(g.value_info) + list(g.output)}
    dims.update({t.name: tuple(t.dims) for t in g.initializer})
    keys, order = {}, []
    for n in g.node:
        f = family(n.op_type)
        if f and len(n.input) > 1:
            w = n.input[3] if n.op_type.startswith("QLinear") else n.input[1]
            keys[n.name] = (f, norm(dims.get(w, ())), norm(dims.get(n.output[0], ())))
        order.append(n.name)
    return keys, order


def ort_profile(model, threads, iters, ort_dir, work):
    """{event name: (op, family, weight dims, output dims, node index, min us)} from one process."""
    prefix = os.path.join(work, "prof")
    for f in glob.glob(prefix + "*"):
        os.remove(f)
    p = subprocess.run(["node", os.path.join(work, "bench.js"), "--model", model, "--threads", str(threads),
                        "--warmup", "5", "--iters", str(iters)], capture_output=True, text=True, timeout=1200)
    files = glob.glob(prefix + "*")
    if p.returncode != 0 or not files:
        raise SystemExit(f"layers_vs_ort: ONNX Runtime failed on {model}: {p.stderr.strip()[:400]}")
    out = {}
    for e in json.load(open(files[0])):
        if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time"):
            continue
        a = e.get("args", {})
        op = a.get("op_name", "")
        shapes = [tuple(next(iter(d.values()))) for d in a.get("input_type_shape", [])]
        outs = [tuple(next(iter(d.values()))) for d in a.get("output_type_shape", [])]
        w = shapes[3] if op.startswith("QLinear") and len(shapes) > 3 else shapes[1] if len(shapes) > 1 else ()
        prev = out.get(e["name"])
        dur = min(e["dur"], prev[5]) if prev else e["dur"]
        out[e["name"]] = (op, family(op), norm(w), norm(outs[0]) if outs else (), int(a.get("node_index", 0)), dur)
    return out


def nxrt_profile(nxrt, model, threads, iters, work):
    trace = os.path.join(work, "nxrt.json")
    p = subprocess.run([nxrt, "bench", model, "--ep", "cpu", "--threads", str(threads), "--warmup", "5",
                        "--iters", str(iters), "--profile", trace], capture_output=True, text=True, timeout=1200)
    if p.returncode != 0:
        raise SystemExit(f"layers_vs_ort: nxrt bench failed on {model}: {p.stderr.strip()[:400]}")
    best = {}
    for e in json.load(open(trace))["traceEvents"]:
        if e.get("ph") == "X" and e["name"] != "run":
            best[e["name"]] = min(best.get(e["name"], float("inf")), e["dur"])
    return best


def pair(ort, keys, order):
    """ORT's kernel time per counted node of the model, the ORT time left unpaired, and the nodes
    paired by execution order alone."""
    matched = {}
    # A fused ORT kernel that keeps its node's name ("matmul_9/MatMulAddFusion") pairs by it.
    pool = collections.defaultdict(list)
    for name, (op, fam, w, out, idx, dur) in sorted(ort.items(), key=lambda kv: kv[1][4]):
        if not fam:
            continue
        base = name[:-len("_kernel_time")].split("/")[0]
        if base in keys and base not in matched and keys[base][0] == fam:
            matched[base] = dur
        else:  # the rest by key, in execution order; the model's nodes claim them in model order
            pool[(fam, w, out) if len(w) >= 2 else (fam, None, out)].append(dur)
    loose = collections.defaultdict(list)  # fallback: family and output only (prepacked weights)
    for n in order:
        if n in keys and n not in matched and pool.get(keys[n]):
            matched[n] = pool[keys[n]].pop(0)
    for key, durs in pool.items():
        loose[(key[0], key[2])] += durs
    for n in order:
        if n in keys and n not in matched and loose.get((keys[n][0], keys[n][2])):
            matched[n] = loose[(keys[n][0], keys[n][2])].pop(0)
    # Last, leftovers of one family in execution order (ORT pads NCHWc channels to 8: 21 -> 24).
    by_order = []
    left = collections.defaultdict(list)
    for key, durs in loose.items():
        left[key[0]] += durs
    for n in order:
        if n in keys and n not in matched and left.get(keys[n][0]):
            matched[n] = left[keys[n][0]].pop(0)
            by_order.append(n)
    ort_other = sum(v[5] for v in ort.values() if not v[1]) + sum(sum(d) for d in left.values())
    return matched, ort_other, by_order


def kernel_rows(nx, matched, keys, order, group_of):
    """[(model position, nxrt kernel, nxrt us, ORT us of the nodes it holds or None)], and the
    counted nodes no ORT kernel paired with."""
    rows, unpaired = [], []
    for k, us in nx.items():
        m = re.match(r"group of \d+ nodes starting at '([^']+)'", k) or re.match(r"node '([^']+)'", k)
        if not m or m.group(1) not in order:
            continue
        first = m.group(1)
        members = [first] + [n for n, g in group_of.items() if g == first]
        counted = [n for n in members if n in matched]
        unpaired += [n for n in members if n in keys and n not in matched]
        rows.append((order.index(first), k, us, sum(matched[n] for n in counted) if counted else None))
    rows.sort()
    return rows, unpaired


def counted(rows):
    """nxrt's and ORT's time over the kernels that hold a paired conv or matmul."""
    return sum(r[2] for r in rows if r[3] is not None), sum(r[3] for r in rows if r[3] is not None)


def ratio(a, b):
    return a / b if a is not None and b else float("nan")


def num(v):
    return v if v is not None else float("nan")


def print_scaling(model, threads, rounds, iters, per):
    """One table for several thread counts: each kernel's fastest time per count for both
    engines, and how each engine's time scales from the first count to the last."""
    t0, t1 = threads[0], threads[-1]
    print(f"{model}, fastest of {rounds} processes x {iters} runs per kernel (us) at "
          f"{', '.join(str(t) for t in threads)} threads; scaling: {t0} -> {t1} threads")
    head = "".join(f" {'nxrt ' + str(t):>8} {'ORT ' + str(t):>8} {'ratio':>6}" for t in threads)
    print(f"{head} {'nxrt x':>7} {'ORT x':>6} {'lost':>6}  kernel")
    by_kernel = [{k: (us, o) for _, k, us, o in per[t][0]} for t in threads]
    lost_sum = 0.0
    for _, k, _, _ in per[t0][0]:
        cells = [by_kernel[i].get(k, (None, None)) for i in range(len(threads))]
        line = "".join(f" {num(us):8.0f} {num(o):8.0f} {ratio(us, o):6.2f}" for us, o in cells)
        (a, oa), (b, ob) = cells[0], cells[-1]
        # lost: the last count's time above what the first count's would give at ORT's scaling.
        lost = b - a / (oa / ob) if a and b and oa and ob else None
        lost_sum += lost or 0.0
        print(f"{line} {ratio(a, b):7.2f} {ratio(oa, ob):6.2f} {num(lost):6.0f}  {k[:70]}")
    tot = [counted(per[t][0]) for t in threads]
    print("kernels holding convs / matmuls: " + "; ".join(
        f"{t} threads nxrt {n:.0f}, ORT {o:.0f} (ratio {ratio(n, o):.2f})" for t, (n, o) in zip(threads, tot)))
    print(f"scaling {t0} -> {t1} threads of those kernels: nxrt {ratio(tot[0][0], tot[-1][0]):.2f}x, "
          f"ORT {ratio(tot[0][1], tot[-1][1]):.2f}x; nxrt's time above ORT's scaling: {lost_sum:.0f} us")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--nxrt", required=True)
    ap.add_argument("--threads", default="1", help="a thread count, or several comma-separated (1,2)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--ort", default=SHARED_ORT)
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--strict", action="store_true", help="exit 1 when a conv / matmul finds no ORT kernel")
    a = ap.parse_args()
    try:
        threads = [int(t) for t in a.threads.split(",")]
        if not threads or min(threads) < 1:
            raise ValueError
    except ValueError:
        ap.error(f"--threads: expected counts >= 1, comma-separated, got '{a.threads}'")
    modules = os.environ.get("NXRT_ORT_DIR", os.path.expanduser("~/.cache/nxrt-anchor/ort"))
    if not (os.path.exists(os.path.join(a.ort, "bench.js")) and shutil.which("node")
            and os.path.isdir(os.path.join(modules, "node_modules", "onnxruntime-node"))):
        print(f"layers_vs_ort: the ONNX Runtime anchor ({a.ort}) is absent: nothing to compare with")
        return SKIP
    work = tempfile.mkdtemp(prefix="layers_vs_ort_")
    ort = {t: {} for t in threads}
    nx = {t: {} for t in threads}
    try:
        # bench.js with ORT's session profiler on, writing into `work`.
        src = open(os.path.join(a.ort, "bench.js")).read()
        marker = "logSeverityLevel: 3,"
        if marker not in src:
            raise SystemExit(f"layers_vs_ort: {a.ort}/bench.js has no '{marker}' to add profiling to")
        with open(os.path.join(work, "bench.js"), "w") as f:
            f.write(src.replace(marker, marker + f" enableProfiling: true, profileFilePrefix: {json.dumps(os.path.join(work, 'prof'))},", 1))
        shutil.copy(os.path.join(a.ort, "common.js"), work)
        for _ in range(a.rounds):  # alternate the engines and thread counts; keep each kernel's fastest run
            for t in threads:
                for k, v in ort_profile(os.path.abspath(a.model), t, a.iters, a.ort, work).items():
                    ort[t][k] = v if k not in ort[t] else ort[t][k][:5] + (min(ort[t][k][5], v[5]),)
                for k, v in nxrt_profile(a.nxrt, a.model, t, a.iters, work).items():
                    nx[t][k] = min(nx[t].get(k, float("inf")), v)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    keys, order = model_keys(a.model)
    inspect = subprocess.run([a.nxrt, "inspect", a.model], capture_output=True, text=True).stdout.splitlines()
    group_of = {}
    for line in inspect:
        m = re.match(r"(\S+)\s+\S+\s+cpu\s+in the group of '([^']+)'", line)
        if m:
            group_of[m.group(1)] = m.group(2)
    per = {}
    for t in threads:
        matched, ort_other, by_order = pair(ort[t], keys, order)
        rows, unpaired = kernel_rows(nx[t], matched, keys, order, group_of)
        per[t] = (rows, unpaired, ort_other, by_order)
    name = os.path.basename(a.model)
    if len(threads) > 1:
        print_scaling(name, threads, a.rounds, a.iters, per)
    else:
        rows, _, ort_other, _ = per[threads[0]]
        print(f"{name}, {threads[0]} thread(s), fastest of {a.rounds} processes x {a.iters} runs per kernel (us)")
        print(f"{'nxrt':>8} {'ORT':>8} {'ratio':>6}  kernel")
        for _, k, us, o in rows:
            print(f"{us:8.0f} {num(o):8.0f} {ratio(us, o):6.2f}  {k[:90]}")
        nx_total = sum(r[2] for r in rows)
        nx_counted, ort_counted = counted(rows)
        print(f"kernels holding convs / matmuls: nxrt {nx_counted:.0f}, ORT {ort_counted:.0f} "
              f"(ratio {ratio(nx_counted, ort_counted):.2f}); "
              f"other kernels: nxrt {nx_total - nx_counted:.0f}, ORT {ort_other:.0f}")
        if a.top:
            print(f"most time lost against ORT (top {a.top}):")
            for _, k, us, o in sorted((r for r in rows if r[3] is not None), key=lambda r: r[3] - r[2])[:a.top]:
                print(f"  +{us - o:6.0f} us  {us:7.0f} vs {o:7.0f}  {k[:80]}")
    by_order = sorted({n for t in threads for n in per[t][3]}, key=order.index)
    unpaired = sorted({n for t in threads for n in per[t][1]}, key=order.index)
    if by_order:
        print(f"paired by order only (no ORT kernel of their sizes): {', '.join(by_order)}")
    if unpaired:
        print(f"no ORT kernel paired with: {', '.join(unpaired)}")
    return 1 if unpaired and a.strict else 0


if __name__ == "__main__":
    sys.exit(main())
