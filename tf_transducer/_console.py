# SPDX-License-Identifier: Apache-2.0
"""TensorFlow's and LiteRT's log chatter kept off the command lines' consoles.

TensorFlow 2.21 prints, on import and on its first ops, C++ log lines that
ask nothing of a user (CUDA drivers looked for, oneDNN's and
cpu_feature_guard's notes on instructions, absl's note on its own
initialisation). Most are written before absl's logging is initialised, so
TF_CPP_MIN_LOG_LEVEL no longer hides them. For the package's command lines
(the console scripts and `python -m tf_transducer.cli...`),
`quiet_tensorflow_import`, called first thing by `tf_transducer/__init__.py`,
sets TF_CPP_MIN_LOG_LEVEL=2 and passes the process's standard error (file
descriptor 2, which the C++ code writes to) through a filter that drops
those lines (`CHATTER`) and forwards everything else as it comes. Nothing
is changed when the user set TF_CPP_MIN_LOG_LEVEL, or when TensorFlow was
imported already, or in a library user's own program.
"""

import atexit
import os
import re
import sys
import threading

CONSOLE_SCRIPTS = ("tf-transducer", "tf-transducer-deepspeech", "tf-transducer-launch")
CLI_PACKAGE = "tf_transducer.cli"
# Lines (bytes, from their start) that ask nothing of the user: glog-style
# INFO and WARNING lines, absl's note on its first line, cpu_feature_guard's
# continuation line, LiteRT's INFO lines, the int8 calibrator's settings,
# and the ERROR lines of a machine without a GPU (cuInit) or without
# AVX-512 (oneDNN's bool kernels) or of plugins registered twice.
CHATTER = re.compile(
    rb"[IW]\d{4} [\d:. ]+\d+ \S+:\d+\] "
    rb"|E\d{4} [\d:. ]+\d+ \S+:\d+\] (?:failed call to cuInit|oneDNN supports DT_"
    rb"|Unable to register cu\w+ factory)"
    rb"|INFO: |fully_quantize: |WARNING: All log messages before absl::"
    rb"|To enable the following instructions: "
)


def started_as_command_line(argv: list[str] | None = None, script: str = "") -> bool:
    """Whether this process is a console script or `python -m tf_transducer.cli...`."""
    argv = list(getattr(sys, "orig_argv", sys.argv) if argv is None else argv)
    script = script or (sys.argv[0] if sys.argv else "")
    if os.path.basename(script) in CONSOLE_SCRIPTS:
        return True
    return any(
        flag == "-m" and module.startswith(CLI_PACKAGE)
        for flag, module in zip(argv, argv[1:], strict=False)
    )


class StderrFilter:
    """File descriptor 2 through a pipe; a thread forwards all but CHATTER lines."""

    def __init__(self) -> None:
        self.saved = os.dup(2)
        read, write = os.pipe()
        sys.stderr.flush()
        os.dup2(write, 2)
        os.close(write)
        self.read = read
        self.thread = threading.Thread(target=self._forward, daemon=True)
        self.thread.start()

    def _forward(self) -> None:
        pending = b""
        while True:
            data = os.read(self.read, 65536)
            if not data:
                break
            lines = (pending + data).split(b"\n")
            pending = lines.pop()
            kept = [line + b"\n" for line in lines if not CHATTER.match(line)]
            _write_all(self.saved, b"".join(kept))
        if pending and not CHATTER.match(pending):
            _write_all(self.saved, pending)
        os.close(self.read)

    def stop(self) -> None:
        """Restores fd 2 and forwards what is left (at exit)."""
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os.dup2(self.saved, 2)  # the pipe's last writer closes: the thread ends
        self.thread.join(timeout=5)


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]


def quiet_tensorflow_import() -> None:
    """For a command line: TF_CPP_MIN_LOG_LEVEL=2 and stderr's chatter filtered."""
    if "tensorflow" in sys.modules or "TF_CPP_MIN_LOG_LEVEL" in os.environ:
        return
    if not started_as_command_line():
        return
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    try:
        stderr_filter = StderrFilter()
    except OSError:  # no stderr to filter
        return
    atexit.register(stderr_filter.stop)
