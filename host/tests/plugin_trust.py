#!/usr/bin/python3
"""Plugin trust through `nxrt plugins --plugin PATH` on a copy of a test plugin in a private
temporary folder: a world-writable plugin file or folder is refused with a clear message;
NXRT_PLUGIN_ALLOWLIST (a file of SHA-256 digests) lets listed plugins load and refuses the
rest, and fails closed when unreadable or malformed; with NXRT_LOG_LEVEL=1 the load is
logged with its path and the digest Python's hashlib computes.

Usage: plugin_trust.py --nxrt BIN --test-plugins DIR
"""
import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

PLUGIN = "libnxrt_ep_nodevice.so"  # a test plugin that in-tree discovery does not find


def plugins(nxrt, path, **env):
    e = dict(os.environ)
    e.pop("NXRT_PLUGIN_ALLOWLIST", None)
    e.update(env)
    p = subprocess.run([nxrt, "plugins", "--plugin", path], capture_output=True, text=True, env=e, timeout=60)
    return p.stdout + p.stderr


def section(out, path):
    """The lines `nxrt plugins` printed for the plugin at `path`."""
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == f"path: {path}":
            end = i + 1
            while end < len(lines) and lines[end].startswith("  "):
                end += 1
            return "\n".join(lines[i - 1:end])
    return ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nxrt", required=True)
    ap.add_argument("--test-plugins", required=True)
    args = ap.parse_args()
    failures = 0

    def expect(what, ok, detail):
        nonlocal failures
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures += 1
            print("     " + detail.replace("\n", "\n     ")[:1500])

    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, "plugins")
        os.mkdir(folder, 0o755)
        os.chmod(folder, 0o755)
        path = os.path.join(folder, PLUGIN)
        shutil.copy(os.path.join(args.test_plugins, PLUGIN), path)
        os.chmod(path, 0o755)
        digest = hashlib.sha256(open(path, "rb").read()).hexdigest()

        out = plugins(args.nxrt, path, NXRT_LOG_LEVEL="1")
        s = section(out, path)
        expect("a private copy loads", s and "not loaded" not in s, out)
        expect("its load is logged at info level with path and SHA-256",
               f"loaded plugin 'nodevice'" in out and f"from '{path}'" in out and f"SHA-256 {digest}" in out, out)
        # It is loaded through the descriptor it was checked on (/proc/<pid>/fd/N); what is
        # listed and logged is still the file's path.
        expect("the listing and the log name the path, never the descriptor", "/fd/" not in out, out)
        out = plugins(args.nxrt, path, NXRT_LOG_LEVEL="2")
        expect("nothing is logged above info level", "loaded plugin" not in out, out)

        os.chmod(path, 0o666)
        s = section(plugins(args.nxrt, path), path)
        expect("a world-writable plugin file is refused", "not loaded" in s and "is world-writable (mode 666)" in s, s)
        os.chmod(path, 0o755)
        os.chmod(folder, 0o777)
        s = section(plugins(args.nxrt, path), path)
        expect("a plugin in a world-writable folder is refused",
               "not loaded" in s and f"world-writable folder '{folder}' (mode 777)" in s, s)
        os.chmod(folder, 0o755)

        allow = os.path.join(tmp, "allow.txt")
        with open(allow, "w") as f:  # sha256sum's format, a comment and a blank line
            f.write(f"# plugins this deployment trusts\n\n{digest.upper()}  {path}\n")
        out = plugins(args.nxrt, path, NXRT_PLUGIN_ALLOWLIST=allow)
        s = section(out, path)
        expect("a listed digest loads", s and "not loaded" not in s, out)
        expect("an in-tree plugin not on the list is refused, naming its digest",
               "is not in the allow-list" in out and "(SHA-256 " in out, out)
        with open(allow, "w") as f:
            f.write("0" * 64 + "\n")
        s = section(plugins(args.nxrt, path, NXRT_PLUGIN_ALLOWLIST=allow), path)
        expect("an unlisted digest is refused", f"(SHA-256 {digest}) is not in the allow-list '{allow}'" in s, s)
        with open(allow, "w") as f:
            f.write(f"{digest}\nnot-a-digest\n")
        s = section(plugins(args.nxrt, path, NXRT_PLUGIN_ALLOWLIST=allow), path)
        expect("a malformed allow-list refuses everything", "line 2: 'not-a-digest' is not a SHA-256 digest" in s, s)
        missing = os.path.join(tmp, "missing.txt")
        s = section(plugins(args.nxrt, path, NXRT_PLUGIN_ALLOWLIST=missing), path)
        expect("an unreadable allow-list refuses everything", f"names '{missing}', which cannot be read" in s, s)
    print(f"{failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
