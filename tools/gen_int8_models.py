#!/usr/bin/python3
"""Generate INT8 versions of the cnn and transformer bench models: static quantization in the
QDQ format, as ONNX Runtime's quantize_static writes it.

Usage: /usr/bin/python3 gen_int8_models.py OUTDIR [--only NAME ...] [--force]

Models (each NAME.onnx with a NAME.json sidecar in the gen_bench_models.py format):
    cnn_int8          the cnn bench model (ResNet-18 shape, 1x3x224x224) with BatchNormalization
                      folded into the convs; every Conv input and both inputs of every residual
                      Add quantized (QuantizeLinear -> DequantizeLinear), weights int8 per output
                      channel, biases int32 (scale x_scale * w_scale); MaxPool, the pooling head
                      and the classifier stay float32.
    transformer_int8  the transformer bench model (2 BERT-base layers, 1x128x768) with the
                      activation input of every MatMul that has constant weights quantized and
                      the weights int8 per column; attention MatMuls, Softmax, LayerNormalization,
                      Gelu and the residual Adds stay float32.
Activations are uint8 asymmetric per tensor, ranges calibrated with tools/reference.py (float64)
on the benchmarks' own inputs (lcg, seed 1234) and one more (seed 4321); weights int8 symmetric
per channel. Every tensor gets one QuantizeLinear and each of its readers its own
DequantizeLinear (ORT's dedicated QDQ pairs), so a runtime can fuse DequantizeLinear -> op ->
QuantizeLinear per reader. Output is byte-identical across runs; every model passes
onnx.checker (full_check) and strict shape inference.
"""
import collections
import os
import sys

import numpy as np
from onnx import helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_bench_models as gbm  # noqa: E402
import reference  # noqa: E402
from model_tests import lcg_fast  # noqa: E402

GENERATOR_VERSION = 1
CALIBRATION_SEEDS = (1234, 4321)


def fold_batchnorm(model):
    """Conv -> BatchNormalization (the Conv's only reader) becomes one Conv with a bias."""
    g = model.graph
    inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    readers = collections.Counter(i for n in g.node for i in n.input)
    by_output = {n.output[0]: n for n in g.node}
    drop, new_inits = set(), {}
    for bn in g.node:
        if bn.op_type != "BatchNormalization":
            continue
        conv = by_output.get(bn.input[0])
        if conv is None or conv.op_type != "Conv" or readers[conv.output[0]] != 1 or len(conv.input) > 2:
            continue
        eps = next((a.f for a in bn.attribute if a.name == "epsilon"), 1e-5)
        scale, beta, mean, var = (inits[i].astype(np.float64) for i in bn.input[1:5])
        w = inits[conv.input[1]].astype(np.float64)
        k = scale / np.sqrt(var + eps)
        new_inits[conv.input[1]] = (w * k[:, None, None, None]).astype(np.float32)
        bias = conv.input[1] + "_bias"
        new_inits[bias] = (beta - mean * k).astype(np.float32)
        conv.input.append(bias)
        conv.output[0] = bn.output[0]
        drop.add(bn.name)
        drop.update(bn.input[1:5])
    nodes = [n for n in g.node if n.name not in drop]
    used = {i for n in nodes for i in n.input}
    keep = [t for t in g.initializer if t.name in used and t.name not in new_inits]
    del g.node[:]
    g.node.extend(nodes)
    del g.initializer[:]
    g.initializer.extend(keep)
    g.initializer.extend(numpy_helper.from_array(a, n) for n, a in new_inits.items() if n in used)
    return model


def calibrate(model):
    """min/max of every value over the calibration inputs (float64 reference)."""
    g = model.graph
    consts = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    env0 = {k: (v.astype(np.float64) if v.dtype == np.float32 else v) for k, v in consts.items()}
    lo, hi = {}, {}
    for seed_base in CALIBRATION_SEEDS:
        env = dict(env0)
        for k, i in enumerate(g.input):
            shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
            env[i.name] = lcg_fast(int(np.prod(shape)), seed_base + k).reshape(shape).astype(np.float64)
        for node in g.node:
            ins = [env[i] if i else None for i in node.input]
            env[node.output[0]] = reference._run_node(node.op_type, ins, reference._attrs(node))
        for name, v in env.items():
            if name in consts or not isinstance(v, np.ndarray) or v.dtype.kind != "f":
                continue
            lo[name] = min(lo.get(name, np.inf), float(v.min()))
            hi[name] = max(hi.get(name, -np.inf), float(v.max()))
    return lo, hi


def uint8_params(lo, hi):
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = np.float32((hi - lo) / 255.0) if hi > lo else np.float32(1.0)
    zp = np.uint8(np.clip(np.rint(-lo / scale), 0, 255))
    return scale, zp


def quantize(model, name, quantize_inputs):
    """QDQ rewrite. quantize_inputs(node, consts) -> the input slots of `node` whose
    (non-constant) values are quantized; constant Conv / MatMul weights of a node with a
    quantized input 0 become int8 per channel, a Conv bias int32."""
    g = model.graph
    consts = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    lo, hi = calibrate(model)
    plan = [quantize_inputs(n, consts) for n in g.node]
    quantized = sorted({n.input[s] for n, slots in zip(g.node, plan) for s in slots})
    params = {t: uint8_params(lo[t], hi[t]) for t in quantized}
    inits = dict(consts)
    out_nodes = []
    uid = collections.Counter()

    def fresh(prefix):
        uid[prefix] += 1
        return f"{prefix}_{uid[prefix]}"

    def q_node(t):  # t -> t_q, right after t is made
        s, z = params[t]
        inits[t + "_scale"] = np.array(s, np.float32)
        inits[t + "_zp"] = np.array(z, np.uint8)
        out_nodes.append(helper.make_node("QuantizeLinear", [t, t + "_scale", t + "_zp"], [t + "_q"],
                                          name=fresh("quant")))

    def dq_node(src, scale, zp, axis=None):
        out = fresh(src + "_dq")
        attrs = {"axis": axis} if axis is not None else {}
        out_nodes.append(helper.make_node("DequantizeLinear", [src, scale] + ([zp] if zp else []), [out],
                                          name=fresh("dequant"), **attrs))
        return out

    for i in g.input:
        if i.name in params:
            q_node(i.name)
    for n, slots in zip(list(g.node), plan):
        if slots:
            inputs = list(n.input)
            for s in slots:
                t = n.input[s]
                inputs[s] = dq_node(t + "_q", t + "_scale", t + "_zp")
            if 0 in slots and n.op_type in ("Conv", "MatMul") and n.input[1] in consts:
                w = consts[n.input[1]].astype(np.float64)
                axis = 0 if n.op_type == "Conv" else 1
                red = tuple(a for a in range(w.ndim) if a != axis)
                ws = (np.abs(w).max(axis=red) / 127.0).astype(np.float32)
                ws[ws == 0] = 1.0
                shape = [-1 if a == axis else 1 for a in range(w.ndim)]
                wq = np.clip(np.rint(w / ws.reshape(shape)), -127, 127).astype(np.int8)
                wn = n.input[1]
                inits[wn + "_q"], inits[wn + "_wscale"] = wq, ws
                inits[wn + "_wzp"] = np.zeros(ws.shape, np.int8)
                inputs[1] = dq_node(wn + "_q", wn + "_wscale", wn + "_wzp", axis=axis)
                if n.op_type == "Conv" and len(n.input) > 2 and n.input[2] in consts:
                    xs = params[n.input[0]][0]
                    bs = (np.float32(xs) * ws).astype(np.float32)  # float32 product, as runtimes compute it
                    bn = n.input[2]
                    inits[bn + "_q"] = np.rint(consts[bn].astype(np.float64) / bs).astype(np.int32)
                    inits[bn + "_bscale"] = bs
                    inputs[2] = dq_node(bn + "_q", bn + "_bscale", None, axis=0)
            del n.input[:]
            n.input.extend(inputs)
        out_nodes.append(n)
        for o in n.output:
            if o in params:
                q_node(o)
    used = {i for n in out_nodes for i in n.input}
    del g.node[:]
    g.node.extend(out_nodes)
    del g.initializer[:]
    g.initializer.extend(numpy_helper.from_array(np.asarray(a), k) for k, a in sorted(inits.items()) if k in used)
    g.name = name
    return model


def cnn_plan(n, consts):
    if n.op_type == "Conv":
        return [0]
    if n.op_type == "Add" and not any(i in consts for i in n.input):
        return [0, 1]
    return []


def transformer_plan(n, consts):
    return [0] if n.op_type == "MatMul" and n.input[1] in consts else []


def build_cnn_int8(seed):
    return quantize(fold_batchnorm(gbm.build_cnn(seed)), "cnn_int8", cnn_plan)


def build_transformer_int8(seed):
    return quantize(gbm.build_transformer(seed), "transformer_int8", transformer_plan)


# Seeds are the float models' own, so cnn_int8 is cnn quantized.
MODELS = {
    "cnn_int8": (build_cnn_int8, gbm.MODELS["cnn"][1], "cnn (ResNet-18 shape) quantized: QDQ, uint8 activations, int8 per-channel weights"),
    "transformer_int8": (build_transformer_int8, gbm.MODELS["transformer"][1],
                         "transformer (2 BERT-base layers) with int8 MatMul weights: QDQ, uint8 activations"),
}


def generate(name, outdir, force):
    gbm.generate(name, outdir, force, MODELS, GENERATOR_VERSION, "nxrt-int8-bench")


if __name__ == "__main__":
    sys.exit(gbm.main(MODELS, GENERATOR_VERSION, "nxrt-int8-bench", __doc__))
