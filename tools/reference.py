"""A small numpy evaluator for the ops of the bench models: an independent oracle for
model tests when ONNX Runtime (../shared/ort) is not available. float64 inside."""
import math

import numpy as np
import onnx
from onnx import numpy_helper


def _attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _conv(x, w, b, a):
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    g = a.get("group", 1)
    sh, sw = a.get("strides", [1, 1])
    dh, dw = a.get("dilations", [1, 1])
    pt, pl, pb, pr = a.get("pads", [0, 0, 0, 0])
    x = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh = (x.shape[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (x.shape[3] - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, m, oh, ow))
    mg = m // g
    for gi in range(g):
        xs = x[:, gi * cg:(gi + 1) * cg]
        ws = w[gi * mg:(gi + 1) * mg]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i * dh:i * dh + sh * oh:sh, j * dw:j * dw + sw * ow:sw]
                out[:, gi * mg:(gi + 1) * mg] += np.einsum("nchw,mc->nmhw", patch, ws[:, :, i, j])
    if b is not None:
        out += b.reshape(1, -1, 1, 1)
    return out


def _maxpool(x, a):
    kh, kw = a["kernel_shape"]
    sh, sw = a.get("strides", [1, 1])
    pt, pl, pb, pr = a.get("pads", [0, 0, 0, 0])
    x = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=-np.inf)
    oh = (x.shape[2] - kh) // sh + 1
    ow = (x.shape[3] - kw) // sw + 1
    out = np.full(x.shape[:2] + (oh, ow), -np.inf)
    for i in range(kh):
        for j in range(kw):
            out = np.maximum(out, x[:, :, i:i + sh * oh:sh, j:j + sw * ow:sw])
    return out


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _layernorm(x, s, b, a):
    axis = a.get("axis", -1) % x.ndim
    axes = tuple(range(axis, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + a.get("epsilon", 1e-5)) * s + b


_erf = np.vectorize(math.erf)


def _run_node(op, ins, a):
    if op == "Gemm":
        x, w = ins[0], ins[1]
        if a.get("transA", 0):
            x = x.T
        if a.get("transB", 0):
            w = w.T
        y = a.get("alpha", 1.0) * (x @ w)
        return y + a.get("beta", 1.0) * ins[2] if len(ins) > 2 and ins[2] is not None else y
    if op == "MatMul":
        return ins[0] @ ins[1]
    if op == "Relu":
        return np.maximum(ins[0], 0)
    if op == "Clip":
        return np.clip(ins[0], ins[1], ins[2])
    if op in ("Add", "Mul", "Div", "Sub"):
        return {"Add": np.add, "Mul": np.multiply, "Div": np.divide, "Sub": np.subtract}[op](ins[0], ins[1])
    if op == "Erf":
        return _erf(ins[0])
    if op == "Conv":
        return _conv(ins[0], ins[1], ins[2] if len(ins) > 2 else None, a)
    if op == "BatchNormalization":
        x, s, b, m, v = ins
        sh = (1, -1) + (1,) * (x.ndim - 2)
        return (x - m.reshape(sh)) / np.sqrt(v.reshape(sh) + a.get("epsilon", 1e-5)) * s.reshape(sh) + b.reshape(sh)
    if op == "MaxPool":
        return _maxpool(ins[0], a)
    if op == "GlobalAveragePool":
        return ins[0].mean(axis=tuple(range(2, ins[0].ndim)), keepdims=True)
    if op == "Flatten":
        ax = a.get("axis", 1)
        return ins[0].reshape(int(np.prod(ins[0].shape[:ax])), -1)
    if op == "Reshape":
        return ins[0].reshape([int(d) for d in ins[1]])
    if op == "Transpose":
        return ins[0].transpose(a.get("perm"))
    if op == "Softmax":
        return _softmax(ins[0], a.get("axis", -1))
    if op == "LayerNormalization":
        return _layernorm(ins[0], ins[1], ins[2], a)
    if op in ("QuantizeLinear", "DequantizeLinear"):
        x, scale = ins[0], np.asarray(ins[1])
        zp = np.asarray(ins[2]) if len(ins) > 2 and ins[2] is not None else np.zeros((), np.uint8 if op == "QuantizeLinear" else x.dtype)
        if scale.size > 1:  # per axis
            shape = [1] * x.ndim
            shape[a.get("axis", 1) % x.ndim] = -1
            scale, zp = scale.reshape(shape), zp.reshape(shape)
        if op == "DequantizeLinear":
            return (x.astype(np.int64) - zp.astype(np.int64)) * scale.astype(np.float64)
        info = np.iinfo(zp.dtype)
        return np.clip(np.rint(x / scale) + zp.astype(np.int64), info.min, info.max).astype(zp.dtype)
    raise NotImplementedError(f"reference has no {op}")


def evaluate(model_path, inputs):
    """inputs: {name: ndarray}. Returns {output name: float32/int ndarray}."""
    m = onnx.load(model_path)
    env = {t.name: numpy_helper.to_array(t).astype(np.float64) if numpy_helper.to_array(t).dtype == np.float32
           else numpy_helper.to_array(t) for t in m.graph.initializer}
    for k, v in inputs.items():
        env[k] = v.astype(np.float64) if v.dtype == np.float32 else v
    for node in m.graph.node:
        ins = [env[i] if i else None for i in node.input]
        env[node.output[0]] = _run_node(node.op_type, ins, _attrs(node))
    return {o.name: env[o.name].astype(np.float32) if env[o.name].dtype.kind == "f" else env[o.name]
            for o in m.graph.output}
