# SPDX-License-Identifier: Apache-2.0
"""Lazy loading of the compiled op library, tf_transducer/_ops.so.

TF_TRANSDUCER_OPS_LIBRARY, when set, names another build of the library to
load instead (e.g. one built with TT_CUDA=1 elsewhere; `make test-cuda-build`
runs the tests on such a build).
"""

import ctypes
import functools
import logging
import os
import re
from typing import Any
from typing import NamedTuple

import tensorflow as tf

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBRARY_PATH = os.environ.get("TF_TRANSDUCER_OPS_LIBRARY") or os.path.join(
    _PACKAGE_DIR, "_ops.so"
)
REBUILD_COMMAND = "pip install --no-build-isolation -e .  (or: make build)"
# Written into the library by cc/common/build_info.cc.
_BUILD_MARKER = re.compile(rb"tf_transducer-built-for-tensorflow=([^\x00]+)\x00")
_DEVICES_MARKER = re.compile(rb"tf_transducer-devices=([a-z,]+)\x00")
_logger = logging.getLogger("tf_transducer")


class OpLibraryError(ImportError):
    """The compiled op library is missing or does not fit this TensorFlow."""


def built_for(path: str = LIBRARY_PATH) -> str | None:
    """The TensorFlow version the library at `path` was compiled against."""
    with open(path, "rb") as f:
        match = _BUILD_MARKER.search(f.read())
    return match.group(1).decode("ascii", "replace") if match else None


@functools.cache
def built_with_gpu_kernels(path: str = LIBRARY_PATH) -> bool:
    """Whether the library at `path` holds the CUDA kernels (TT_CUDA=1)."""
    if not os.path.exists(path):
        return False
    with open(path, "rb") as f:
        match = _DEVICES_MARKER.search(f.read())
    return match is not None and b"gpu" in match.group(1).split(b",")


@functools.cache
def gpu_visible() -> bool:
    return bool(tf.config.list_physical_devices("GPU"))


_noted_paths: set[str] = set()


def note_cpu_or_xla_path(xla: bool) -> None:
    """Logs once per process that a visible GPU is not running the fused kernels.

    That happens under XLA (the pure-TF path runs) or with a library built
    without CUDA (the CPU kernels run). Silent without a GPU.
    """
    if not gpu_visible():
        return
    if xla:
        path = "xla"
        message = (
            "tf_transducer: under XLA (jit_compile) the RNN-T losses and the "
            "MI recursion run their pure-TF path, since XLA cannot run custom "
            "ops; for the fused GPU kernels compile the model with "
            "jit_compile=False"
            + ("" if built_with_gpu_kernels() else " and build with TT_CUDA=1")
        )
    elif not built_with_gpu_kernels():
        path = "cpu"
        message = (
            "tf_transducer: the RNN-T losses and the MI recursion run their "
            "CPU kernels although a GPU is visible: this build has no GPU "
            f"kernels; rebuild with TT_CUDA=1 {REBUILD_COMMAND}"
        )
    else:
        return
    if path not in _noted_paths:
        _noted_paths.add(path)
        _logger.warning(message)


@functools.cache
def op_library(path: str = LIBRARY_PATH) -> Any:
    """Loads the op library once and returns its op module.

    Raises:
      OpLibraryError: the library is missing, was built for another
        TensorFlow, or fails to load; the message says how to rebuild it.
    """
    if not os.path.exists(path):
        raise OpLibraryError(
            f"The tf_transducer op library {path} has not been built. "
            f"Build it from the source tree with: {REBUILD_COMMAND}"
        )
    version = built_for(path)
    if version != tf.__version__:
        raise OpLibraryError(
            f"{path} was built for TensorFlow {version or '(unknown version)'}, "
            f"but TensorFlow {tf.__version__} is installed; a compiled op only "
            "loads into the TensorFlow it was built against. Rebuild it with: "
            f"{REBUILD_COMMAND}"
        )
    try:
        return tf.load_op_library(path)
    except (tf.errors.NotFoundError, OSError) as e:
        raise OpLibraryError(
            f"{path} (built for TensorFlow {version}) failed to load into "
            f"TensorFlow {tf.__version__}: {e}. Rebuild it with: {REBUILD_COMMAND}"
        ) from e


class CpuGemmPaths(NamedTuple):
    """The instruction paths of the fused joint's CPU matrix products."""

    active: str
    supported: tuple[str, ...]


@functools.cache
def cpu_gemm_paths() -> CpuGemmPaths:
    """Which instructions `rnnt_loss_joint` / `tdt_loss_joint` multiply with.

    The CPU kernels form each tile's logits (and their gradients) with their
    own matrix products, compiled for several instruction sets; the best one
    the CPU runs is picked when the library loads:
    "plain" (SSE2), "avx2" (AVX2 and FMA), "avx512" (AVX-512 F/VL/BW/DQ) or
    "avx512_bf16" (avx512, and bfloat16 inputs multiplied in bfloat16 with
    float32 sums by VDPBF16PS, as TensorFlow's own bfloat16 matmuls on such
    CPUs; every other path, and float16 inputs, multiply in float32).
    The environment variable TF_TRANSDUCER_CPU_GEMM, read when the library
    loads, forces one; a path this CPU lacks makes the joint ops fail with an
    error that names it.

    Returns:
      (active: the path the products take, supported: the paths this CPU
      runs, worst to best); fixed for the process, so read once.
    """
    op_library()  # loaded once, checked against this TensorFlow
    library = ctypes.CDLL(LIBRARY_PATH)
    names = []
    for symbol in ("TfTransducerCpuGemmPath", "TfTransducerCpuGemmPaths"):
        function = getattr(library, symbol)
        function.restype = ctypes.c_char_p
        names.append(function().decode("ascii"))
    return CpuGemmPaths(names[0], tuple(names[1].split(",")))
