# SPDX-License-Identifier: Apache-2.0
"""The command lines start without TensorFlow's chatter and keep real errors."""

import os
import subprocess
import sys

import pytest

from tf_transducer import _console


@pytest.mark.parametrize(
    "argv, script, expected",
    [
        (["python", "-m", "tf_transducer.cli.transducer", "train"], "-m", True),
        (["python", "-m", "tf_transducer.cli.deepspeech"], "-m", True),
        (["/venv/bin/tf-transducer", "train"], "/venv/bin/tf-transducer", True),
        (["python", "train.py"], "train.py", False),
        (["python", "-m", "pytest", "tests"], "-m", False),
        (["python", "-c", "import tf_transducer"], "-c", False),
    ],
)
def test_command_lines_are_recognised(argv, script, expected):
    assert _console.started_as_command_line(argv, script) is expected


def test_chatter_is_recognised_and_the_rest_is_not():
    chatter = [
        b"I0000 00:00:1796528203.966221   31095 port.cc:153] oneDNN custom operations",
        b"W0000 00:00:1796528203.1 2 cuda_executor.cc:1] x",
        b"E0000 00:00:1796527194.202909    9271 cuda_platform.cc:52] failed call to "
        b"cuInit: INTERNAL",
        b"WARNING: All log messages before absl::InitializeLog() is called are written",
        b"To enable the following instructions: AVX2 AVX512F FMA, in other operations",
        b"INFO: Created TensorFlow Lite XNNPACK delegate for CPU.",
    ]
    kept = [
        b"E0000 00:00:1.0 7 op_kernel.cc:9] OP_REQUIRES failed: bad shape",
        b"error: --checkpoint_dir is needed to train",
        b"Traceback (most recent call last):",
    ]
    assert all(_console.CHATTER.match(line) for line in chatter)
    assert not any(_console.CHATTER.match(line) for line in kept)


def _env():
    env = dict(os.environ)
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    return env


def test_help_and_errors_without_tensorflow_chatter(tmp_path):
    cli = [sys.executable, "-m", "tf_transducer.cli.transducer"]
    result = subprocess.run([*cli, "--help"], capture_output=True, text=True,
                            env=_env(), cwd=tmp_path, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "--train_batch_size" in result.stdout
    assert "I0000" not in result.stderr and "absl::InitializeLog" not in result.stderr
    result = subprocess.run([*cli, "train", "--train_files=x.csv"],
                            capture_output=True, text=True, env=_env(), cwd=tmp_path,
                            timeout=300)  # fmt: skip
    assert result.returncode == 1
    assert "error: --checkpoint_dir is needed to train" in result.stderr
    assert "I0000" not in result.stderr and "cuInit" not in result.stderr


def test_the_filter_forwards_what_is_not_chatter_in_order():
    # The module alone (importing the package would import TensorFlow first).
    code = (
        "import importlib.util, os, sys\n"
        f"spec = importlib.util.spec_from_file_location('c', {_console.__file__!r})\n"
        "console = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(console)\n"
        "f = console.StderrFilter()\n"
        "os.write(2, b'I0000 00:00:1.0 1 x.cc:1] noise\\nkept 1\\n')\n"
        "print('kept 2', file=sys.stderr, flush=True)\n"
        "os.write(2, b'INFO: Created TensorFlow Lite XNNPACK delegate\\nlast')\n"
        "f.stop()\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True,
                            timeout=120)  # fmt: skip
    assert result.stderr == b"kept 1\nkept 2\nlast"
