"""Tensor comparison shared by the test scripts: the ONNX backend runner's rule."""
import numpy as np
import onnx
from onnx import numpy_helper


def load(path):
    return numpy_helper.to_array(onnx.load_tensor(path))


def mismatch(got, want, rtol, atol):
    """None when `got` matches `want` (same dtype and shape, g == w or |g-w| <= atol + rtol*|w|,
    so equal infinities match, NaN == NaN),
    else a one-line description of the first difference."""
    if got.dtype != want.dtype:
        return f"dtype {got.dtype} != expected {want.dtype}"
    if got.shape != want.shape:
        return f"shape {list(got.shape)} != expected {list(want.shape)}"
    if got.dtype.kind in "fc":
        g = got.astype(np.float64)
        w = want.astype(np.float64)
        both_nan = np.isnan(g) & np.isnan(w)
        with np.errstate(invalid="ignore"):  # inf - inf
            ok = both_nan | (g == w) | (np.abs(g - w) <= atol + rtol * np.abs(w))
        ok &= ~(np.isnan(g) ^ np.isnan(w))
    else:
        ok = got == want
    if ok.all():
        return None
    bad = np.argwhere(~ok)
    idx = tuple(bad[0])
    return (f"{len(bad)} of {ok.size} elements differ; first at {list(idx)}: got {got[idx]!r}, "
            f"expected {want[idx]!r}")
