# SPDX-License-Identifier: Apache-2.0
"""Time loops for the lattices: scans and folds that also take no steps.

A loop that stacks its outputs cannot stack none of them while their shape
is unknown (a graph traced with unknown dimensions and run on T = 0): these
run their loop only when there are steps. Elements are time-major [T, ...].
"""

from collections.abc import Callable
from typing import Any

import tensorflow as tf

from tf_transducer._checks import in_xla_context


def map_leaves(fn: Callable[..., Any], *values: Any) -> Any:
    """fn over the leaves of nested values (`tf.nest.map_structure`)."""
    return tf.nest.map_structure(fn, *values)


def time_major(x: Any) -> Any:
    """[B, T, ...] -> [T, B, ...] for every leaf."""
    return map_leaves(
        lambda v: tf.transpose(v, [1, 0] + list(range(2, v.shape.rank))), x
    )


def if_steps(
    steps: int | tf.Tensor, some: Callable[[], Any], none: Callable[[], Any]
) -> Any:
    """some() when steps > 0, else none(): a tf.cond unless steps is known.

    A loop that stacks its outputs cannot stack none of them while their
    shape is unknown (a graph traced with unknown dimensions and run on
    T = 0), so the loops run only when there are steps. XLA, which knows
    every shape when it runs, always takes some().
    """
    if isinstance(steps, int):
        return some() if steps > 0 else none()
    if in_xla_context():
        return some()
    return tf.cond(steps > 0, some, none)


def steps_of(elems: Any) -> int | tf.Tensor:
    """The number of steps of time-major elems (their first axis): static if known."""
    first = tf.nest.flatten(elems)[0]
    return first.shape[0] if first.shape[0] is not None else tf.shape(first)[0]


def scan(
    fn: Callable[[Any, Any], Any], elems: Any, initializer: Any, reverse: bool = False
) -> Any:
    """tf.scan, also over no steps when the shapes are unknown: [T, ...] each."""
    return if_steps(
        steps_of(elems),
        lambda: tf.scan(fn, elems, initializer=initializer, reverse=reverse),
        lambda: map_leaves(lambda x: tf.zeros_like(x)[tf.newaxis][:0], initializer),
    )


def reverse_fold(
    step: Callable[[Any, Any], tuple[Any, tf.Tensor]],
    elems: Any,
    init: Any,
    out_spec: tf.TensorSpec,
    out_shape: tf.Tensor,
) -> tuple[Any, tf.Tensor]:
    """Runs step(carry, x) -> (carry, y) over time-major elems, last to first.

    Returns (final carry, the ys stacked in time order). out_spec: a
    tf.TensorSpec of one y; out_shape: its shape as a tensor.
    """
    total = steps_of(elems)

    def fold():
        outputs = tf.TensorArray(
            out_spec.dtype, size=total, element_shape=out_spec.shape
        )

        def body(t, carry, outputs):
            x = tf.nest.map_structure(lambda e: e[t], elems)
            carry, y = step(carry, x)
            return t - 1, carry, outputs.write(t, y)

        _, carry, outputs = tf.while_loop(
            lambda t, *_: t >= 0, body, (total - 1, init, outputs)
        )
        return carry, outputs.stack()

    empty = tf.zeros(tf.concat([[0], out_shape], 0), out_spec.dtype)
    return if_steps(total, fold, lambda: (init, empty))
