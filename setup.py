"""Builds every cc/**/*.cc into tf_transducer/_ops.so with TensorFlow's flags.

`pip install -e .` (or `python setup.py build_ext --inplace`) compiles the
sources with g++ in parallel, reusing object files whose source and headers
have not changed, links one shared library and records the TensorFlow version
it was built against inside the library (cc/common/build_info.cc). It prints
a line per step; VERBOSE=1 shows the commands and the compilers' output.
"""

import concurrent.futures
import glob
import hashlib
import json
import os
import shlex
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
SOURCES = sorted(glob.glob(os.path.join("cc", "**", "*.cc"), recursive=True))
HEADERS = sorted(glob.glob(os.path.join("cc", "**", "*.h"), recursive=True))
# -march is left out on purpose: the library must run on any x86-64 machine
# that TensorFlow itself runs on.
OPT_FLAGS = [
    "-O3",
    "-fPIC",
    "-DNDEBUG",
    "-Wall",
    "-Wno-sign-compare",
    "-Wno-deprecated-declarations",
    # Lets the compiler vectorise loops with selects around floating-point
    # operations; the kernels never read floating-point exception flags.
    # (IEEE inf / NaN semantics stay: this is not -ffast-math.)
    "-fno-trapping-math",
]


def _tf_flags():
    """(version, compile flags, link flags) of the installed TensorFlow, asked
    in a child process whose log lines (CUDA probing) are not shown."""
    query = (
        "import json, tensorflow as tf; print(json.dumps([tf.__version__, "
        "tf.sysconfig.get_compile_flags(), tf.sysconfig.get_link_flags()]))"
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, "-c", query], capture_output=True, text=True, env=env
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"cannot import TensorFlow to build the ops:\n{result.stderr}"
        )
    version, cflags, lflags = json.loads(result.stdout.strip().splitlines()[-1])
    return version, [*cflags, f'-DTF_TRANSDUCER_TF_VERSION="{version}"'], lflags


VERBOSE = os.environ.get("VERBOSE", "") not in ("", "0")


def _run(cmd, what):
    """Runs a compiler command: one line of what it does, its full output
    only when it fails (or with VERBOSE=1: TensorFlow's headers make g++
    print pages of warnings that are not ours)."""
    print(what, flush=True)
    if VERBOSE:
        print(" ".join(shlex.quote(c) for c in cmd), flush=True)
        subprocess.run(cmd, check=True, cwd=ROOT)
        return
    result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        print(" ".join(shlex.quote(c) for c in cmd))
        print(result.stdout + result.stderr, flush=True)
        raise subprocess.CalledProcessError(result.returncode, cmd)


class BuildTfOps(build_ext):
    """Compiles the custom-op library instead of a CPython extension."""

    def get_ext_filename(self, fullname):
        return os.path.join(*fullname.split(".")) + ".so"

    def build_extension(self, ext):
        tf_version, cflags, lflags = _tf_flags()
        cxx = os.environ.get("CXX", "g++")
        out = self.get_ext_fullpath(ext.name)
        # Objects are reused only when built with the same TensorFlow and flags.
        flags_id = hashlib.sha1(" ".join([cxx, *cflags, *OPT_FLAGS]).encode())
        obj_dir = os.path.join(
            self.build_temp, f"objs-tf{tf_version}-{flags_id.hexdigest()[:10]}"
        )
        os.makedirs(obj_dir, exist_ok=True)
        os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
        newest_header = max((os.path.getmtime(h) for h in HEADERS), default=0)

        def compile_one(src):
            obj = os.path.join(obj_dir, src.replace(os.sep, "_") + ".o")
            if os.path.exists(obj) and os.path.getmtime(obj) >= max(
                os.path.getmtime(src), newest_header
            ):
                return obj
            cmd = [cxx, "-c", src, "-o", obj, "-I", ROOT, *cflags, *OPT_FLAGS]
            _run(cmd, f"compiling {src}")
            return obj

        jobs = max(1, os.cpu_count() or 1)
        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            objs = list(pool.map(compile_one, ext.sources))
        cmd = [cxx, "-shared", *objs, "-o", out, *lflags]
        _run(cmd, f"linking {out}")


setup(
    ext_modules=[Extension("tf_transducer._ops", sources=SOURCES)],
    cmdclass={"build_ext": BuildTfOps},
)
