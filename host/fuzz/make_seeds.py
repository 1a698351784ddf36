#!/usr/bin/python3
"""Seed corpora for the libFuzzer targets (host/fuzz), from the ONNX node tests the build
generates (tools/gen_onnx_node_tests.py, e.g. build-asan/testdata/onnx-tests):

  OUT/fuzz_model_session/<case>.onnx   every EVERY-th node case's model.onnx, and every simple one
  OUT/fuzz_graph_view/<case>.onnx      the same models
  OUT/fuzz_tensor_file/<case>_<file>   their test_data_set_0 .pb files, prefixed by one byte that
                                       tells the target the kind the model declares for that
                                       input or output (0 tensor, 1 sequence, 2 optional)

Usage: make_seeds.py TESTS_DIR OUT_DIR [--every N]   (default 8: a corpus libFuzzer reads in seconds
under ASan, so a 30 s CI run still mutates; --every 1 for a long run)
"""
import argparse
import glob
import os
import shutil
import sys

import onnx

KIND = {"tensor_type": 0, "sequence_type": 1, "optional_type": 2}


def kinds(model_path):
    """The kind byte of each graph input (initializers left out) and output, as in the .pb names."""
    m = onnx.load(model_path, load_external_data=False)
    init = {i.name for i in m.graph.initializer}
    kind = lambda v: KIND.get(v.type.WhichOneof("value") or "tensor_type", 0)
    return ([kind(v) for v in m.graph.input if v.name not in init], [kind(v) for v in m.graph.output])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tests")
    ap.add_argument("out")
    ap.add_argument("--every", type=int, default=8)
    args = ap.parse_args()
    node = sorted(glob.glob(os.path.join(args.tests, "node", "*")))
    cases = node[:: args.every] + sorted(glob.glob(os.path.join(args.tests, "simple", "*")))
    if not cases:
        print(f"make_seeds: no cases under {args.tests}/node or /simple", file=sys.stderr)
        return 1
    dirs = {t: os.path.join(args.out, t) for t in ("fuzz_model_session", "fuzz_graph_view", "fuzz_tensor_file")}
    for d in dirs.values():
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    tensors = 0
    for case in cases:
        name = os.path.basename(case)
        model = os.path.join(case, "model.onnx")
        for t in ("fuzz_model_session", "fuzz_graph_view"):
            shutil.copyfile(model, os.path.join(dirs[t], name + ".onnx"))
        ins, outs = kinds(model)
        for pb in sorted(glob.glob(os.path.join(case, "test_data_set_0", "*.pb"))):
            base = os.path.basename(pb)
            which, index = base.split("_")[0], int(base.split("_")[1].split(".")[0])
            declared = ins if which == "input" else outs
            kind = declared[index] if index < len(declared) else 0
            with open(pb, "rb") as f, open(os.path.join(dirs["fuzz_tensor_file"], f"{name}_{base}"), "wb") as o:
                o.write(bytes([kind]) + f.read())
            tensors += 1
    print(f"make_seeds: {len(cases)} models, {tensors} value files into {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
