# SPDX-License-Identifier: Apache-2.0
"""TensorFlow's and LiteRT's informational output kept off the console."""

import contextlib
import logging
import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

import tensorflow as tf
from absl import logging as absl_logging

# What TensorFlow and LiteRT print to stderr while saving, converting and
# loading programs that asks nothing of the user: glog-style INFO lines (C++
# or absl's Python handler), C++ WARNING lines (the converter's about its own
# options; what TF_CPP_MIN_LOG_LEVEL=2 hides), LiteRT's INFO lines, the int8
# calibrator's settings and absl's note on its first C++ line.
_CHATTER = re.compile(
    rb"I\d{4} [\d:. ]+\d+ \S+:\d+\] "
    rb"|W\d{4} [\d:. ]+\d+ \S+\.(?:cc|h):\d+\] "
    rb"|INFO: |fully_quantize: |WARNING: All log messages before absl::"
)
_QUIET_LOCK = threading.Lock()
_quiet: dict[str, Any] = {"depth": 0}  # the state of the outermost block


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]


def _quiet_begin() -> None:
    """Quiets the loggers and captures stderr (the outermost block)."""
    with _QUIET_LOCK:
        if not _quiet["depth"]:
            loggers = [tf.get_logger(), absl_logging.get_absl_logger()]
            _quiet["levels"] = [(logger, logger.level) for logger in loggers]
            for logger in loggers:
                logger.setLevel(max(logger.getEffectiveLevel(), logging.WARNING))
            try:
                saved: int | None = os.dup(2)
            except OSError:  # no stderr: nothing to filter
                saved = None
            if saved is not None:
                sys.stderr.flush()
                _quiet["file"] = tempfile.TemporaryFile()
                os.dup2(_quiet["file"].fileno(), 2)
            _quiet.update(saved=saved, failed=False)
        _quiet["depth"] += 1


def _quiet_end(failed: bool) -> None:
    """Undoes `_quiet_begin` at the outermost block's end.

    The captured lines are written back: all of them when a block failed,
    else all but `_CHATTER`.
    """
    with _QUIET_LOCK:
        _quiet["failed"] |= failed
        _quiet["depth"] -= 1
        if _quiet["depth"]:
            return
        for logger, level in _quiet.pop("levels"):
            logger.setLevel(level)
        saved = _quiet.pop("saved")
        if saved is None:
            return
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        with _quiet.pop("file") as capture:
            capture.seek(0)
            lines = capture.read().splitlines(keepends=True)
        if not _quiet["failed"]:
            lines = [line for line in lines if not _CHATTER.match(line)]
        _write_all(2, b"".join(lines))


@contextlib.contextmanager
def quiet_tensorflow() -> Iterator[None]:
    """TensorFlow's and LiteRT's informational output left out of the block.

    The "tensorflow" and absl Python loggers are raised to WARNING (at
    least). What the process writes to stderr (file descriptor 2: also the
    C++ logs, which TF_CPP_MIN_LOG_LEVEL set after TensorFlow's import no
    longer changes) goes to a temporary file and is written back at the
    end, less the lines of `_CHATTER`; all of it when the block raises (the
    converter's diagnostics). Blocks nest, in one thread or several: the
    loggers and stderr are restored at the end of the outermost one.
    """
    _quiet_begin()
    failed = True
    try:
        yield
        failed = False
    finally:
        _quiet_end(failed)
