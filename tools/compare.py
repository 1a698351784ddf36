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


# ------------------------------------------------------------------ random ops
# The expected outputs of these ONNX backend cases were drawn with numpy's generator, so no
# engine matches them bit for bit (ONNX Runtime does not either). They are checked by shape,
# dtype and distribution instead; every other case (incl. test_training_dropout_zero_ratio and
# _zero_ratio_mask, which are exact) goes through mismatch().
RANDOM_CASES = {
    "test_bernoulli": "bernoulli",
    "test_bernoulli_double": "bernoulli",
    "test_bernoulli_seed": "bernoulli",
    "test_bernoulli_expanded": "bernoulli",
    "test_bernoulli_double_expanded": "bernoulli",
    "test_bernoulli_seed_expanded": "bernoulli",
    "test_training_dropout": "dropout",
    "test_training_dropout_default": "dropout",
    "test_training_dropout_default_mask": "dropout",
    "test_training_dropout_mask": "dropout",
}

RANDOM_RULES = {
    "bernoulli": "same shape/dtype, values in {0, 1} (0 where p = 0, 1 where p = 1), "
                 "number of ones within 4 sd of sum(p)",
    "dropout": "same shape/dtype, each element 0 or x/(1-ratio), the mask agrees, "
               "number kept within 4 sd of n(1-ratio)",
}

_SIGMAS = 4.0  # binomial count bound: a false alarm is ~1e-4 per case, a constant generator fails


def _shape_dtype(got, want):
    if got.dtype != want.dtype:
        return f"dtype {got.dtype} != expected {want.dtype}"
    if got.shape != want.shape:
        return f"shape {list(got.shape)} != expected {list(want.shape)}"
    return None


def _count_ok(count, mean, var, what):
    if abs(count - mean) > _SIGMAS * np.sqrt(var) + 0.5:
        return f"{what}: {count}, expected {mean:.1f} +- {_SIGMAS * np.sqrt(var):.1f} ({_SIGMAS:g} sd)"
    return None


def random_mismatch(rule, inputs, got, want, rtol=1e-3, atol=1e-7):
    """None when the outputs `got` of a random case fit `rule` (a RANDOM_RULES key), else why.

    inputs, got, want: lists of arrays in input_K / output_K order (want gives shapes and dtypes).

    >>> p = np.array([0.0, 1.0, 0.5, 0.5], np.float32)
    >>> random_mismatch("bernoulli", [p], [np.array([0, 1, 1, 0], np.float32)], [np.zeros(4, np.float32)])
    >>> random_mismatch("bernoulli", [p], [np.array([0, 1, 2, 0], np.float32)], [np.zeros(4, np.float32)])
    'values other than 0 and 1: [2.]'
    >>> random_mismatch("bernoulli", [p], [np.array([1, 1, 1, 0], np.float32)], [np.zeros(4, np.float32)])
    'a 1 where p = 0 at [0]'
    >>> random_mismatch("bernoulli", [p], [np.array([0, 1, 1, 0], np.float64)], [np.zeros(4, np.float32)])
    'output 0: dtype float64 != expected float32'
    >>> big = np.full(1000, 0.3)
    >>> random_mismatch("bernoulli", [big], [np.zeros(1000)], [np.zeros(1000)])
    'number of ones: 0.0, expected 300.0 +- 58.0 (4 sd)'
    >>> x = np.arange(1, 101, dtype=np.float32)
    >>> keep = np.arange(100) % 2 == 0
    >>> y = np.where(keep, x * 2, 0).astype(np.float32)
    >>> t = np.array(True)
    >>> random_mismatch("dropout", [x, np.float32(0.5), t], [y, keep], [x, keep])
    >>> random_mismatch("dropout", [x, np.float32(0.5), t], [y], [x])
    >>> random_mismatch("dropout", [x, np.float32(0.5), t], [y, ~keep], [x, keep])
    'mask is true where the element was dropped at [1]'
    >>> random_mismatch("dropout", [x, np.float32(0.5), t], [y, keep & (x > 1)], [x, keep])
    'mask is false where the element was kept at [0]'
    >>> random_mismatch("dropout", [x, np.float32(0.5), t], [x * 2], [x])  # all kept
    'number kept: 100, expected 50.0 +- 20.0 (4 sd)'
    >>> random_mismatch("dropout", [x, np.float32(0.5), t], [np.where(keep, x, 0)], [x])  # not scaled
    'element [0] is 1.0: neither 0 nor x/(1-ratio) = 2.0'
    """
    for k, (g, w) in enumerate(zip(got, want)):
        why = _shape_dtype(g, w)
        if why:
            return f"output {k}: {why}"
    if len(got) != len(want):
        return f"{len(got)} outputs, expected {len(want)}"
    if rule == "bernoulli":
        p = inputs[0].astype(np.float64)
        y = got[0]
        bad = ~np.isin(y.astype(np.float64), [0.0, 1.0])
        if bad.any():
            return f"values other than 0 and 1: {np.unique(y[bad])}"
        for where, value in ((p == 0, 1), (p == 1, 0)):
            hit = where & (y.astype(np.float64) == value)
            if hit.any():
                return f"a {value} where p = {1 - value} at {list(np.argwhere(hit)[0])}"
        return _count_ok(float(y.astype(np.float64).sum()), float(p.sum()), float((p * (1 - p)).sum()), "number of ones")
    if rule == "dropout":
        x = inputs[0].astype(np.float64)
        ratio = float(inputs[1]) if len(inputs) > 1 else 0.5
        training = bool(inputs[2]) if len(inputs) > 2 else False
        y = got[0].astype(np.float64)
        if not training or ratio == 0:
            return mismatch(got[0], want[0], rtol, atol)
        scaled = x / (1.0 - ratio)
        kept = np.abs(y - scaled) <= atol + rtol * np.abs(scaled)
        dropped = y == 0
        bad = ~(kept | dropped)
        if bad.any():
            i = tuple(np.argwhere(bad)[0])
            return f"element {list(i)} is {y[i]!r}: neither 0 nor x/(1-ratio) = {scaled[i]!r}"
        if len(got) > 1:
            mask = got[1]
            wrong = mask & ~kept
            if wrong.any():
                return f"mask is true where the element was dropped at {list(np.argwhere(wrong)[0])}"
            wrong = ~mask & ~dropped
            if wrong.any():
                return f"mask is false where the element was kept at {list(np.argwhere(wrong)[0])}"
            n_kept, n = int(mask.sum()), y.size
        else:  # an element x = 0 gives 0 either way: count the others only
            n_kept, n = int((~dropped).sum()), int((x != 0).sum())
        return _count_ok(n_kept, n * (1 - ratio), n * ratio * (1 - ratio), "number kept")
    raise ValueError(f"unknown random rule {rule}")
