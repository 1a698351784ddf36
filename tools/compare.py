"""Tensor comparison shared by the test scripts: the ONNX backend runner's rule."""
import numpy as np
import onnx
from onnx import numpy_helper


def load(path, kind="tensor_type"):
    """A .pb value: a numpy array (kind "tensor_type"), a list of arrays ("sequence_type", a
    SequenceProto) or an array, list or None ("optional_type", an OptionalProto); `kind` is the
    TypeProto field of the model's input or output, as the ONNX backend runner decides."""
    with open(path, "rb") as f:
        data = f.read()
    if kind == "sequence_type":
        p = onnx.SequenceProto()
        p.ParseFromString(data)
        return onnx.numpy_helper.to_list(p)
    if kind == "optional_type":
        p = onnx.OptionalProto()
        p.ParseFromString(data)
        return onnx.numpy_helper.to_optional(p)
    t = onnx.TensorProto()
    t.ParseFromString(data)
    return numpy_helper.to_array(t)


def mismatch(got, want, rtol, atol):
    """Like tensor_mismatch, for sequences (lists, element by element) and optionals (None) too."""
    if want is None or got is None:
        return None if got is None and want is None else f"got {'nothing' if got is None else 'a value'}, expected " \
            f"{'nothing' if want is None else 'a value'}"
    if isinstance(want, list) or isinstance(got, list):
        if not isinstance(want, list) or not isinstance(got, list):
            return f"got a {type(got).__name__}, expected a {type(want).__name__}"
        if len(got) != len(want):
            return f"sequence of {len(got)} tensors, expected {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            why = tensor_mismatch(g, w, rtol, atol)
            if why:
                return f"sequence element {i}: {why}"
        return None
    return tensor_mismatch(got, want, rtol, atol)


def tensor_mismatch(got, want, rtol, atol):
    """None when `got` matches `want` (same dtype and shape, |g-w| <= atol + rtol*|w|, NaN == NaN),
    else a one-line description of the first difference."""
    if got.dtype != want.dtype:
        return f"dtype {got.dtype} != expected {want.dtype}"
    if got.shape != want.shape:
        return f"shape {list(got.shape)} != expected {list(want.shape)}"
    if got.dtype.kind in "fc":
        g = got.astype(np.float64)
        w = want.astype(np.float64)
        both_nan = np.isnan(g) & np.isnan(w)
        ok = both_nan | (np.abs(g - w) <= atol + rtol * np.abs(w))
        ok &= ~(np.isnan(g) ^ np.isnan(w))
    else:
        ok = got == want
    if ok.all():
        return None
    bad = np.argwhere(~ok)
    idx = tuple(bad[0])
    return (f"{len(bad)} of {ok.size} elements differ; first at {list(idx)}: got {got[idx]!r}, "
            f"expected {want[idx]!r}")
