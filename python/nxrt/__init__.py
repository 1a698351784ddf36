"""nxrt: ONNX inference with plugin execution providers, shaped like ONNX Runtime's Python API.

    import nxrt, numpy as np
    s = nxrt.InferenceSession("model.onnx", providers=["vulkan", "cpu"])
    (y,) = s.run(None, {"x": np.ones((1, 3), np.float32)})

Providers are nxrt EP names ("cpu", "vulkan", a plugin's own name); ONNX Runtime names such as
"CPUExecutionProvider" are accepted too. Inputs of the model's element type that are
C-contiguous are read in place; outputs are read-only arrays over nxrt's own buffers (no copy).
Errors are nxrt.Error (a RuntimeError) with the host's message.
"""
import os

from . import _nxrt
from ._nxrt import Error

__all__ = ["InferenceSession", "NodeArg", "Error", "get_available_providers", "get_all_providers",
           "register_plugin", "get_plugins", "get_devices", "conformance", "__version__"]
__version__ = _nxrt.version()


def _ep_name(provider):
    """'CUDAExecutionProvider' -> 'cuda'; nxrt names pass through."""
    if provider.endswith("ExecutionProvider"):
        return provider[: -len("ExecutionProvider")].lower()
    return provider


def get_plugins():
    """Every plugin found next to libnxrt (its nxrt/ folder), in NXRT_PLUGIN_PATH, or registered:
    a list of dicts with name, path, version, abi, loaded, error, no_device_reason, devices."""
    return _nxrt.plugins()


def get_all_providers():
    """Names of the loaded plugins, with or without a device."""
    return [p["name"] for p in get_plugins() if p["loaded"]]


def get_available_providers():
    """Names of the loaded plugins that have a device, in discovery order."""
    return [p["name"] for p in get_plugins() if p["loaded"] and p["devices"]]


def get_devices():
    """(provider, device index, description) for every device of every loaded plugin."""
    return [(p["name"], i, d) for p in get_plugins() if p["loaded"] for i, d in enumerate(p["devices"])]


def register_plugin(path):
    """Loads the plugin library at `path` for every session made after; returns its EP name."""
    return _nxrt.register_plugin(str(path))


class NodeArg:
    """A model input or output: name, shape (ints, None for a dynamic dim), type ('tensor(float)')."""

    def __init__(self, name, shape, elem_type, onnx_type):
        self.name, self.shape, self.onnx_type = name, shape, onnx_type
        self.type = f"tensor({'float' if elem_type == 'float32' else 'double' if elem_type == 'float64' else elem_type})"

    def __repr__(self):
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})"


class InferenceSession:
    """A model loaded for inference on an ordered list of providers.

    providers: EP names in order of preference (default: every available one, then fallback).
    provider_options: one dict per provider, {"key": value} (passed as "<ep>.key").
    fallback: nodes no listed provider claims go to any loaded one (default: True when
    providers is None, else False, so a request for a provider that cannot run the model fails
    with the reason instead of silently running elsewhere). threads: intra-op threads, 0 = default.
    cache_dir: a compiled-model cache folder (docs/abi.md "What 2.4 adds"): a warm start takes
    the graph and compiled kernels from it; get_load_report() says what happened. The path may
    also name a compiled model written by `nxrt compile`.
    """

    def __init__(self, path_or_bytes, providers=None, provider_options=None, fallback=None, threads=0, cache_dir=None):
        if not isinstance(path_or_bytes, str) and not hasattr(path_or_bytes, "__fspath__"):
            raise TypeError("InferenceSession takes a model path (serialized model bytes are not supported yet)")
        names = [_ep_name(p if isinstance(p, str) else p[0]) for p in providers] if providers else ["auto"]
        if provider_options is not None and providers is not None and len(provider_options) != len(providers):
            raise ValueError("provider_options needs one dict per provider")
        options = {}
        for ep, opts in zip(names, provider_options or []):
            for k, v in (opts or {}).items():
                key = k if k.startswith(ep + ".") else f"{ep}.{k}"
                options[key] = str(int(v)) if isinstance(v, bool) else str(v)
        if fallback is None:
            fallback = providers is None
        if cache_dir is not None:
            options["cache_dir"] = os.fspath(cache_dir)
        self._s = _nxrt.Session(os.fspath(path_or_bytes),
                                ",".join(names), bool(fallback), options, int(threads))
        self._inputs = [NodeArg(*i) for i in self._s.inputs()]
        self._outputs = [NodeArg(*o) for o in self._s.outputs()]

    def get_load_report(self):
        """How the session was prepared: stage times (ms) and the cache's verdicts, as a dict."""
        import json
        return json.loads(self._s.load_report())

    def get_inputs(self):
        return list(self._inputs)

    def get_outputs(self):
        return list(self._outputs)

    def get_providers(self):
        """The EPs the session uses, in order."""
        return self._s.providers()

    def get_placement(self):
        """(node name, op type, ep, fell back, why earlier EPs refused it) per node."""
        return self._s.placement()

    def get_kernels(self):
        """(node name, how its kernel computes) per node, as its EP describes it (EP ABI 2.5: the
        algorithm, tile or ISA chosen, e.g. "winograd F(4x4,3x3) + gemm avx512f-8x48"; "" when
        the EP says nothing). `nxrt inspect` prints the same column."""
        return self._s.kernels()

    def run(self, output_names, input_feed, run_options=None):
        """Runs once; returns the requested outputs (all when output_names is None) in order.
        run_options: {"<ep>.<key>": value} for that EP's run hooks (the prefix must name an EP of
        the session)."""
        opts = {str(k): str(v) for k, v in (run_options or {}).items()}
        results = self._s.run(dict(input_feed), opts)
        names = output_names or [o.name for o in self._outputs]
        missing = [n for n in names if n not in results]
        if missing:
            raise Error(f"the model has no output {', '.join(repr(m) for m in missing)}")
        return [results[n] for n in names]


from . import conformance  # noqa: E402  (nxrt.conformance.certify without a separate import)
