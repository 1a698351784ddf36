"""Certify a plugin from Python with the nxrt-conformance installed beside libnxrt.

    import nxrt.conformance
    report = nxrt.conformance.certify("build/libnxrt_ep_myep.so", suites=["abi", "interop", "stress"])
    assert report["passed"], report["failures"]
"""
import json
import os
import shutil
import subprocess
import tempfile

from . import _nxrt


def executable():
    """The nxrt-conformance next to this nxrt (<prefix>/bin beside <prefix>/lib...), else on PATH."""
    lib = os.path.dirname(_nxrt.library_path())
    for up in (os.path.join(lib, "..", "bin"), os.path.join(lib, "..", "..", "bin"), lib):
        exe = os.path.normpath(os.path.join(up, "nxrt-conformance"))
        if os.access(exe, os.X_OK):
            return exe
    exe = shutil.which("nxrt-conformance")
    if not exe:
        raise FileNotFoundError(f"nxrt-conformance not found near {lib} or on PATH")
    return exe


def certify(plugin, suites=("abi", "interop", "diff", "cache", "ops", "models", "stress"), jobs=None, timeout=120, stress_seconds=10,
            ops_filter=None, tests=None, models=None, extra_args=()):
    """Runs the conformance suites on `plugin` (a path, or an EP name). Returns a dict: passed
    (bool: every applicable check passed), exit_code, report (the JSON report), failures
    ([(suite/check, message)]), output (the tool's stdout and stderr)."""
    with tempfile.TemporaryDirectory(prefix="nxrt-conformance-") as tmp:
        report_path = os.path.join(tmp, "report.json")
        cmd = [executable(), "--plugin", str(plugin), "--suite", ",".join(suites), "--timeout", str(timeout),
               "--stress-seconds", str(stress_seconds), "--report-json", report_path]
        if jobs:
            cmd += ["--jobs", str(jobs)]
        if ops_filter:
            cmd += ["--ops-filter", ops_filter]
        if tests:
            cmd += ["--tests", str(tests)]
        if models:
            cmd += ["--models", str(models)]
        cmd += list(extra_args)
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        report = {}
        if os.path.exists(report_path):
            with open(report_path) as f:
                report = json.load(f)
    failures = [(f"{r.get('suite')}/{r.get('check')}", r.get("message", "")) for r in report.get("checks", [])
                if r.get("status") == "fail"]
    return {"passed": p.returncode == 0, "exit_code": p.returncode, "report": report, "failures": failures, "output": p.stdout}
