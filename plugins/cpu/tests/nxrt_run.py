"""One model through `nxrt run --ep cpu`, for the CPU plugin's end-to-end scripts
(random_ops_e2e.py, rnn_activations_e2e.py, fused_groups_e2e.py, qdq_groups_e2e.py)."""
import json
import os
import subprocess

import onnx
from onnx import numpy_helper


def run(nxrt, m, feeds, tmp, tag, threads=None):
    """Saves model `m` and the numpy `feeds` under tmp/tag, runs it (on `threads` intra-op threads
    when given), and returns (outputs as numpy arrays, the CompletedProcess), or (None, the
    CompletedProcess) when nxrt failed."""
    d = os.path.join(tmp, tag)
    os.makedirs(os.path.join(d, "in"), exist_ok=True)
    path = os.path.join(d, "model.onnx")
    onnx.save(m, path)
    for k, arr in enumerate(feeds):
        onnx.save_tensor(numpy_helper.from_array(arr), os.path.join(d, "in", f"input_{k}.pb"))
    out = os.path.join(d, "out")
    cmd = [nxrt, "run", path, "--ep", "cpu", "--input-dir", os.path.join(d, "in"), "--output-dir", out]
    if threads:
        cmd += ["--threads", str(threads)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        return None, p
    res = [numpy_helper.to_array(onnx.load_tensor(os.path.join(out, f"output_{k}.pb")))
           for k in range(len(m.graph.output))]
    return res, p


def kernels_ran(nxrt, path, tmp):
    """The kernels one `nxrt bench --profile` run of the model at `path` used, by their ops
    ("Conv+Relu" for a fused group), sorted; None when nxrt failed."""
    trace = os.path.join(tmp, "trace.json")
    p = subprocess.run([nxrt, "bench", path, "--ep", "cpu", "--warmup", "0", "--iters", "1", "--profile", trace],
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        return None
    with open(trace) as f:
        t = json.load(f)
    ev = t["traceEvents"] if isinstance(t, dict) else t
    return sorted({e["args"]["ops"] for e in ev if e.get("ph") == "X" and e.get("args", {}).get("ops")})
