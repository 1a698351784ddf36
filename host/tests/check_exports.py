#!/usr/bin/python3
"""Every nxrt plugin exports exactly one symbol, nxrt_ep_negotiate (the SDK's
nxrt_add_plugin passes sdk/plugin.map as a version script; host/tests builds its
test plugins the same way). Anything else a plugin exports (SDK templates, std::
or fmt instantiations, a stray global) could bind to another plugin's copy.

Runs `nm -D --defined-only` on every libnxrt_ep_*.so of the given folders. The
version node a version script adds (e.g. NXRT_EP_2, an ABS symbol of type A) is
not a function or object and is ignored.

Usage: check_exports.py DIR [DIR...]   (exit 1 on any extra export or a missing entry)
"""
import glob
import os
import subprocess
import sys

ENTRY = "nxrt_ep_negotiate"


def exports(path):
    out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True, check=True).stdout
    syms = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        kind, name = parts[-2], parts[-1]
        if kind == "A":  # version node (ABS), not code or data
            continue
        syms.append((kind, name.split("@")[0]))
    return syms


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    failures, checked = 0, 0
    for d in sys.argv[1:]:
        libs = sorted(glob.glob(os.path.join(d, "libnxrt_ep_*.so")))
        if not libs:
            print(f"FAIL {d}: no plugin (libnxrt_ep_*.so) found")
            failures += 1
        for lib in libs:
            checked += 1
            syms = exports(lib)
            extra = [f"{n} ({k})" for k, n in syms if n != ENTRY]
            entry = [k for k, n in syms if n == ENTRY]
            name = os.path.relpath(lib, os.path.dirname(d.rstrip("/")))
            if extra or entry != ["T"]:
                failures += 1
                why = []
                if entry != ["T"]:
                    why.append(f"{ENTRY} is not exported as one function")
                if extra:
                    why.append(f"{len(extra)} other exported symbol(s): " + ", ".join(extra[:10])
                               + (" ..." if len(extra) > 10 else ""))
                print(f"FAIL {name}: " + "; ".join(why))
            else:
                print(f"ok   {name}: exports {ENTRY} only")
    print(f"{checked - failures} of {checked} plugins export only {ENTRY}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
