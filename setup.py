# SPDX-License-Identifier: Apache-2.0
"""Builds every cc/**/*.cc into tf_transducer/_ops.so with TensorFlow's flags.

`pip install -e .` (or `python setup.py build_ext --inplace`) compiles the
sources with g++ in parallel, reusing object files whose source and headers
have not changed, links one shared library and records the TensorFlow version
it was built against inside the library (cc/common/build_info.cc). It prints
a line per step; VERBOSE=1 shows the commands and the compilers' output.

TT_CUDA=1 adds the GPU kernels: cc/**/*.cu and the glue built with
GOOGLE_CUDA, in the same library.  The .cu files are compiled by nvcc (NVCC,
or nvcc on the PATH or in /usr/local/cuda/bin), or, with TT_CUDA_PATH set,
by clang (TT_CUDA_CLANG, else clang++-16 or clang++ on the PATH) against the
CUDA toolkit in that folder: how the wheel is built, against the CUDA 12.5
that `.ci/cuda_toolchain.py` assembles from PyPI, so that the kernels need no
newer driver than TensorFlow 2.21 itself (docs/guides/gpu.md).  It needs a
TensorFlow built with CUDA (the `tensorflow` wheel, not `tensorflow-cpu`:
the library takes the CUDA runtime from TensorFlow's own
libtensorflow_framework.so.2, so it never links -lcudart).  Such a library
still loads and runs on machines without a GPU.
"""

import concurrent.futures
import glob
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension
from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
SOURCES = sorted(glob.glob(os.path.join("cc", "**", "*.cc"), recursive=True))
# The kernels' .cu files only: cc/gpu_harness/harness.cu is a program of
# its own (`make gpu-harness`), with a main().
CUDA_SOURCES = sorted(
    glob.glob(os.path.join("cc", "kernels", "**", "*.cu"), recursive=True)
)
# cc/gpu_emu (the CPU emulator of the CUDA runtime, for `make
# gpu-emu-check`) is not part of the library.
HEADERS = sorted(
    h
    for h in glob.glob(os.path.join("cc", "**", "*.h"), recursive=True)
    if not h.startswith(os.path.join("cc", "gpu_emu", ""))
)
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

# The .cu files include no TensorFlow header, only CUDA's and ours.  Cubins
# for Ampere (sm_80 A100, sm_86 RTX 30 / A10 / A40), Ada (sm_89 L4, L40,
# RTX 40) and Hopper (sm_90), and sm_90 PTX for newer GPUs; uncompressed,
# since whether an older CUDA runtime reads CUDA 13's default fatbin
# compression is untested.
NVCC_FLAGS = [
    "-std=c++17",
    "--expt-relaxed-constexpr",
    "-Xcompiler",
    "-fPIC",
    "-O3",
    "-DNDEBUG",
    "-gencode",
    "arch=compute_80,code=sm_80",
    "-gencode",
    "arch=compute_86,code=sm_86",
    "-gencode",
    "arch=compute_89,code=sm_89",
    "-gencode",
    "arch=compute_90,code=sm_90",
    "-gencode",
    "arch=compute_90,code=compute_90",
    "--compress-mode=none",
]
# The same with clang against TT_CUDA_PATH (its fatbinary writes the images
# uncompressed: .ci/cuda_toolchain.py).  clang-16 knows CUDA up to 11.8 and
# says so (-Wunknown-cuda-version); it emits PTX of ISA 7.8.
CLANG_CUDA_FLAGS = [
    "-std=c++17",
    "-x",
    "cuda",
    "-fPIC",
    "-O3",
    "-DNDEBUG",
    "--cuda-gpu-arch=sm_80",
    "--cuda-gpu-arch=sm_86",
    "--cuda-gpu-arch=sm_89",
    "--cuda-gpu-arch=sm_90",
    "--no-cuda-include-ptx=all",
    "--cuda-include-ptx=sm_90",
    "-Wno-unknown-cuda-version",
]


def _cuda_requested():
    value = os.environ.get("TT_CUDA", "0")
    if value not in ("0", "1", ""):
        raise SystemExit(f"TT_CUDA must be 0 or 1, got {value!r}")
    return value == "1"


def _clang_cuda(cuda_path):
    """The clang command for TT_CUDA_PATH=cuda_path, checked."""
    for sub in ("include/cuda_runtime.h", "bin/ptxas", "bin/fatbinary"):
        if not os.path.exists(os.path.join(cuda_path, sub)):
            raise SystemExit(
                f"TT_CUDA_PATH={cuda_path} is not a CUDA toolkit: it lacks {sub} "
                "(python3 .ci/cuda_toolchain.py DIR assembles one)"
            )
    candidates = [
        os.environ.get("TT_CUDA_CLANG"),
        shutil.which("clang++-16"),
        shutil.which("clang++"),
    ]
    for path in candidates:
        if path and shutil.which(path):
            return [shutil.which(path), f"--cuda-path={cuda_path}"]
    raise SystemExit(
        "TT_CUDA_PATH needs clang: set TT_CUDA_CLANG or put clang++-16 on the "
        "PATH (Debian: apt-get install clang-16)"
    )


def _nvcc():
    """The nvcc to use: NVCC, else on the PATH, else /usr/local/cuda/bin."""
    candidates = [
        os.environ.get("NVCC"),
        shutil.which("nvcc"),
        "/usr/local/cuda/bin/nvcc",
    ]
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise SystemExit(
        "TT_CUDA=1 needs nvcc: put it on the PATH or set NVCC to its path "
        "(looked on the PATH and in /usr/local/cuda/bin)"
    )


def _tf_flags():
    """(version, compile flags, link flags, built with CUDA) of the installed
    TensorFlow, asked in a child process whose log lines (CUDA probing) are
    not shown."""
    query = (
        "import json, tensorflow as tf; print(json.dumps([tf.__version__, "
        "tf.sysconfig.get_compile_flags(), tf.sysconfig.get_link_flags(), "
        "tf.test.is_built_with_cuda()]))"
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, "-c", query], capture_output=True, text=True, env=env
    )
    if result.returncode != 0:
        raise SystemExit(
            "building tf_transducer's ops needs the TensorFlow they will run "
            f"with, and {sys.executable} cannot import one. Install TensorFlow "
            "first, then build without isolation (pip downloads another "
            "TensorFlow into an isolated build): pip install "
            f"--no-build-isolation .\n{result.stderr[-2000:]}"
        )
    version, cflags, lflags, with_cuda = json.loads(
        result.stdout.strip().splitlines()[-1]
    )
    return (
        version,
        [*cflags, f'-DTF_TRANSDUCER_TF_VERSION="{version}"'],
        lflags,
        with_cuda,
    )


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
        tf_version, cflags, lflags, tf_with_cuda = _tf_flags()
        cxx = os.environ.get("CXX", "g++")
        out = self.get_ext_fullpath(ext.name)
        cuda = _cuda_requested()
        if cuda and not tf_with_cuda:
            raise SystemExit(
                f"TT_CUDA=1 needs a TensorFlow built with CUDA, but TensorFlow "
                f"{tf_version} here is not (tf.test.is_built_with_cuda() is "
                "False: is it tensorflow-cpu?); build without TT_CUDA"
            )
        if cuda:
            cuda_path = os.environ.get("TT_CUDA_PATH")
            if cuda_path:
                cuda_cmd = [*_clang_cuda(os.path.abspath(cuda_path)), *CLANG_CUDA_FLAGS]
            else:
                cuda_cmd = [_nvcc(), *NVCC_FLAGS]
            cflags = [*cflags, "-DGOOGLE_CUDA=1", "-DTF_TRANSDUCER_CUDA=1"]
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

        cuda_id = hashlib.sha1(" ".join(cuda_cmd if cuda else []).encode())

        def compile_cuda(src):
            obj = os.path.join(
                obj_dir,
                src.replace(os.sep, "_") + f".{cuda_id.hexdigest()[:10]}.o",
            )
            if os.path.exists(obj) and os.path.getmtime(obj) >= max(
                os.path.getmtime(src), newest_header
            ):
                return obj
            cmd = [*cuda_cmd, "-c", src, "-o", obj, "-I", ROOT]
            _run(cmd, f"compiling {src} ({os.path.basename(cuda_cmd[0])})")
            return obj

        jobs = max(1, os.cpu_count() or 1)
        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            objs = list(pool.map(compile_one, ext.sources))
            if cuda:
                objs += list(pool.map(compile_cuda, CUDA_SOURCES))
        cmd = [cxx, "-shared", *objs, "-o", out, *lflags]
        _run(cmd, f"linking {out}")


# Any TensorFlow 2 from this release on: Keras 3 is its default from 2.16.
TF_RANGE = ">=2.16,<3"
# The distributions that provide the `tensorflow` module.
TF_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tf-nightly")


def _installed_tensorflow():
    """(distribution name, version) of the installed TensorFlow, or None."""
    from importlib import metadata

    for name in TF_DISTRIBUTIONS:
        try:
            return name, metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def _dependencies():
    """The core dependencies.  A wheel (or an install from source) holds a
    library compiled against the TensorFlow found here, so it requires that
    exact release; the source archive accepts any TensorFlow 2.x, since it
    builds against whichever one the user has."""
    installed = _installed_tensorflow()
    if "sdist" in sys.argv or installed is None:
        tensorflow = f"tensorflow{TF_RANGE}"
    else:
        tensorflow = f"{installed[0]}=={installed[1]}"
    return [tensorflow, "numpy", "absl-py"]


setup(
    ext_modules=[Extension("tf_transducer._ops", sources=SOURCES)],
    cmdclass={"build_ext": BuildTfOps},
    install_requires=_dependencies(),
)
