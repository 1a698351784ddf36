#!/usr/bin/python3
"""NXRT_PLUGIN_PATH is ignored in a setuid process: runs a copy of nxrt_plugin_trust_test
owned by `nobody` with the setuid bit (so getauxval(AT_SECURE) is 1) and NXRT_PLUGIN_PATH
set, and its setuid case checks that discovery leaves the path out.
Needs root (to chown) and a filesystem that honours setuid: otherwise exit 77 (ctest SKIP).

Usage: setuid_plugin_path.py --test-binary PATH
"""
import argparse
import os
import pwd
import shutil
import subprocess
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--test-binary", required=True)
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("skip: needs root to make a setuid copy owned by another user")
        return 77
    try:
        nobody = pwd.getpwnam("nobody").pw_uid
    except KeyError:
        print("skip: no user 'nobody'")
        return 77
    # Next to the build, not in /tmp (often mounted nosuid); every folder on the way must let
    # 'nobody' in, which a private temporary folder would not.
    here = os.path.dirname(os.path.abspath(args.test_binary))
    with tempfile.TemporaryDirectory(dir=here) as tmp:
        os.chmod(tmp, 0o755)
        exe = os.path.join(tmp, "setuid_test")
        shutil.copy(args.test_binary, exe)
        os.chown(exe, nobody, -1)
        os.chmod(exe, 0o4755)
        env = dict(os.environ, NXRT_PLUGIN_PATH="/nxrt-plugin-path-from-the-environment")
        probe = subprocess.run([exe, "--no-skip", "--test-case=setuid*"], capture_output=True, text=True, env=env,
                               timeout=60)
        out = probe.stdout + probe.stderr
        print(out)
        if probe.returncode != 0 and "REQUIRE( Env::secure_process() )" in out:
            print("skip: the setuid bit had no effect here (nosuid mount or no access for 'nobody')")
            return 77
        if "ignored in a setuid/setgid process" not in out:
            print("FAIL: no warning that NXRT_PLUGIN_PATH was ignored")
            return 1
        return probe.returncode


if __name__ == "__main__":
    sys.exit(main())
