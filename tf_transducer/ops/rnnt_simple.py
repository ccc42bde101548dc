# SPDX-License-Identifier: Apache-2.0
"""The "simple" RNN-T loss (k2's rnnt_loss_simple): the joiner is lm + am.

Its log-probs are log_softmax(lm[b, s] + am[b, t]) at the symbols and the
blank, computed without forming [B, S + 1, T, C]. The lattices, rnnt_type
and delay_penalty are as in `tf_transducer.ops.rnnt`.
"""

from collections.abc import Callable
from typing import Any
from typing import NamedTuple

import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer._checks import after
from tf_transducer._checks import finite_or_neg_inf
from tf_transducer._checks import float_tensor
from tf_transducer._checks import refuse
from tf_transducer._checks import require
from tf_transducer.ops._validation import _check_boundary
from tf_transducer.ops._validation import _check_frames
from tf_transducer.ops._validation import _check_options
from tf_transducer.ops._validation import _check_symbols
from tf_transducer.ops._validation import _check_termination
from tf_transducer.ops._validation import _dim
from tf_transducer.ops.rnnt_lattice import _NEG_INF
from tf_transducer.ops.rnnt_lattice import _finish_logprobs
from tf_transducer.ops.rnnt_lattice import _loss_from_logprobs
from tf_transducer.ops.rnnt_lattice import _resolve_boundary


def _boundary_for_simple(boundary, logit_lengths, label_lengths, lm, am):
    """boundary of the simple losses, or one built from the lengths."""
    if logit_lengths is None and label_lengths is None:
        return boundary if boundary is None else _check_boundary(boundary)
    lm = tf.convert_to_tensor(lm, name="lm")
    am = tf.convert_to_tensor(am, name="am")
    if lm.shape.rank != 3 or am.shape.rank != 3:
        return boundary  # get_rnnt_logprobs names the bad one
    return _resolve_boundary(
        boundary, logit_lengths, label_lengths, _dim(am, 1), _dim(lm, 1) - 1
    )


def get_rnnt_logprobs(
    lm: TensorLike, am: TensorLike, symbols: TensorLike, termination_symbol: int,
    rnnt_type: str = "regular", boundary: TensorLike | None = None,
) -> tuple[tf.Tensor, tf.Tensor]:  # fmt: skip
    """px, py of the "simple" RNN-T, whose joiner is lm + am.

    The log-probs are log_softmax(lm[b, s] + am[b, t]) at the symbol and at
    the termination symbol, computed without forming [B, S + 1, T, C]: the
    normalisers are log((exp(lm) @ exp(am)^T)) with max-shifts for range
    (see `_simple_parts`). Half-precision inputs are computed in float32.

    Args:
      lm: float [B, S + 1, C], the prediction-network ("language model") part.
      am: float [B, T, C], the encoder ("acoustic model") part.
      symbols: int [B, S], values in [0, C); S may be 0 (every transcript
        empty: each frame emits a blank).
      termination_symbol: int in [0, C), the blank.
      rnnt_type: "regular", "modified" or "constrained".
      boundary: optional int [B, 4] rows (s_begin, t_begin, s_end, t_end).

    Returns:
      px: [B, S, T + 1] (regular) or [B, S, T]; py: [B, S + 1, T]; float32
      or float64.
    """
    _check_options(rnnt_type)
    with tf.name_scope("get_rnnt_logprobs"):
        lm, am, symbols, _ = _simple_inputs(
            lm, am, symbols, termination_symbol, rnnt_type, boundary
        )

        def logprobs(lm, am):
            parts = _simple_parts(lm, am, symbols, termination_symbol, rnnt_type)
            px = parts.px_am + parts.px_lm
            px -= _pad_frames(_split_last_row(parts.normalizers)[0], rnnt_type)
            py = parts.py_am + parts.py_lm - parts.normalizers
            return px, py, parts.fits

        px, py = _with_float64_fallback(logprobs, lm, am)
        return _finish_logprobs(px, py, boundary, rnnt_type)


def _tiny(dtype):
    return tf.constant(tf.experimental.numpy.finfo(dtype.as_numpy_dtype).tiny, dtype)


# The smallest exp-domain normaliser the float32 simple loss trusts: below it
# log() loses precision and its gradient 1 / x overflows once summed over
# frames, so the log-probs are computed again in float64.
_FLOAT32_SAFE_MIN = 1e-30


def _split_last_row(x):
    """x [B, R, ...] -> (x[:, :-1], x[:, -1:]).

    A split, whose gradient is a concat: a strided slice's is several times
    slower.
    """
    return tf.split(x, tf.stack([tf.shape(x)[1] - 1, 1]), axis=1)


def _pad_frames(x, rnnt_type):
    """[..., T] -> [..., T + 1] with a 0 for regular px (whose column T is -inf)."""
    if rnnt_type != "regular":
        return x
    return tf.pad(x, [[0, 0]] * (x.shape.rank - 1) + [[0, 1]])


def _simple_inputs(
    lm: TensorLike, am: TensorLike, symbols: TensorLike, termination_symbol: int,
    rnnt_type: str, boundary: TensorLike | None,
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor | None]:  # fmt: skip
    """Checked (lm, am, symbols, used rows) of the simple log-probs.

    lm and am come back as float32 (half precision in) or float64; the used
    rows are those of lm inside the boundary, bool [B, S + 1] (None without a
    boundary).
    """
    lm = float_tensor(lm, "lm", 3, "[B, S + 1, C]")
    am = float_tensor(am, "am", 3, "[B, T, C]")
    dtype = tf.float64 if tf.float64 in (lm.dtype, am.dtype) else tf.float32
    lm, am = tf.cast(lm, dtype), tf.cast(am, dtype)
    for axis, what in ((0, "B"), (2, "C")):
        if (
            None not in (lm.shape[axis], am.shape[axis])
            and lm.shape[axis] != am.shape[axis]
        ):
            raise ValueError(f"lm {lm.shape} and am {am.shape} must agree in {what}")
        if None in (lm.shape[axis], am.shape[axis]):
            require(
                tf.equal(tf.shape(lm)[axis], tf.shape(am)[axis]),
                f"lm and am must agree in {what}, got lm {{}} and am {{}}",
                tf.shape(lm),
                tf.shape(am),
            )
    _check_termination(termination_symbol, _dim(am, 2))
    symbols = _check_symbols(symbols, _dim(am, 0), _dim(lm, 1) - 1, _dim(am, 2))
    _check_frames(_dim(am, 1), _dim(symbols, 1), rnnt_type)
    used_rows = used_frames = None
    if boundary is not None:
        used_rows, used_frames = _used_by_boundary(
            _check_boundary(boundary, lm.shape[0]), lm, am
        )
    with after(
        _no_row_of_neg_inf(lm, used_rows, "lm", "row [b, s]"),
        _no_row_of_neg_inf(am, used_frames, "am", "frame [b, t]"),
    ):
        lm, am = tf.identity(lm), tf.identity(am)
    return lm, am, symbols, used_rows


def _no_row_of_neg_inf(x, used, name, what):
    """A check that every used row of x [B, R, C] holds a value above -inf.

    The joiner's log-softmax of a row of lm (or a frame of am) that is -inf
    throughout is -inf - -inf, NaN: refused, naming `name`. used: bool
    [B, R], or None (every row). Returns the check (for `after`).
    """
    row_max = tf.reduce_max(x, axis=2)  # -inf for a row of -inf alone
    bad = tf.equal(row_max, _NEG_INF)
    if used is not None:
        bad &= used
    if tf.executing_eagerly() and not bool(tf.reduce_any(bad)):
        return None
    return refuse(
        bad,
        row_max,
        f"{name} must hold a value above -inf in every {what} the lattice "
        "reads (a row of -inf has no log-softmax)",
    )


def _used_by_boundary(boundary, lm, am):
    """(rows of lm [B, S + 1], frames of am [B, T]) inside the boundary."""
    s = tf.range(tf.shape(lm, out_type=tf.int64)[1])[tf.newaxis]
    t = tf.range(tf.shape(am, out_type=tf.int64)[1])[tf.newaxis]
    rows = (s >= boundary[:, 0:1]) & (s <= boundary[:, 2:3])
    frames = (t >= boundary[:, 1:2]) & (t < boundary[:, 3:4])
    return rows, frames


def _simple_loss_inputs(
    lm: TensorLike, am: TensorLike, boundary: TensorLike | None
) -> tuple[tf.Tensor, tf.Tensor]:
    """lm and am of a simple loss, zeroed outside the boundary and checked inside.

    The rows and frames outside the boundary become 0, so that padding is
    never read: no value there can reach the loss or raise. Inside it, NaN /
    +inf are checked for.
    """
    lm = float_tensor(lm, "lm", 3, "[B, S + 1, C]")
    am = float_tensor(am, "am", 3, "[B, T, C]")
    if boundary is not None:
        boundary = _check_boundary(boundary, _dim(lm, 0))
        rows, frames = _used_by_boundary(boundary, lm, am)
        # 0 where the mask is 0, even for NaN or inf (a broadcast select
        # costs several times this product).
        lm = tf.math.multiply_no_nan(lm, tf.cast(rows, lm.dtype)[..., tf.newaxis])
        am = tf.math.multiply_no_nan(am, tf.cast(frames, am.dtype)[..., tf.newaxis])
    finite_or_neg_inf(lm, "lm")
    finite_or_neg_inf(am, "am")
    return lm, am


def _with_float64_fallback(
    logprobs_fn: Callable[[tf.Tensor, tf.Tensor], Any], lm: tf.Tensor, am: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor]:
    """(px, py) = logprobs_fn(lm, am)[:2], with a float64 retry on underflow.

    When the float32 computation reports (third result False) that it
    underflowed, it is computed again in float64 and cast back to float32.
    """
    px, py, fits = logprobs_fn(lm, am)
    if lm.dtype == tf.float64:
        return px, py

    def exact():
        px64, py64, _ = logprobs_fn(tf.cast(lm, tf.float64), tf.cast(am, tf.float64))
        return tf.cast(px64, px.dtype), tf.cast(py64, py.dtype)

    return tf.cond(fits, lambda: (px, py), exact)


class _SimpleParts(NamedTuple):
    """The pieces of the simple joiner's log-probs (see `_simple_parts`)."""

    lm_max: tf.Tensor  # [B, S + 1, 1]
    am_max: tf.Tensor  # [B, T, 1]
    lm_probs: tf.Tensor  # exp(lm - lm_max) [B, S + 1, C]
    am_probs: tf.Tensor  # exp(am - am_max) [B, T, C]
    normalizers: tf.Tensor  # [B, S + 1, T]
    px_am: tf.Tensor  # am at the symbols [B, S, T (+ 1)]
    px_lm: tf.Tensor  # lm at the symbols [B, S, 1]
    py_am: tf.Tensor  # am at the blank [B, 1, T]
    py_lm: tf.Tensor  # lm at the blank [B, S + 1, 1]
    fits: tf.Tensor  # bool: every normaliser is in range for this dtype


def _simple_parts(lm, am, symbols, termination_symbol, rnnt_type):
    """The pieces of the simple joiner's log-probs, from checked inputs.

    normalizers[b, s, t] = log sum_c exp(lm[b, s, c] + am[b, t, c]), from
    exp(lm - lm_max) @ exp(am - am_max)^T (plus the smallest normal number,
    so that the log stays finite) without forming [B, S + 1, T, C].
    """
    lm_max = tf.stop_gradient(tf.reduce_max(lm, axis=2, keepdims=True))
    am_max = tf.stop_gradient(tf.reduce_max(am, axis=2, keepdims=True))
    lm_probs, am_probs = tf.exp(lm - lm_max), tf.exp(am - am_max)
    products = tf.matmul(lm_probs, am_probs, transpose_b=True)
    normalizers = (
        tf.math.log(products + _tiny(lm.dtype))
        + lm_max
        + tf.transpose(am_max, [0, 2, 1])
    )  # [B, S + 1, T]
    if lm.dtype == tf.float32:
        fits = tf.reduce_all(products >= _FLOAT32_SAFE_MIN)
    else:
        fits = tf.constant(True)
    # picks: the symbols, then the blank, [B, S + 1]. One gather of am and
    # one of lm read every term of px and py; their gradients are scatters
    # into zeros (no slice of am or lm on the gradient path).
    blanks = tf.fill(
        [tf.shape(symbols)[0], tf.shape(symbols)[1] + 1],
        tf.cast(termination_symbol, symbols.dtype),
    )
    picks = tf.concat([symbols, blanks[:, :1]], axis=1)
    am_picked = tf.transpose(
        tf.gather(am, picks, axis=2, batch_dims=1), [0, 2, 1]
    )  # [B, S + 1, T]
    lm_picked = tf.gather(
        lm, tf.stack([picks, blanks], axis=2), axis=2, batch_dims=2
    )  # [B, S + 1, 2]: lm at picks, lm at the blank
    px_am, py_am = _split_last_row(am_picked)
    if rnnt_type == "regular":
        px_am = tf.pad(px_am, [[0, 0], [0, 0], [0, 1]], constant_values=_NEG_INF)
    return _SimpleParts(
        lm_max=lm_max,
        am_max=am_max,
        lm_probs=lm_probs,
        am_probs=am_probs,
        normalizers=normalizers,
        px_am=px_am,
        px_lm=_split_last_row(lm_picked)[0][..., :1],
        py_am=py_am,
        py_lm=lm_picked[:, :, 1:],
        fits=fits,
    )


def rnnt_loss_simple(
    lm: TensorLike, am: TensorLike, symbols: TensorLike, termination_symbol: int,
    boundary: TensorLike | None = None, rnnt_type: str = "regular",
    delay_penalty: float = 0.0, reduction: str = "mean", return_grad: bool = False,
    logit_lengths: TensorLike | None = None, label_lengths: TensorLike | None = None,
) -> tf.Tensor | tuple[tf.Tensor, tuple[tf.Tensor, tf.Tensor]]:  # fmt: skip
    """RNN-T loss whose joiner is addition: log_softmax(lm[b, s] + am[b, t]).

    Args:
      lm: float [B, S + 1, C].
      am: float [B, T, C].
      symbols: int [B, S], values in [0, C); S may be 0 (every transcript
        empty: each frame emits a blank).
      termination_symbol: int in [0, C), the blank.
      boundary: optional int [B, 4] rows (s_begin, t_begin, s_end, t_end),
        default (0, 0, S, T).
      rnnt_type: "regular", "modified" or "constrained".
      delay_penalty: float >= 0, see the module docstring.
      reduction: "none" ([B] losses), "mean" or "sum" (scalars).
      return_grad: also return (px_grad, py_grad), the occupation
        probabilities of the lattice's steps (what the pruned loss uses to
        choose its ranges), as constants.
      logit_lengths: optional int [B] frames, with label_lengths instead of
        boundary.
      label_lengths: optional int [B] symbols, with logit_lengths.

    Returns:
      loss, or (loss, (px_grad, py_grad)) with return_grad.
    """
    delay_penalty = _check_options(rnnt_type, reduction, delay_penalty)
    with tf.name_scope("rnnt_loss_simple"):
        boundary = _boundary_for_simple(boundary, logit_lengths, label_lengths, lm, am)
        lm, am = _simple_loss_inputs(lm, am, boundary)
        px, py = get_rnnt_logprobs(
            lm, am, symbols, termination_symbol, rnnt_type=rnnt_type, boundary=boundary
        )
        return _loss_from_logprobs(
            px, py, boundary, rnnt_type, delay_penalty, reduction, return_grad
        )
