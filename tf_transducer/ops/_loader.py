"""Lazy loading of the compiled op library, tf_transducer/_ops.so."""

import functools
import os
import re

import tensorflow as tf

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBRARY_PATH = os.path.join(_PACKAGE_DIR, "_ops.so")
REBUILD_COMMAND = "pip install --no-build-isolation -e .  (or: make build)"
# Written into the library by cc/common/build_info.cc.
_BUILD_MARKER = re.compile(rb"tf_transducer-built-for-tensorflow=([^\x00]+)\x00")


class OpLibraryError(ImportError):
    """The compiled op library is missing or does not fit this TensorFlow."""


def built_for(path: str = LIBRARY_PATH) -> str | None:
    """The TensorFlow version the library at `path` was compiled against."""
    with open(path, "rb") as f:
        match = _BUILD_MARKER.search(f.read())
    return match.group(1).decode("ascii", "replace") if match else None


@functools.cache
def op_library(path: str = LIBRARY_PATH):
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
