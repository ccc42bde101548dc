# SPDX-License-Identifier: Apache-2.0
"""Builds the op library against other TensorFlow releases and runs the op
tests on each: the range a build from source accepts (setup.py's TF_RANGE).

Not part of CI (each release is a ~600 MB download and a full compile). For
every version: a fresh venv with that TensorFlow, the library compiled with
setup.py into a folder of its own, then the op and loss tests run on it
through TF_TRANSDUCER_OPS_LIBRARY (the sources are this checkout's).

Usage: python -m benchmarks.check_tf_versions [--versions 2.20.0 2.21.0]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = ["tests/ops/test_mutual_information.py", "tests/test_losses.py"]


def run(cmd, **kwargs):
    start = time.perf_counter()
    result = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    return result, time.perf_counter() - start


def check(version, work):
    venv = os.path.join(work, f"venv-{version}")
    python = os.path.join(venv, "bin", "python")
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    result, install_s = run(
        [
            python,
            "-m",
            "pip",
            "install",
            "--quiet",
            f"tensorflow=={version}",
            "setuptools>=77",
            "wheel",
            "pytest",
            "absl-py",
        ]
    )
    if result.returncode:
        return dict(version=version, status="no install", detail=result.stderr[-300:])
    lib_dir = os.path.join(work, f"lib-{version}")
    result, build_s = run(
        [
            python,
            "setup.py",
            "--quiet",
            "build_ext",
            "--build-lib",
            lib_dir,
            "--build-temp",
            os.path.join(work, f"tmp-{version}"),
        ],
        cwd=ROOT,
    )
    if result.returncode:
        tail = (result.stdout + result.stderr)[-600:]
        return dict(version=version, status="build fails", detail=tail)
    library = os.path.join(lib_dir, "tf_transducer", "_ops.so")
    env = dict(os.environ, TF_TRANSDUCER_OPS_LIBRARY=library)
    result, test_s = run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS],
        cwd=ROOT,
        env=env,
    )
    summary = (result.stdout.strip().splitlines() or ["no output"])[-1]
    return dict(
        version=version,
        status="ok" if result.returncode == 0 else "tests fail",
        detail=f"install {install_s:.0f} s, build {build_s:.0f} s, "
        f"tests {test_s:.0f} s: {summary}",
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", nargs="+", default=["2.20.0", "2.21.0"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tf_versions_") as work:
        rows = [check(v, work) for v in args.versions]
    print("| TensorFlow | result | details |\n| --- | --- | --- |")
    for row in rows:
        print(f"| {row['version']} | {row['status']} | {row['detail']} |")
    sys.exit(any(row["status"] != "ok" for row in rows))


if __name__ == "__main__":
    main()
