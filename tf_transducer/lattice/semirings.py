# SPDX-License-Identifier: Apache-2.0
"""Semirings over TensorFlow tensors (the `last.semirings` API).

A semiring value is a tensor, or for the composite semirings (`Cartesian`,
`Expectation`) a tuple of tensors of one common shape. Binary operations
broadcast; reductions take one int axis in [-rank, rank) and accept 0-sized
axes (the sum of nothing is the semiring zero, the product the one).

Gradients at +-inf, for `Log` plus / sum (a log-sum-exp over operands x_i):

  | operands                         | value | gradient of each x_i        |
  | -------------------------------- | ----- | --------------------------- |
  | all finite                       | lse   | softmax(x)_i                |
  | some -inf, the rest finite       | lse   | 0 for -inf, softmax for rest |
  | all -inf                         | -inf  | 0 (no NaN)                  |
  | any +inf                         | +inf  | NaN for +inf, 0 for others  |

-inf is the ordinary "no path" weight (`logaddexp(-inf, -inf + w)` must not
send NaN to w); +inf only comes from an overflow, so it stays visible.

`MaxTropical` plus / sum send the whole gradient to exactly one operand: the
largest, the first one (lowest index; `a` in `plus(a, b)`) on a tie, so the
gradient of a max-tropical path sum marks exactly one path.
"""

from collections.abc import Callable
from typing import Any

import tensorflow as tf

from tf_transducer._checks import TensorLike


class Semiring:
    """The semiring interface: zeros, ones, times, plus, sum, prod.

    Subclasses leave out what they cannot do (e.g. `Expectation.prod`).
    """

    def zeros(self, shape: TensorLike, dtype: Any = None) -> Any:
        """The semiring zero in `shape` (dtype: one dtype, or one per leaf)."""
        raise NotImplementedError

    def ones(self, shape: TensorLike, dtype: Any = None) -> Any:
        """The semiring one in `shape`."""
        raise NotImplementedError

    def times(self, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def plus(self, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def prod(self, a: Any, axis: int) -> Any:
        """Semiring product along one axis."""
        raise NotImplementedError

    def sum(self, a: Any, axis: int) -> Any:
        """Semiring sum along one axis."""
        raise NotImplementedError


def _check_axis(a: tf.Tensor, axis: int) -> int:
    if not isinstance(axis, int):
        raise ValueError(f"axis must be an int, got {axis!r}")
    rank = a.shape.rank
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} is out of range for a value of shape {a.shape}")
    return axis % rank


def _dtype(dtype: Any) -> tf.DType:
    return tf.float32 if dtype is None else tf.as_dtype(dtype)


def _broadcast(a: TensorLike, b: TensorLike) -> tuple[tf.Tensor, tf.Tensor]:
    a, b = tf.convert_to_tensor(a), tf.convert_to_tensor(b)
    shape = tf.broadcast_dynamic_shape(tf.shape(a), tf.shape(b))
    return tf.broadcast_to(a, shape), tf.broadcast_to(b, shape)


class _Real(Semiring):
    """Ordinary (+, x) on real numbers."""

    def zeros(self, shape: TensorLike, dtype: Any = None) -> Any:
        return tf.zeros(shape, _dtype(dtype))

    def ones(self, shape: TensorLike, dtype: Any = None) -> Any:
        return tf.ones(shape, _dtype(dtype))

    def times(self, a: Any, b: Any) -> Any:
        return a * b

    def plus(self, a: Any, b: Any) -> Any:
        return a + b

    def prod(self, a: Any, axis: int) -> Any:
        return tf.reduce_prod(a, axis=_check_axis(a, axis))

    def sum(self, a: Any, axis: int) -> Any:
        return tf.reduce_sum(a, axis=_check_axis(a, axis))

    def __repr__(self) -> str:
        return "Real"


@tf.custom_gradient
def _logaddexp(a, b):
    top = tf.maximum(a, b)
    shift = tf.where(tf.math.is_finite(top), top, tf.zeros_like(top))
    ea, eb = tf.exp(a - shift), tf.exp(b - shift)
    total = ea + eb

    def grad(g):
        scale = g / tf.where(total > 0, total, tf.ones_like(total))
        return scale * ea, scale * eb

    return shift + tf.math.log(total), grad


def _logsumexp(a, axis):
    @tf.custom_gradient
    def lse(x):
        top = tf.reduce_max(x, axis=axis, keepdims=True)
        shift = tf.where(tf.math.is_finite(top), top, tf.zeros_like(top))
        e = tf.exp(x - shift)
        total = tf.reduce_sum(e, axis=axis, keepdims=True)

        def grad(g):
            safe = tf.where(total > 0, total, tf.ones_like(total))
            return tf.expand_dims(g, axis) / safe * e

        value = tf.squeeze(shift, axis) + tf.math.log(tf.squeeze(total, axis))
        return value, grad

    return lse(a)


class _LogDomain(Semiring):
    """Weights kept as logs: zero is -inf, one is 0, times is +."""

    def zeros(self, shape: TensorLike, dtype: Any = None) -> Any:
        return tf.fill(shape, tf.constant(float("-inf"), _dtype(dtype)))

    def ones(self, shape: TensorLike, dtype: Any = None) -> Any:
        return tf.zeros(shape, _dtype(dtype))

    def times(self, a: Any, b: Any) -> Any:
        return a + b

    def prod(self, a: Any, axis: int) -> Any:
        return tf.reduce_sum(a, axis=_check_axis(a, axis))


class _Log(_LogDomain):
    """(logaddexp, +) on log weights."""

    def plus(self, a: Any, b: Any) -> Any:
        return _logaddexp(*_broadcast(a, b))

    def sum(self, a: Any, axis: int) -> Any:
        return _logsumexp(a, _check_axis(a, axis))

    def __repr__(self) -> str:
        return "Log"


@tf.custom_gradient
def _maximum(a, b):
    take_a = tf.cast(a >= b, a.dtype)

    def grad(g):
        return g * take_a, g * (1 - take_a)

    return tf.maximum(a, b), grad


def _first_max_mask(a, axis):
    """1.0 at the first largest element along axis (0.0 elsewhere)."""
    rank = a.shape.rank
    top = tf.reduce_max(a, axis=axis, keepdims=True)
    size = tf.shape(a)[axis]
    shape = [1] * rank
    shape[axis] = -1
    index = tf.reshape(tf.range(size), shape)
    first = tf.reduce_min(
        tf.where(tf.equal(a, top), index, size), axis=axis, keepdims=True
    )
    return tf.cast(tf.equal(index, first), a.dtype)


def _max(a, axis):
    @tf.custom_gradient
    def reduce_max(x):
        def grad(g):
            return tf.expand_dims(g, axis) * _first_max_mask(x, axis)

        return tf.reduce_max(x, axis=axis), grad

    return reduce_max(a)


class _MaxTropical(_LogDomain):
    """(max, +) on log weights."""

    def plus(self, a: Any, b: Any) -> Any:
        return _maximum(*_broadcast(a, b))

    def sum(self, a: Any, axis: int) -> Any:
        axis = _check_axis(a, axis)
        empty = tf.equal(tf.shape(a)[axis], 0)
        # reduce_max of nothing gives the dtype's lowest finite value: make it -inf.
        value = _max(a, axis)
        return tf.where(empty, tf.constant(float("-inf"), a.dtype), value)

    def __repr__(self) -> str:
        return "MaxTropical"


Real = _Real()
Log = _Log()
MaxTropical = _MaxTropical()


def _per_leaf(dtype: Any, count: int) -> tuple[Any, ...]:
    if isinstance(dtype, (tuple, list)):
        if len(dtype) != count:
            raise ValueError(f"dtype must have {count} entries, got {dtype!r}")
        return tuple(dtype)
    return (dtype,) * count


class Cartesian(Semiring):
    """The product of two semirings.

    Values are (x value, y value); operations apply to each side.

    Args:
      x: the semiring of the first side.
      y: the semiring of the second side.
    """

    def __init__(self, x: Semiring, y: Semiring) -> None:
        self.x, self.y = x, y

    def zeros(self, shape: TensorLike, dtype: Any = None) -> Any:
        dx, dy = _per_leaf(dtype, 2)
        return self.x.zeros(shape, dx), self.y.zeros(shape, dy)

    def ones(self, shape: TensorLike, dtype: Any = None) -> Any:
        dx, dy = _per_leaf(dtype, 2)
        return self.x.ones(shape, dx), self.y.ones(shape, dy)

    def times(self, a: Any, b: Any) -> Any:
        return self.x.times(a[0], b[0]), self.y.times(a[1], b[1])

    def plus(self, a: Any, b: Any) -> Any:
        return self.x.plus(a[0], b[0]), self.y.plus(a[1], b[1])

    def prod(self, a: Any, axis: int) -> Any:
        return self.x.prod(a[0], axis), self.y.prod(a[1], axis)

    def sum(self, a: Any, axis: int) -> Any:
        return self.x.sum(a[0], axis), self.y.sum(a[1], axis)

    def __repr__(self) -> str:
        return f"Cartesian({self.x!r}, {self.y!r})"


class Expectation(Semiring):
    """Eisner's expectation semiring.

    Values are (w, x), a weight w (semiring `w`) and a weighted sum x
    (semiring `x`); `w_to_x` maps weights into `x`.

        (w1, x1) * (w2, x2) = (w1 w2, w1 x2 + w2 x1)
        (w1, x1) + (w2, x2) = (w1 + w2, x1 + x2)

    The path sum of `weighted(w, v)` arc values is (sum of path weights,
    sum of path weight x path value): e.g. with v = -w under
    `LogLogExpectation`, the entropy numerator.
    """

    def __init__(
        self, w: Semiring, x: Semiring, w_to_x: Callable[[tf.Tensor], tf.Tensor]
    ) -> None:
        self.w, self.x, self.w_to_x = w, x, w_to_x

    def weighted(self, w: TensorLike, v: TensorLike) -> tuple[tf.Tensor, tf.Tensor]:
        """The value of weight w carrying value v: (w, w_to_x(w) * v).

        Where w is the zero, the value is the x zero whatever v is (so
        0 log 0 = 0).
        """
        w = tf.convert_to_tensor(w)
        v = tf.convert_to_tensor(v, w.dtype)
        is_zero = tf.equal(w, self.w.zeros([], w.dtype))
        safe_v = tf.where(is_zero, tf.zeros_like(v), v)
        x = self.x.times(self.w_to_x(w), safe_v)
        return w, tf.where(is_zero, self.x.zeros(tf.shape(x), x.dtype), x)

    def zeros(self, shape: TensorLike, dtype: Any = None) -> Any:
        dw, dx = _per_leaf(dtype, 2)
        return self.w.zeros(shape, dw), self.x.zeros(shape, dx)

    def ones(self, shape: TensorLike, dtype: Any = None) -> Any:
        dw, dx = _per_leaf(dtype, 2)
        return self.w.ones(shape, dw), self.x.zeros(shape, dx)

    def times(self, a: Any, b: Any) -> Any:
        (wa, xa), (wb, xb) = a, b
        x = self.x.plus(
            self.x.times(self.w_to_x(wa), xb), self.x.times(self.w_to_x(wb), xa)
        )
        return self.w.times(wa, wb), x

    def plus(self, a: Any, b: Any) -> Any:
        return self.w.plus(a[0], b[0]), self.x.plus(a[1], b[1])

    def sum(self, a: Any, axis: int) -> Any:
        return self.w.sum(a[0], axis), self.x.sum(a[1], axis)

    def __repr__(self) -> str:
        return f"Expectation({self.w!r}, {self.x!r})"


LogLogExpectation = Expectation(Log, Log, lambda w: w)
"""Expectation semiring with weights and weighted sums both in `Log`: the
weighted values must be >= 0 (their logs are stored)."""


def value_shape(x: Any) -> tf.TensorShape:
    """The common shape of the leaves of a semiring value (a TensorShape)."""
    leaves = tf.nest.flatten(x)
    shapes = [tf.convert_to_tensor(leaf).shape for leaf in leaves]
    for shape in shapes[1:]:
        if shape != shapes[0]:
            raise ValueError(
                f"a semiring value's leaves must share one shape, got {shapes}"
            )
    return shapes[0]


def value_dtype(x: Any) -> Any:
    """The dtypes of a semiring value, in its structure."""
    return tf.nest.map_structure(lambda leaf: tf.convert_to_tensor(leaf).dtype, x)
