"""Builds every cc/**/*.cc into tf_transducer/_ops.so with TensorFlow's flags.

`pip install -e .` (or `python setup.py build_ext --inplace`) compiles the
sources with g++ in parallel, reusing object files whose source and headers
have not changed, links one shared library and records the TensorFlow version
it was built against inside the library (cc/common/build_info.cc).
"""

import concurrent.futures
import glob
import hashlib
import os
import shlex
import subprocess

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
    import tensorflow as tf  # Imported late: only a build needs it.

    version = f'-DTF_TRANSDUCER_TF_VERSION="{tf.__version__}"'
    return (
        tf.__version__,
        [*tf.sysconfig.get_compile_flags(), version],
        (tf.sysconfig.get_link_flags()),
    )


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
            print(" ".join(shlex.quote(c) for c in cmd), flush=True)
            subprocess.run(cmd, check=True, cwd=ROOT)
            return obj

        jobs = max(1, os.cpu_count() or 1)
        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            objs = list(pool.map(compile_one, ext.sources))
        cmd = [cxx, "-shared", *objs, "-o", out, *lflags]
        print(" ".join(shlex.quote(c) for c in cmd), flush=True)
        subprocess.run(cmd, check=True, cwd=ROOT)


setup(
    ext_modules=[Extension("tf_transducer._ops", sources=SOURCES)],
    cmdclass={"build_ext": BuildTfOps},
)
