#!/usr/bin/python3
"""Benchmarks nxrt against ONNX Runtime 1.30 in one run, alternating engines, and prints
median latencies and the ratio nxrt/ORT (below 1: nxrt is faster).

Usage: bench_vs_ort.py --nxrt BIN [--ep cpu] [--threads 1[,2,...]] [--models mlp,cnn,...]
                       [--model-dir DIR] [--shape NAME=DIMS]... [--ep-option EP.KEY=VALUE]...
                       [--warmup 5] [--iters 20] [--rounds 2] [--cache DIR] [--ort DIR]
--models: the generated bench set (default: all five, unless --model-dir is given);
--model-dir DIR: every *.onnx in DIR too. --shape NAME=1x3x640x640 goes to `nxrt bench` for
each model with an input NAME (a NAME no model has is an error); dynamic dims not given are 1.
ORT gets the very inputs nxrt reports it fed (name, shape, dtype, in a sidecar JSON for
bench.js --inputs-from), and both fill input k with the same lcg data (seed 1234 + k).
Below the table: each model's multiply-adds (tools/model_macs.py) and both medians as G/s.
--threads 1,2: one column group per thread count. --ep-option goes to `nxrt bench` only (e.g.
cpu.precision=bf16: nxrt's bf16 fast math against ORT's default float32).
Needs the anchor toolkit (--ort, default ../shared/ort, set up by its setup.sh); without it,
prints nxrt alone and says so. On a 2-vCPU machine noise reaches 20-60%: take the best of rounds.
With 2+ threads and nxrt_cpu_coherence beside BIN (x86-64 with AVX-512), the last line gives
its cost of writing a line the other core read, before and after the runs: where the guest's
two vCPUs sit, which moves 2-thread ratios (docs/performance.md, "Thirty-seventh session").
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from model_tests import MODELS, SHARED_ORT  # noqa: E402


class BenchFailed(Exception):
    pass


def run_json(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    if p.returncode != 0:
        raise BenchFailed(f"{os.path.basename(cmd[0])} {os.path.basename(cmd[1])} failed (exit {p.returncode}): "
                          f"{p.stderr.strip().splitlines()[0] if p.stderr.strip() else '(no message)'}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def ort_ready(ort_dir):
    modules = os.environ.get("NXRT_ORT_DIR", os.path.expanduser("~/.cache/nxrt-anchor/ort"))
    return (os.path.exists(os.path.join(ort_dir, "bench.js")) and shutil.which("node")
            and os.path.isdir(os.path.join(modules, "node_modules", "onnxruntime-node")))


def parse_shape(text):
    name, eq, dims = text.rpartition("=")
    if not eq or not name or not dims or not all(d.isdigit() for d in dims.split("x")):
        raise SystemExit(f"bench_vs_ort: --shape needs NAME=DIMS like images=1x3x640x640, got '{text}'")
    return name, dims


def model_input_names(path):
    import onnx  # only --shape needs it
    m = onnx.load(path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    return {i.name for i in m.graph.input if i.name not in inits}


def print_rates(rows, paths, threads, tag):
    """The medians as multiply-adds per second (tools/model_macs.py), to set against the core's
    peak: a ratio goal can need more than the peak allows when ORT already runs near it."""
    from model_macs import count_macs
    macs = {label: count_macs(paths[label], {i['name']: i['shape'] for i in fed or []}) for label, _, fed in rows}
    if not any(macs.values()):
        return
    head = "| model | G multiply-adds |"
    for t in threads:
        head += f" nxrt G/s{tag(t)} | ORT G/s{tag(t)} |"
    print()
    print(head)
    print("|---" * (2 + 2 * len(threads)) + "|")
    for label, best, _ in rows:
        m = macs.get(label)
        if not m:
            continue
        line = f"| {label} | {m / 1e9:.4g} |"
        for t in threads:
            for engine in ("nxrt", "ort"):
                r = best.get((engine, t))
                line += f" {m / r['median_ms'] / 1e6:.3g} |" if r and r["median_ms"] > 0 else " - |"
        print(line)


def line_handover_ns(nxrt):
    """nxrt_cpu_coherence's ns per line for "A wrote, B read, A writes" at 256 KB, or None where
    the probe is not beside nxrt or cannot run here."""
    probe = os.path.join(os.path.dirname(os.path.abspath(nxrt)), "nxrt_cpu_coherence")
    if not os.access(probe, os.X_OK):
        return None
    try:
        out = subprocess.run([probe, "--kb", "256", "--reps", "10"], capture_output=True, text=True, timeout=120).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in out.splitlines():
        if line.strip().startswith("A wrote, B read, A writes"):
            return float(line.split()[-1])
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nxrt", required=True)
    ap.add_argument("--ep", default="cpu")
    ap.add_argument("--threads", default="1", help="a thread count or a comma-separated list")
    ap.add_argument("--models", default=None, help="from the generated bench set: " + ",".join(MODELS))
    ap.add_argument("--model-dir", help="benchmark every *.onnx in this folder")
    ap.add_argument("--shape", action="append", default=[], help="NAME=DIMS for nxrt bench (repeatable)")
    ap.add_argument("--ep-option", action="append", default=[], help="EP.KEY=VALUE for nxrt bench (repeatable)")
    ap.add_argument("--warmup", default="5")
    ap.add_argument("--iters", default="20")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cache", default=os.path.join(HERE, "..", "build", "bench-models"))
    ap.add_argument("--ort", default=SHARED_ORT, help="the anchor toolkit folder holding bench.js")
    args = ap.parse_args()

    threads = [t for t in args.threads.split(",") if t]
    if not threads or not all(t.isdigit() and int(t) >= 1 for t in threads):
        raise SystemExit(f"bench_vs_ort: --threads needs counts >= 1 like 1 or 1,2, got '{args.threads}'")
    models = []  # (label, path)
    names = [n for n in (args.models if args.models is not None else ("" if args.model_dir else ",".join(MODELS))).split(",") if n]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise SystemExit(f"bench_vs_ort: --models: unknown {', '.join(unknown)} (the bench set: {', '.join(MODELS)})")
    if names:
        subprocess.run([sys.executable, os.path.join(HERE, "gen_bench_models.py"), args.cache, "--only"] + names,
                       check=True, capture_output=True)
        models += [(n, os.path.join(args.cache, n + ".onnx")) for n in names]
    if args.model_dir:
        if not os.path.isdir(args.model_dir):
            raise SystemExit(f"bench_vs_ort: --model-dir '{args.model_dir}' is not a folder")
        found = sorted(glob.glob(os.path.join(args.model_dir, "*.onnx")))
        if not found:
            raise SystemExit(f"bench_vs_ort: no *.onnx in '{args.model_dir}'")
        models += [(os.path.splitext(os.path.basename(p))[0], p) for p in found]
    if not models:
        raise SystemExit("bench_vs_ort: no models (give --models or --model-dir)")

    # Each --shape goes to the models that have that input; one no model has is a mistake.
    shapes = [parse_shape(s) for s in args.shape]
    shape_args = {}
    if shapes:
        used = set()
        for label, path in models:
            inputs = model_input_names(path)
            shape_args[path] = [a for name, dims in shapes if name in inputs for a in ("--shape", f"{name}={dims}")]
            used |= {name for name, _ in shapes if name in inputs}
        missing = [name for name, _ in shapes if name not in used]
        if missing:
            raise SystemExit(f"bench_vs_ort: --shape: no model has an input named {', '.join(missing)}")

    have_ort = ort_ready(args.ort)
    if not have_ort:
        print(f"bench_vs_ort: the ONNX Runtime anchor ({args.ort}) is absent: nxrt numbers only, no ratio")
    probe = args.ep == "cpu" and max(int(t) for t in threads) >= 2
    handover = [line_handover_ns(args.nxrt)] if probe else []
    rows, notes = [], []
    sidecars = tempfile.mkdtemp(prefix="bench_vs_ort_")
    try:
        for label, path in models:
            best = {}  # (engine, threads) -> best JSON
            fed, failed = None, {}
            sidecar = os.path.join(sidecars, f"{len(rows)}_{label}.json")
            for _ in range(args.rounds):
                for t in threads:
                    if "nxrt" not in failed:
                        try:
                            n = run_json([args.nxrt, "bench", path, "--ep", args.ep, "--threads", t, "--warmup", args.warmup,
                                          "--iters", args.iters, "--json"] + shape_args.get(path, []) +
                                         [a for o in args.ep_option for a in ("--ep-option", o)])
                            if ("nxrt", t) not in best or n["median_ms"] < best[("nxrt", t)]["median_ms"]:
                                best[("nxrt", t)] = n
                            if fed is None:  # what ORT is fed: the same inputs, shapes and types
                                fed = [{k: i[k] for k in ("name", "shape", "dtype")} for i in n["inputs"]]
                                with open(sidecar, "w") as f:
                                    json.dump({"name": label, "inputs": fed}, f)
                        except BenchFailed as e:
                            failed["nxrt"] = str(e)
                    if have_ort and fed is not None and "ort" not in failed:
                        try:
                            o = run_json(["node", os.path.join(args.ort, "bench.js"), "--model", path, "--threads", t,
                                          "--warmup", args.warmup, "--iters", args.iters, "--inputs-from", sidecar])
                            if ("ort", t) not in best or o["median_ms"] < best[("ort", t)]["median_ms"]:
                                best[("ort", t)] = o
                        except BenchFailed as e:
                            failed["ort"] = str(e)
            for engine, why in failed.items():
                notes.append(f"{label}: {'nxrt' if engine == 'nxrt' else 'ORT'}: {why}")
            rows.append((label, best, fed))
    finally:
        shutil.rmtree(sidecars, ignore_errors=True)

    # One column group (nxrt, ORT, ratio) per thread count; with one count, the header is the
    # one this table always had.
    tag = (lambda t: "") if len(threads) == 1 else (lambda t: f" ({t} thr)")
    head = "| model |"
    for t in threads:
        head += f" nxrt {args.ep} median ms{tag(t)} | ORT median ms{tag(t)} | ratio nxrt/ORT{tag(t)} |"
    print(head + " nxrt peak RSS MB | ORT peak RSS MB |")
    print("|---" * (2 + 3 * len(threads)) + "|---|")
    for label, best, _ in rows:
        line = f"| {label} |"
        for t in threads:
            n, o = best.get(("nxrt", t)), best.get(("ort", t))
            line += f" {n['median_ms']:.3f} |" if n else " failed |"
            line += f" {o['median_ms']:.3f} |" if o else " - |"
            line += f" {n['median_ms'] / o['median_ms']:.2f} |" if n and o and o["median_ms"] > 0 else " - |"
        rss = [best[k]["peak_rss_mb"] for k in best if k[0] == "nxrt"], [best[k]["peak_rss_mb"] for k in best if k[0] == "ort"]
        line += "".join(f" {max(r):.0f} |" if r else " - |" for r in rss)
        print(line)
    print(f"threads {','.join(threads)}, warmup {args.warmup}, iters {args.iters}, best median of {args.rounds} rounds")
    print_rates(rows, dict(models), threads, tag)
    if shapes or args.model_dir:  # the fed inputs, when they are not the bench set's own
        for label, _, fed in rows:
            if fed is not None:
                print(f"inputs of {label}: " + ", ".join(f"{i['name']} {i['dtype']} {'x'.join(map(str, i['shape']))}" for i in fed))
    for note in notes:
        print(f"note: {note}")
    if probe and handover[0] is not None:
        handover.append(line_handover_ns(args.nxrt))
        after = f"{handover[1]:.2f}" if handover[1] is not None else "-"
        print(f"vCPU placement (nxrt_cpu_coherence, ns to write a line the other core read; ~1.4 near, ~8-9 far "
              f"on the Zen 5 guests): {handover[0]:.2f} before, {after} after")
    return 1 if any(not any(k[0] == "nxrt" for k in best) for _, best, _ in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
