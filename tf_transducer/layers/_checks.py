# SPDX-License-Identifier: Apache-2.0
"""What the layers share: argument checks, lengths, output shapes and specs."""

import keras
import tensorflow as tf

from tf_transducer.ops._validation import after, first_bad, in_xla_context, require


def resolve_lengths(x, lengths, name="lengths"):
    """int32 [B] lengths along axis 1 of x; all of axis 1 when None.

    Lengths may be any integer tensor, array or list. Raises ValueError for
    a float dtype or a rank other than 1, and (InvalidArgumentError) when
    their count differs from x's batch or a value lies outside [0, x's
    axis 1]; the message names the argument.
    """
    if lengths is None:
        return tf.fill(tf.shape(x)[:1], tf.shape(x)[1])
    lengths = tf.convert_to_tensor(lengths)
    if not lengths.dtype.is_integer:
        raise ValueError(f"{name} must be integers, got dtype {lengths.dtype.name}")
    if lengths.shape.rank != 1:
        raise ValueError(f"{name} must be [B], got shape {lengths.shape}")
    if None not in (lengths.shape[0], x.shape[0]) and lengths.shape[0] != x.shape[0]:
        raise ValueError(
            f"{name} has {lengths.shape[0]} entries for a batch of {x.shape[0]}"
        )
    lengths = tf.cast(lengths, tf.int32)
    size = tf.shape(x)[1]
    bad = (lengths < 0) | (lengths > size)
    value, index = first_bad(bad, lengths)
    checks = [
        require(
            tf.equal(tf.size(lengths), tf.shape(x)[0]),
            f"{name} has {{}} entries for a batch of {{}}",
            tf.size(lengths),
            tf.shape(x)[0],
        ),
        require(
            ~tf.reduce_any(bad),
            f"{name} must lie in [0, {{}}] (the padded length); got {{}} at index {{}}",
            size,
            value,
            index,
        ),
    ]
    with tf.control_dependencies([c for c in checks if c is not None]):
        return tf.identity(lengths)


def float_values(x, name, hint=""):
    """x as a tensor of a float dtype; ValueError naming `name` otherwise.

    The layers compute in float32: integer (or bool, complex, string) values
    are refused rather than read as floats; `hint` says how to convert them.
    """
    x = tf.convert_to_tensor(x)
    if not x.dtype.is_floating:
        raise ValueError(
            f"{name} must be float32 (or another float dtype), got {x.dtype.name}{hint}"
        )
    return x


def finite_within(x, lengths, name):
    """x, after checking that its first lengths[b] entries along axis 1 are finite.

    Padding (axis 1 at and after lengths[b]) may hold anything. NaN or inf
    within the lengths raise InvalidArgumentError naming `name`, the value
    and its index (eagerly; a `tf.debugging.Assert` in a graph; unchecked
    under XLA).
    """
    if in_xla_context():
        return x
    valid = tf.sequence_mask(lengths, tf.shape(x)[1])
    valid = tf.reshape(valid, tf.concat([tf.shape(valid), [1] * (x.shape.rank - 2)], 0))
    bad = tf.logical_and(~tf.math.is_finite(x), valid)
    value, index = first_bad(bad, x)
    check = require(
        ~tf.reduce_any(bad),
        f"{name} must be finite within its lengths (padding after them may "
        "hold anything); got {} at index {}",
        value,
        index,
    )
    with after(check):
        return tf.identity(x)


def check_positive(name, value, kind=(int, float)):
    if not isinstance(value, kind) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")


def check_non_negative_int(name, value):
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{name} must be an int >= 0, got {value!r}")


class ListLengths:
    """Mixin for (values, lengths) layers: lengths may be a Python list or tuple.

    Keras takes only tensors as positional arguments.
    """

    def __call__(self, values, *args, **kwargs):
        if args and isinstance(args[0], (list, tuple)):
            args = (tf.convert_to_tensor(args[0]), *args[1:])
        if isinstance(kwargs.get("lengths"), (list, tuple)):
            kwargs["lengths"] = tf.convert_to_tensor(kwargs["lengths"])
        return super().__call__(values, *args, **kwargs)


class TracedOutputSpec:
    """Mixin: symbolic calls trace `call`, though the layer has compute_output_shape.

    Keras would otherwise make the symbolic outputs from compute_output_shape:
    all in the compute dtype (int32 lengths as floats), and calling it with
    keywords named after `call`'s arguments, where a layer without a `build`
    of its own must take `input_shape` (what Keras's summary passes it).
    """

    def compute_output_spec(self, *args, **kwargs):
        return keras.Operation.compute_output_spec(self, *args, **kwargs)


def ceil_div(size, divisor):
    """ceil(size / divisor) of a static dimension; None stays None."""
    return None if size is None else -(-size // divisor)
