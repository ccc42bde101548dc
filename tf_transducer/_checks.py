# SPDX-License-Identifier: Apache-2.0
"""The argument checks every package shares, naming the argument in their errors.

A bottom module, as `_optional`: it imports nothing else of tf_transducer,
and `ops`, `lattice`, `layers`, `losses`, `models`, `decoding`, ... all
import it. Static checks raise ValueError; value checks raise
InvalidArgumentError.

Value checks (`require`, `refuse`) run eagerly as plain Python (the message
holds the offending values), in a graph as `tf.debugging.Assert` ops, and
not at all under XLA, which cannot run assertions (`in_xla_context`).
"""

import math
import numbers
from typing import Any
from typing import TypeAlias

import tensorflow as tf
from tensorflow.python.framework import ops as tf_ops
from tensorflow.python.ops import control_flow_util

TensorLike: TypeAlias = tf.types.experimental.TensorLike
FLOAT_DTYPES = (tf.float16, tf.bfloat16, tf.float32, tf.float64)


def in_xla_context() -> bool:
    """True while tracing a function that XLA will compile (jit_compile=True).

    XLA cannot run custom ops or assertions, so callers switch to pure-TF
    code there.
    """
    if tf.executing_eagerly():
        return False
    return control_flow_util.GraphOrParentsInXlaContext(tf_ops.get_default_graph())


def require(condition: TensorLike, template: str, *values: Any) -> Any:
    """Checks a boolean scalar tensor; raises InvalidArgumentError when false.

    `template` is one sentence with a `{}` per value, naming the argument:
    eagerly the values are formatted into it; in a graph they are printed
    beside its pieces. Returns the assertion op in a graph (auto control
    dependencies run it inside a tf.function), else None; under XLA nothing
    is checked.
    """
    if tf.executing_eagerly():
        if not bool(condition):
            shown = [_show(v) for v in values]
            raise tf.errors.InvalidArgumentError(None, None, template.format(*shown))
        return None
    if in_xla_context():
        return None
    pieces = template.split("{}")
    data = [pieces[0]]
    for value, piece in zip(values, pieces[1:], strict=True):
        data += [value, piece] if piece else [value]
    return tf.debugging.Assert(condition, data, summarize=16)


def after(*checks: Any) -> Any:
    """A control-dependency context on the assertion ops among the checks' results.

    None results (checked eagerly already, or nothing to check under XLA) are
    skipped: what is computed inside runs after the checks in a graph.
    """
    return tf.control_dependencies([c for c in checks if c is not None])


def _show(value: Any) -> str:
    value = value.numpy() if hasattr(value, "numpy") else value
    if hasattr(value, "tolist"):
        value = value.tolist()
    while isinstance(value, list) and len(value) == 1:
        value = value[0]  # first_bad's single value or index
    return str(value)


def first_bad(bad: tf.Tensor, values: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """(the first value where `bad` holds, its index) for messages.

    Under XLA, which checks nothing, zeros (tf.where's size is
    data-dependent, which XLA cannot compile).
    """
    if in_xla_context():
        zero = tf.zeros([1, len(bad.shape)], tf.int64)
        return tf.zeros([1], values.dtype), zero
    index = tf.where(bad)[:1]
    return tf.gather_nd(values, index), index


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
    if in_xla_context():
        return None
    index = tf.where(bad)[:1]
    return tf.debugging.Assert(
        ~tf.reduce_any(bad),
        [f"{message}; got", tf.gather_nd(values, index), "at index", index],
        summarize=16,
    )


def integer_tensor(
    x: TensorLike, name: str, rank: int | None = None, shape_doc: str = ""
) -> tf.Tensor:
    """x as an int64 tensor.

    Raises ValueError for a float or other dtype, or a rank other than `rank`.
    """
    x = tf.convert_to_tensor(x, name=name)
    if not x.dtype.is_integer:
        raise ValueError(f"{name} must be an integer tensor, got {x.dtype.name}")
    if rank is not None and x.shape.rank != rank:
        doc = f" {shape_doc}" if shape_doc else ""
        raise ValueError(f"{name} must have rank {rank}{doc}, got shape {x.shape}")
    return tf.cast(x, tf.int64)


def float_tensor(x: TensorLike, name: str, rank: int, shape_doc: str) -> tf.Tensor:
    """x as a float tensor of `rank` (any float dtype); ValueError otherwise."""
    x = tf.convert_to_tensor(x, name=name)
    if x.dtype not in FLOAT_DTYPES:
        raise ValueError(f"{name} must be a float tensor, got {x.dtype.name}")
    if x.shape.rank != rank:
        raise ValueError(
            f"{name} must have rank {rank} {shape_doc}, got shape {x.shape}"
        )
    return x


def float_values(x: TensorLike, name: str, hint: str = "") -> tf.Tensor:
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


def real_number(name: str, value: Any, minimum: float | None = None) -> float:
    """value as a Python float; ValueError unless a finite real >= minimum."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum:g}, got {value:g}")
    return value


def clamp_value(clamp: Any) -> float:
    """The gradient clamp as the ops take it: > 0 clamps, -1.0 clamps nothing.

    As torchaudio, a clamp <= 0 means no clamping; so does +inf (no bound).
    NaN is a ValueError.
    """
    if isinstance(clamp, bool) or not isinstance(clamp, numbers.Real):
        raise ValueError(f"clamp must be a real number, got {clamp!r}")
    clamp = float(clamp)
    if math.isnan(clamp):
        raise ValueError("clamp must be a number (> 0 to clamp, else none), got nan")
    return clamp if 0 < clamp < math.inf else -1.0


def finite_or_neg_inf(x: tf.Tensor, name: str, neg_inf: bool = True) -> Any:
    """A check that x holds no NaN or +inf (-inf is a legal log-weight).

    With neg_inf=False, -inf is refused too (probabilities, occupations).
    The first offending value and its index, for the message, are looked for
    only when there is one.
    """
    if in_xla_context():
        return None
    # x < inf is false for NaN and +inf alone.
    legal = x < float("inf") if neg_inf else tf.math.is_finite(x)
    ok = tf.reduce_all(legal)
    what = "finite or -inf" if neg_inf else "finite"
    template = f"{name} must be {what}; got {{}} at index {{}}"
    if tf.executing_eagerly():
        return None if bool(ok) else require(ok, template, *first_bad(~legal, x))

    def nothing():
        return tf.zeros([1], x.dtype), tf.zeros([1, tf.rank(x)], tf.int64)

    value, index = tf.cond(ok, nothing, lambda: first_bad(~legal, x))
    return require(ok, template, value, index)


def check_positive(name: str, value: Any, kind: Any = (int, float)) -> None:
    """ValueError naming `name` unless value is a positive number of `kind`."""
    if not isinstance(value, kind) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")


def check_non_negative_int(name: str, value: Any) -> None:
    """ValueError naming `name` unless value is an int >= 0."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{name} must be an int >= 0, got {value!r}")


def check_rate(name: str, value: Any) -> None:
    """ValueError naming `name` unless value is a real number in [0, 1)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or value < 0  # (numbers.Real declares < and <=, not >=)
        or not value < 1
    ):
        raise ValueError(f"{name} must lie in [0, 1), got {value!r}")


def resolve_lengths(x: TensorLike, lengths: Any, name: str = "lengths") -> tf.Tensor:
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
    with after(*checks):
        return tf.identity(lengths)


def finite_within(x: tf.Tensor, lengths: tf.Tensor, name: str) -> tf.Tensor:
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
    check = refuse(
        bad,
        x,
        f"{name} must be finite within its lengths (padding after them may hold "
        "anything)",
    )
    with after(check):
        return tf.identity(x)


def with_attributes(config: dict[str, Any], obj: Any, *names: str) -> dict[str, Any]:
    """A Keras config updated with obj's attributes `names` (a get_config's tail)."""
    return {**config, **{name: getattr(obj, name) for name in names}}
