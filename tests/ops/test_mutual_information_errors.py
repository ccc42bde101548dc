# SPDX-License-Identifier: Apache-2.0
"""Bad input to the MI recursion: clear errors that name the argument."""

import numpy as np
import pytest
import tensorflow as tf

import tf_transducer as tt
from tf_transducer.ops import _loader

IMPLEMENTATIONS = [tt.mutual_information_recursion, tt.mutual_information_recursion_tf]
IDS = ["op", "tf"]


def good(B=2, S=3, T=4, dtype=np.float32):
    return np.zeros((B, S, T + 1), dtype), np.zeros((B, S + 1, T), dtype)


@pytest.mark.parametrize("fn", IMPLEMENTATIONS, ids=IDS)
@pytest.mark.parametrize(
    "px,py,boundary,message",
    [
        (
            np.zeros((3, 5), np.float32),
            good()[1],
            None,
            r"px must have rank 3.*\(3, 5\)",
        ),
        (good()[0], np.zeros((2, 4, 4, 1), np.float32), None, "py must have rank 3"),
        (
            np.zeros((2, 3, 5), np.int32),
            good()[1],
            None,
            "px must be float32 or float64, got int32",
        ),
        (
            good()[0],
            good()[1].astype(np.float64),
            None,
            r"py must have the dtype of px \(float32\), got float64",
        ),
        (
            good()[0],
            np.zeros((3, 4, 4), np.float32),
            None,
            "px and py must have the same batch size",
        ),
        (
            good()[0],
            np.zeros((2, 5, 4), np.float32),
            None,
            "py must have S \\+ 1 = 4 rows",
        ),
        (
            np.zeros((2, 3, 7), np.float32),
            good()[1],
            None,
            r"px must have T \+ 1 = 5 \(regular\) or T = 4",
        ),
        (*good(B=0), None, "B must be positive, got B = 0"),
        (*good(T=0), None, "T must be positive, got T = 0"),
        (
            *good(),
            np.zeros((2, 3), np.int64),
            "boundary must have shape \\[B, 4\\], got \\(2, 3\\)",
        ),
        (
            *good(),
            np.zeros((3, 4), np.int64),
            "boundary must have shape \\[B, 4\\] with B = 2",
        ),
        (
            *good(),
            np.zeros((2, 4), np.float32),
            "boundary must be an integer tensor, got float32",
        ),
    ],
)
def test_static_errors_are_value_errors(fn, px, py, boundary, message):
    with pytest.raises(ValueError, match=message):
        fn(px, py, boundary)


# Run time: the same checks when only the values (or dynamic shapes) show them.
RUNTIME_CASES = [
    ([[0, 0, 3, 4], [0, 0, 4, 4]], None, "boundary"),  # s_end > S
    ([[0, 0, 3, 4], [2, 0, 1, 4]], None, "boundary"),  # s_begin > s_end
    ([[0, 0, 3, 5], [0, 0, 3, 4]], None, "boundary"),  # t_end > T
    ([[-1, 0, 3, 4], [0, 0, 3, 4]], None, "boundary"),  # negative
    (None, ("px", np.nan), "px must be finite or -inf"),
    (None, ("py", np.inf), "py must be finite or -inf"),
]


@pytest.mark.parametrize("boundary,poison,message", RUNTIME_CASES)
def test_op_runtime_errors_name_the_argument(boundary, poison, message):
    px, py = good()
    if poison:
        {"px": px, "py": py}[poison[0]][1, 2, 3] = poison[1]
    with pytest.raises(tf.errors.InvalidArgumentError, match=message) as info:
        tt.mutual_information_recursion(px, py, boundary)
    if boundary is not None:
        assert "must satisfy 0 <= s_begin <= s_end <= S = 3" in str(info.value)
    else:
        assert f"at {poison[0]}[1, 2, 3] of shape [2," in str(info.value)


@pytest.mark.parametrize("boundary,poison,message", RUNTIME_CASES)
def test_tf_path_runtime_errors_name_the_argument(boundary, poison, message):
    px, py = good()
    if poison:
        {"px": px, "py": py}[poison[0]][1, 2, 3] = poison[1]
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        tt.mutual_information_recursion_tf(px, py, boundary)


def test_op_checks_shapes_that_are_unknown_while_tracing():
    spec = tf.TensorSpec([None, None, None], tf.float32)
    fn = tf.function(tt.mutual_information_recursion, input_signature=[spec, spec])
    with pytest.raises(tf.errors.InvalidArgumentError, match="py must have shape"):
        fn(np.zeros((2, 3, 5), np.float32), np.zeros((2, 3, 4), np.float32))
    with pytest.raises(tf.errors.InvalidArgumentError, match="T must be positive"):
        fn(np.zeros((2, 3, 1), np.float32), np.zeros((2, 4, 0), np.float32))
    with pytest.raises(tf.errors.InvalidArgumentError, match="empty batch"):
        fn(np.zeros((0, 3, 5), np.float32), np.zeros((0, 4, 4), np.float32))


def test_missing_library_names_the_rebuild_command(tmp_path):
    path = str(tmp_path / "_ops.so")
    with pytest.raises(tt.OpLibraryError, match="has not been built.*pip install"):
        _loader.op_library(path)


def test_library_built_for_another_tensorflow_is_refused(tmp_path):
    path = tmp_path / "_ops.so"
    path.write_bytes(b"\x7fELF...tf_transducer-built-for-tensorflow=2.15.1\x00...")
    with pytest.raises(
        tt.OpLibraryError, match=r"built for TensorFlow 2\.15\.1, but TensorFlow 2\.21"
    ) as info:
        _loader.op_library(str(path))
    assert _loader.REBUILD_COMMAND in str(info.value)


def test_installed_library_records_this_tensorflow():
    assert _loader.built_for() == tf.__version__
