# SPDX-License-Identifier: Apache-2.0
"""Value checks of the lattice package, naming the argument in their errors.

As in `tf_transducer.ops` (which this package does not import): eagerly a
check raises InvalidArgumentError with the first bad value and its index;
in a graph it is a `tf.debugging.Assert` op; under XLA, which cannot run
assertions, nothing is checked.
"""

from typing import Any

import tensorflow as tf
from tensorflow.python.framework import ops as tf_ops
from tensorflow.python.ops import control_flow_util


def in_xla() -> bool:
    """True while tracing a function that XLA will compile (jit_compile=True)."""
    if tf.executing_eagerly():
        return False
    return control_flow_util.GraphOrParentsInXlaContext(tf_ops.get_default_graph())


def refuse(bad: tf.Tensor, values: tf.Tensor, message: str) -> Any:
    """InvalidArgumentError "message; got <value> at index <index>" where bad holds.

    Args:
      bad: bool, the shape of values.
      values: what is shown of the first bad entry.
      message: names the argument and what it must be.

    Returns:
      The assertion op in a graph (for `after`), else None.
    """
    if tf.executing_eagerly():
        where = tf.where(bad)
        if where.shape[0]:
            index = where[0].numpy().tolist()
            value = values.numpy()[tuple(index)]
            raise tf.errors.InvalidArgumentError(
                None, None, f"{message}; got {value} at index {index}"
            )
        return None
    if in_xla():
        return None
    index = tf.where(bad)[:1]
    return tf.debugging.Assert(
        ~tf.reduce_any(bad),
        [f"{message}; got", tf.gather_nd(values, index), "at index", index],
        summarize=16,
    )


def after(*checks: Any) -> Any:
    """A control-dependency context on the checks that are ops (None skipped)."""
    return tf.control_dependencies([c for c in checks if c is not None])
